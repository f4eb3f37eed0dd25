import Foundation

/// The in-memory store's rows as the targets of references, for a predicate across a relationship: a snapshot
/// of its tables taken with the rows the predicate filters, so that the whole evaluation sees one state (as a
/// statement sees one snapshot). Rows are decoded when read.
struct InMemoryTargets: ReferenceTargetSource {
    let tables: [String: InMemoryTable]

    func target<T: Entity>(_ type: T.Type, id: T.ID) throws -> T? {
        let plan = try EntityPlan<T>.shared
        guard let row = self.tables[plan.tableName]?.rows[try plan.idValue(id)] else { return nil }
        return try RowDecoder(plan: plan).decode(values: row.values(for: plan))
    }
}
