import Foundation
import SkyrosPostgres

/// "The rows after a cursor" in a fetch's order, as SQL for PostgreSQL and as a test on values in memory (the
/// in-memory store, and the overlay of unsaved and queued changes), so that both page alike.
///
/// The order is the descriptor's sort (or `T.defaultSort`), then the primary key ascending, with `nil` first
/// ascending and last descending — the order ``SQLQueryBuilder/orderBy(_:)`` and ``InMemoryQuery/sorted(_:by:)``
/// produce. A row is after the cursor when, at the first key column where they differ, it comes later.
///
/// ```swift
/// // sortBy: [SortDescriptor(\.name)], cursor ("Ann", 7):
/// //   ("name"::text, "id") > ($1, $2)                          binds: ["Ann", "7"], untyped
/// // sortBy: [SortDescriptor(\.createdAt, order: .reverse)], cursor (t, 7):
/// //   ("created_at" <= $1 AND (("created_at" < $1) OR (("created_at" = $1) AND ("id" > $2))))
/// ```
///
/// A row comparison when every column sorts the same way and none is optional (an index on the sort columns
/// and the key serves it as one range); otherwise the expanded form, led by a bound on the first column that
/// an index on it serves. Values are bound untyped, so that PostgreSQL gives each the type of its column.
package enum Keyset {
    /// One column of a cursor's key, checked against the fetch.
    struct Part {
        let column: EntityQueryMetadata.Column
        let ascending: Bool
        let value: String?
    }

    /// The cursor's key as columns of `T`, checked against the fetch's sort.
    /// - Throws: ``QueryError`` (`invalidCursor`) when the cursor is another entity's, another sort's, or holds
    ///   `nil` for a column that cannot be `nil`; the sort's own errors.
    static func parts<T: Entity>(
        _ cursor: PageCursor, _ sort: [SortDescriptor<T>], _ metadata: EntityQueryMetadata
    ) throws -> [Part] {
        let columns = try SQLQueryBuilder.sortColumns(sort, metadata)
        let key = cursor.key
        guard key.table == T.tableName else {
            throw self.invalid(metadata, "the cursor is for the table \"\(key.table)\", not \(T.self)'s \"\(T.tableName)\"")
        }
        guard key.columns == columns.map(\.0.name), key.ascending == columns.map(\.1) else {
            throw self.invalid(metadata, "the cursor was made for another sort: use the sort descriptors of the fetch that returned it")
        }
        var parts: [Part] = []
        for ((column, ascending), value) in zip(columns, key.values) {
            if value == nil && !column.isOptional {
                throw self.invalid(metadata, "the cursor holds no value for the column \"\(column.name)\", which cannot be nil")
            }
            parts.append(Part(column: column, ascending: ascending, value: value))
        }
        return parts
    }

    private static func invalid(_ metadata: EntityQueryMetadata, _ message: String) -> QueryError {
        QueryError(code: .invalidCursor, entity: metadata.entityName, construct: "PageCursor", message: message)
    }

    // MARK: SQL

    /// Writes the condition "after `cursor`" (a parenthesized boolean expression; `NULL` only where it is false).
    /// - Throws: ``QueryError`` as ``parts(_:_:_:)``.
    static func writeCondition<T: Entity>(
        after cursor: PageCursor, sort: [SortDescriptor<T>], into writer: inout SQLWriter
    ) throws {
        let parts = try self.parts(cursor, sort, writer.metadata)
        var placeholders: [String?] = []
        for part in parts {
            guard let value = part.value else {
                placeholders.append(nil)
                continue
            }
            writer.binds.append(PGValue(type: .unspecified, text: value))
            placeholders.append("$\(writer.binds.count)")
        }
        // As the sort and the predicates reference them (strings as text: a no-op on `text` columns).
        let references = parts.map { $0.column.quoted + ($0.column.isString ? "::text" : "") }

        let uniform = parts.allSatisfy { $0.ascending == parts[0].ascending && !$0.column.isOptional }
        if uniform {
            let op = parts[0].ascending ? ">" : "<"
            let values = placeholders.map { $0 ?? "NULL" }
            if parts.count == 1 {
                writer.append("(\(references[0]) \(op) \(values[0]))")
            } else {
                writer.append("((\(references.joined(separator: ", "))) \(op) (\(values.joined(separator: ", "))))")
            }
            return
        }

        /// Rows whose column `i` comes after the cursor's; `nil` when none can (nothing follows NULL descending).
        func after(_ i: Int) -> String? {
            let reference = references[i]
            switch (parts[i].ascending, placeholders[i]) {
            case (true, let value?): return "(\(reference) > \(value))"
            case (true, nil): return "(\(reference) IS NOT NULL)"
            case (false, let value?):
                return parts[i].column.isOptional ? "(\(reference) < \(value) OR \(reference) IS NULL)" : "(\(reference) < \(value))"
            case (false, nil): return nil
            }
        }
        /// Rows whose column `i` equals the cursor's (NULL equal to NULL).
        func same(_ i: Int) -> String {
            placeholders[i].map { "(\(references[i]) = \($0))" } ?? "(\(references[i]) IS NULL)"
        }
        let last = parts.count - 1
        var condition = after(last) ?? "FALSE"
        for i in (0..<last).reversed() {
            let tail = "(\(same(i)) AND \(condition))"
            condition = after(i).map { "(\($0) OR \(tail))" } ?? tail
        }
        // A bound on the first column alone, implied by the condition, from which an index on it can start.
        let leading: String?
        switch (parts[0].ascending, placeholders[0]) {
        case (true, let value?): leading = "\(references[0]) >= \(value)"
        case (false, let value?) where !parts[0].column.isOptional: leading = "\(references[0]) <= \(value)"
        case (false, nil): leading = "\(references[0]) IS NULL"
        default: leading = nil
        }
        writer.append(leading.map { "(\($0) AND \(condition))" } ?? condition)
    }

    // MARK: In memory

    /// A test of whether a value comes after `cursor` in the order of `sort` (then the primary key), comparing
    /// as ``InMemoryQuery/sorted(_:by:)`` orders: `nil` first, strings with the sort's comparator, other values
    /// with `<`.
    /// - Throws: ``QueryError`` as ``parts(_:_:_:)``, and `invalidCursor` when a value does not decode as its
    ///   property's type.
    static func evaluator<T: Entity>(
        after cursor: PageCursor, sort: [SortDescriptor<T>]
    ) throws -> @Sendable (T) throws -> Bool {
        let metadata = try EntityQueryMetadata.of(T.self)
        let parts = try self.parts(cursor, sort, metadata)
        let plan = try EntityPlan<T>.shared
        var comparators: [String: String.StandardComparator] = [:]
        for descriptor in sort.isEmpty ? T.defaultSort : sort {
            guard let keyPath = descriptor.keyPath, let column = metadata.columnsByKeyPath[keyPath],
                comparators[column.name] == nil, var comparator = descriptor.stringComparator
            else { continue }
            comparator.order = .forward
            comparators[column.name] = comparator
        }
        // The cursor's values decoded as their properties' types, through the row decoder.
        var row = Array(repeating: PGValue.null, count: plan.columnNames.count)
        for part in parts { row[plan.columnIndex[part.column.name]!] = PGValue(type: .unspecified, text: part.value) }
        let state = RowDecodingState(plan: plan, valueRows: [row])
        var keys: [SortKey<T>] = []
        for part in parts {
            let index = plan.columnIndex[part.column.name]!
            let column = T.columns[index]
            func decode<V: Decodable>(_ type: V.Type) throws -> Any { try state.decodeAny(V.self, 0, index) }
            guard let decodable = column.valueType as? any Decodable.Type, let value = try? decode(decodable) else {
                throw self.invalid(metadata, "the cursor's value for \"\(part.column.name)\" is not a \(column.valueType)")
            }
            keys.append(SortKey(keyPath: column.keyPath, ascending: part.ascending, strings: comparators[part.column.name], value: value))
        }
        let compared = keys
        return { candidate in
            for key in compared {
                switch try compareSortValues(candidate[keyPath: key.keyPath], key.value, key.strings, metadata) {
                case .orderedSame: continue
                case .orderedAscending: return !key.ascending
                case .orderedDescending: return key.ascending
                }
            }
            return false  // the cursor's own row
        }
    }

    /// One key column with the cursor's value.
    private struct SortKey<T>: @unchecked Sendable {
        // @unchecked Sendable: a key path to a stored property and a value decoded from text, never mutated; the
        // value's type is a stored property's type of a `Sendable` entity.
        let keyPath: PartialKeyPath<T>
        let ascending: Bool
        let strings: String.StandardComparator?
        let value: Any
    }
}

