/// How many changed rows each table has: a short list searched in order (a stack or context touches a few
/// tables), so counting a write compares table names — usually the same string, a pointer comparison —
/// instead of hashing one into a dictionary on every write.
struct TableCounts: Sendable {
    private var tables: [String] = []
    private var counts: [Int] = []

    /// The count for `table` (0 when it has none).
    subscript(table: String) -> Int {
        get { self.tables.firstIndex(of: table).map { self.counts[$0] } ?? 0 }
        set {
            if let index = self.tables.firstIndex(of: table) {
                self.counts[index] = newValue
            } else if newValue != 0 {
                self.tables.append(table)
                self.counts.append(newValue)
            }
        }
    }
}
