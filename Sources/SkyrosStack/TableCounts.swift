import SkyrosStore

/// How many changed rows each table has: the first table inline, the others in a short list searched in order
/// (a stack or context touches a few tables, a write's context usually one). Counting a write compares table
/// names — usually the same string, a pointer comparison — instead of hashing one into a dictionary, and a
/// context that touches one table allocates nothing for its counts.
struct TableCounts: Sendable {
    private var firstTable: String?
    private var firstCount = 0
    private var others: [(table: String, count: Int)] = []

    /// The count for `table` (0 when it has none).
    subscript(table: String) -> Int {
        get {
            if let first = self.firstTable, first == table { return self.firstCount }
            return self.others.first { $0.table == table }?.count ?? 0
        }
        set {
            if let first = self.firstTable, first == table {
                self.firstCount = newValue
            } else if let index = self.others.firstIndex(where: { $0.table == table }) {
                self.others[index].count = newValue
            } else if newValue != 0 {
                if self.firstTable == nil {
                    (self.firstTable, self.firstCount) = (table, newValue)
                } else {
                    self.others.append((table, newValue))
                }
            }
        }
    }
}