/// Orders two values of one sort column ascending, as Foundation's `SortDescriptor` does: `nil` first, strings
/// with `strings` when given, other values with `<`.
/// - Throws: ``QueryError`` (`unsupportedSort`) for values that are not `Comparable`.
func compareSortValues(
    _ a: Any, _ b: Any, _ strings: String.StandardComparator?, _ metadata: EntityQueryMetadata
) throws -> ComparisonResult {
    switch (unwrapAll(a), unwrapAll(b)) {
    case (nil, nil): return .orderedSame
    case (nil, _): return .orderedAscending
    case (_, nil): return .orderedDescending
    case (let a?, let b?):
        if let strings, let x = a as? String, let y = b as? String { return strings.compare(x, y) }
        func compare<C: Comparable>(_ x: C, _ y: Any) -> ComparisonResult? {
            guard let y = y as? C else { return nil }
            return x < y ? .orderedAscending : (y < x ? .orderedDescending : .orderedSame)
        }
        guard let x = a as? any Comparable, let result = compare(x, b) else {
            throw QueryError(
                code: .unsupportedSort, entity: metadata.entityName, construct: "\(type(of: a))",
                message: "values of \(type(of: a)) are not Comparable, so rows of \(metadata.entityName) cannot be paged by them")
        }
        return result
    }
}

/// The value inside any number of optionals, or `nil`.
private func unwrapAll(_ value: Any) -> Any? {
    var current = value
    while let optional = current as? any AnyOptional {
        guard let wrapped = optional.wrappedAny else { return nil }
        current = wrapped
    }
    return current
}
