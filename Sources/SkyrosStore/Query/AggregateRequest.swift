import Foundation
import SkyrosPostgres

/// What a store evaluates for a typed aggregate or projection: the rows (a ``FetchDescriptor``), and either
/// aggregates with an optional group-by column, or a list of columns. Built by the typed `aggregate` and
/// `fetch(_:as:propertiesToFetch:)` methods and passed to ``Store/evaluate(_:)``. Its contents are opaque: a
/// store of another package keeps the default `evaluate` (its own fetch, then the computation in memory).
///
/// ```swift
/// // Built for you:
/// let (count, total) = try await store.aggregate(FetchDescriptor<Ticket>(), .count, .sum(\.price))
/// ```
public struct AggregateRequest<T: Entity>: Sendable {
    package enum Selection: Sendable {
        /// `SELECT [g1, g2 …,] f1, f2 … [GROUP BY g1, g2 … ORDER BY g1, g2 …]`; no group columns: one row.
        case aggregates(groups: [AggregateGroupColumn<T>], functions: [AggregateSpec<T>])
        /// `SELECT c1, c2 … ORDER BY … LIMIT … OFFSET …` (a projection).
        case columns([String])
    }

    /// The rows aggregated or projected (its sort and window apply before aggregation, as for `count`).
    package var descriptor: FetchDescriptor<T>
    package var selection: Selection

    package init(descriptor: FetchDescriptor<T>, selection: Selection) {
        self.descriptor = descriptor
        self.selection = selection
    }
}

/// The group-by column of an aggregate request.
package struct AggregateGroupColumn<T: Entity>: @unchecked Sendable {
    // @unchecked Sendable: an immutable key path and a Sendable closure.
    package let keyPath: AnyKeyPath
    /// Whether one group's key sorts before another's, as SQL's `ORDER BY` on the column does (`NULL` first,
    /// strings by code point).
    package let precedes: @Sendable (T, T) -> Bool

    package init<K>(_ keyPath: KeyPath<T, K>) {
        self.keyPath = keyPath
        nonisolated(unsafe) let keyPath = keyPath
        self.precedes = { a, b in groupKeyPrecedes(a[keyPath: keyPath], b[keyPath: keyPath]) }
    }
}

/// The result of an ``AggregateRequest``: one array of cells per row, as PostgreSQL returns them (or as the
/// in-memory evaluation encodes them), which the typed methods decode. Opaque, like the request.
public struct AggregateRows: Sendable {
    package var rows: [[PGValue]]

    package init(rows: [[PGValue]]) { self.rows = rows }

    /// The cells of a query's result.
    package init(_ result: PGRows) {
        let columns = result.columns
        self.rows = (0..<result.count).map { row in
            columns.indices.map { column in
                PGValue(type: columns[column].type, text: result.cellBytes(row: row, column: column).map { String(decoding: $0, as: UTF8.self) })
            }
        }
    }
}

/// Whether group key `a` sorts before `b`: `NULL` first, strings by code point, `false` before `true`,
/// otherwise by `Comparable` or by raw value (the order `ORDER BY` gives the group column).
private func groupKeyPrecedes(_ a: Any, _ b: Any) -> Bool {
    let a = unwrapped(a)
    let b = unwrapped(b)
    switch (a, b) {
    case (nil, nil): return false
    case (nil, _): return true
    case (_, nil): return false
    case let (a?, b?):
        if let a = a as? String, let b = b as? String { return codePointPrecedes(a, b) }
        if let a = a as? Bool, let b = b as? Bool { return !a && b }
        if let a = a as? any Comparable { return precedesOpened(a, b) }
        if let a = a as? any RawRepresentable, let b = b as? any RawRepresentable {
            return groupKeyPrecedes(a.rawValue, b.rawValue)
        }
        return codePointPrecedes(String(describing: a), String(describing: b))
    }
}

private func precedesOpened<C: Comparable>(_ a: C, _ b: Any) -> Bool {
    guard let b = b as? C else { return false }
    return aggregateOrder(a, b)
}

/// The value inside any level of `Optional`, or `nil`.
private func unwrapped(_ value: Any) -> Any? {
    if let optional = value as? any OptionalUnwrapping { return optional.unwrappedValue.flatMap(unwrapped) }
    return value
}

private protocol OptionalUnwrapping {
    var unwrappedValue: Any? { get }
}

extension Optional: OptionalUnwrapping {
    fileprivate var unwrappedValue: Any? { self.map { $0 as Any } }
}
