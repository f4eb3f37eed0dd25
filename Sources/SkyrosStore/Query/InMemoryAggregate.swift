import Foundation
import SkyrosPostgres

/// Evaluates an ``AggregateRequest`` over values in memory, with the cells PostgreSQL returns for its SQL
/// (``SQLQueryBuilder/aggregate(_:schema:)``): the in-memory store, store doubles, and contexts whose unsaved
/// or queued changes touch the table use it.
///
/// Rows are grouped by the group column's encoded value (the text bound to PostgreSQL, with `numeric`
/// trailing zeros and a float's negative zero made one: equal exactly when PostgreSQL's `GROUP BY` finds them
/// equal, `NULL` forming one group), and groups are ordered as SQL's
/// `ORDER BY` on that column (`NULL` first, strings by code point). Without a group-by column there is always
/// one row, over no values when none match (`count` 0, the others `NULL`), as in SQL.
///
/// ```swift
/// let matching = try InMemoryQuery.apply(request.descriptor, to: values)
/// let rows = try InMemoryAggregate.evaluate(request, over: matching)
/// ```
package enum InMemoryAggregate {
    /// The result rows of `request` over `values`, which are the rows its descriptor selects, in order.
    /// - Throws: ``QueryError`` as the SQL translation would; `PGError` 22003 for an integer sum out of range.
    package static func evaluate<T: Entity>(_ request: AggregateRequest<T>, over values: [T]) throws -> AggregateRows {
        _ = try SQLQueryBuilder.aggregate(request, schema: nil)
        switch request.selection {
        case .columns(let names):
            let plan = try EntityPlan<T>.shared
            let indices = names.map { plan.columnIndex[$0]! }
            let encoder = RowEncoder(plan: plan)
            return AggregateRows(rows: try values.map { value in
                let encoded = try encoder.encode(value)
                return indices.map { encoded[$0] }
            })

        case .aggregates(let groups, let functions) where groups.isEmpty:
            return AggregateRows(rows: [try functions.map { try $0.compute(values) }])

        case .aggregates(let groups, let functions):
            let plan = try EntityPlan<T>.shared
            let metadata = try EntityQueryMetadata.of(T.self)
            let indices = groups.map { plan.columnIndex[metadata.columnsByKeyPath[$0.keyPath]!.name]! }
            let encoder = RowEncoder(plan: plan)
            var order: [[String?]] = []
            var found: [[String?]: (keys: [PGValue], rows: [T])] = [:]
            for value in values {
                let encoded = try encoder.encode(value)
                let cells = indices.map { encoded[$0] }
                let identity = cells.map { cell in cell.text.map { groupText($0, cell.type) } }
                if found[identity] == nil {
                    order.append(identity)
                    found[identity] = (cells, [])
                }
                found[identity]!.rows.append(value)
            }
            let sorted = order.map { found[$0]! }.sorted { a, b in
                for group in groups {
                    if group.precedes(a.rows[0], b.rows[0]) { return true }
                    if group.precedes(b.rows[0], a.rows[0]) { return false }
                }
                return false
            }
            return AggregateRows(rows: try sorted.map { entry in
                entry.keys + (try functions.map { try $0.compute(entry.rows) })
            })
        }
    }
}

/// The text that identifies a group: the encoded value, with the spellings PostgreSQL finds equal made one
/// (`numeric` trailing zeros: 1.5 = 1.50; a float's negative zero: -0.0 = 0.0). A NULL's type is irrelevant.
private func groupText(_ text: String, _ type: PGType) -> String {
    switch type {
    case .numeric where text.contains(".") && !text.contains("e") && !text.contains("E"):
        var trimmed = Substring(text)
        while trimmed.hasSuffix("0") { trimmed = trimmed.dropLast() }
        if trimmed.hasSuffix(".") { trimmed = trimmed.dropLast() }
        return trimmed == "-0" ? "0" : String(trimmed)
    case .float4, .float8:
        return text == "-0.0" || text == "-0" ? "0.0" : text
    default:
        return text
    }
}
