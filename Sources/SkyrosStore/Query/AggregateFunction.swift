import Foundation
import SkyrosPostgres

/// One aggregate over the rows of `T` — `count`, `sum`, `avg`, `min` or `max` — whose result has the Swift type
/// `Value`, with SQL's rules for `NULL` and empty sets.
///
/// Pass one or more to `aggregate` (on a ``Store`` or a context); the results come back typed, in the order
/// given:
///
/// ```swift
/// let (open, total, latest) = try await store.aggregate(
///     FetchDescriptor<Ticket>(predicate: #Predicate { $0.status == "open" }),
///     .count, .sum(\.amount), .max(\.createdAt))
/// // open: Int, total: Decimal?, latest: Date?
/// ```
///
/// | Function          | Column (optional or not)              | Result                | No rows / only NULLs |
/// |-------------------|---------------------------------------|-----------------------|----------------------|
/// | ``count``         | (rows)                                | `Int`                 | `0`                  |
/// | ``count(_:)``     | any                                   | `Int` (non-NULL ones) | `0`                  |
/// | `sum`             | integer                               | `Int?`                | `nil`                |
/// | `sum`             | `Double` / `Decimal`                  | `Double?` / `Decimal?`| `nil`                |
/// | `avg`             | integer or `Decimal`                  | `Decimal?` (numeric)  | `nil`                |
/// | `avg`             | `Double`                              | `Double?`             | `nil`                |
/// | `min`, `max`      | integer, `Double`, `Float`, `Decimal`, `String`, `Date` | the column's type, optional | `nil` |
///
/// `NULL` values are skipped by every function but ``count``, as in SQL. The average of integers or decimals is
/// `numeric` with PostgreSQL's division scale (at least 16 significant digits, rounded half away from zero):
/// the average of 1, 1 and 2 is `1.3333333333333333`. A sum of integers beyond `Int` throws
/// `PGError` with SQLSTATE 22003 (numeric value out of range). Strings compare by code point (`COLLATE "C"`,
/// as Skyros sorts and compares strings everywhere), so `min` and `max` of strings are the same on every
/// database and in memory.
public struct AggregateFunction<T: Entity, Value: Sendable>: Sendable {
    /// The type-erased description both stores evaluate.
    package let spec: AggregateSpec<T>
    /// Turns the result cell (from PostgreSQL, or computed in memory) into the typed value.
    package let decode: @Sendable (PGValue) throws -> Value

    package init(spec: AggregateSpec<T>, decode: @escaping @Sendable (PGValue) throws -> Value) {
        self.spec = spec
        self.decode = decode
    }
}

/// An aggregate without its result type: what the SQL builder and the in-memory evaluator read.
package struct AggregateSpec<T: Entity>: @unchecked Sendable {
    // @unchecked Sendable: holds an immutable key path (the standard library does not mark key paths Sendable)
    // and Sendable closures.

    /// The SQL function.
    package enum Kind: String, Sendable {
        case count, sum, avg, min, max
    }

    /// How the result is written in SQL around the function call.
    package enum Shape: Sendable {
        /// `f("col")`.
        case plain
        /// `f("col")::int8` (a sum of integers: `numeric` for `bigint` columns, returned as `Int`).
        case castToInt8
        /// `f("col"::text COLLATE "C")` (strings compared by code point).
        case codePointText
    }

    package let kind: Kind
    /// The column; `nil` for `count(*)`.
    package let keyPath: AnyKeyPath?
    package let shape: Shape
    /// The result computed in memory over one group's rows, as the cell PostgreSQL would return.
    package let compute: @Sendable ([T]) throws -> PGValue
}

/// A column value an aggregate reads: the column's Swift type, optional or not (`Int` and `Int?` both have
/// `Base == Int`). Conformances cover the types `sum`, `avg`, `min` and `max` accept.
public protocol AggregatableValue: Sendable {
    /// The non-optional type of the column.
    associatedtype Base: Sendable
    /// The value, or `nil` for `NULL`.
    var aggregateBase: Base? { get }
}

extension Int: AggregatableValue { public var aggregateBase: Int? { self } }
extension Int64: AggregatableValue { public var aggregateBase: Int64? { self } }
extension Int32: AggregatableValue { public var aggregateBase: Int32? { self } }
extension Int16: AggregatableValue { public var aggregateBase: Int16? { self } }
extension Double: AggregatableValue { public var aggregateBase: Double? { self } }
extension Float: AggregatableValue { public var aggregateBase: Float? { self } }
extension Decimal: AggregatableValue { public var aggregateBase: Decimal? { self } }
extension String: AggregatableValue { public var aggregateBase: String? { self } }
extension Date: AggregatableValue { public var aggregateBase: Date? { self } }
extension Optional: AggregatableValue where Wrapped: AggregatableValue, Wrapped.Base == Wrapped {
    public var aggregateBase: Wrapped? { self }
}

// MARK: - count

extension AggregateFunction where Value == Int {
    /// `count(*)`: the number of rows (`0` for none).
    public static var count: AggregateFunction<T, Int> {
        AggregateFunction(
            spec: AggregateSpec(kind: .count, keyPath: nil, shape: .plain, compute: { rows in try PGValue(rows.count) }),
            decode: decodeRequired)
    }

    /// `count(column)`: the number of rows whose column is not `NULL`.
    ///
    /// ```swift
    /// let assigned: Int = try await store.aggregate(FetchDescriptor<Ticket>(), .count(\.assignee))
    /// ```
    public static func count<V>(_ keyPath: KeyPath<T, V>) -> AggregateFunction<T, Int> {
        // nonisolated(unsafe): a key path to a stored property is an immutable value.
        nonisolated(unsafe) let keyPath = keyPath
        let compute: @Sendable ([T]) throws -> PGValue = { rows in
            try PGValue(rows.count { !(($0[keyPath: keyPath] as? any OptionalMarker)?.isNil ?? false) })
        }
        return AggregateFunction(spec: AggregateSpec(kind: .count, keyPath: keyPath, shape: .plain, compute: compute), decode: decodeRequired)
    }
}

// MARK: - sum and avg

extension AggregateFunction {
    /// `sum(column)` of an integer column, as `Int`; `nil` when no row has a value.
    /// - Throws (when run): `PGError` with SQLSTATE 22003 when the sum does not fit in `Int`.
    public static func sum<V: AggregatableValue>(_ keyPath: KeyPath<T, V>) -> AggregateFunction<T, Int?>
    where V.Base: FixedWidthInteger {
        let values = nonNullValues(keyPath)
        return .make(.sum, keyPath, .castToInt8) { rows in
            let present = values(rows)
            guard !present.isEmpty else { return nil }
            return try exactInt(integerTotal(present))
        }
    }

    /// `sum(column)` of a `Double` column; `nil` when no row has a value. Values are added in scan order (SQL
    /// does not define one), so the last bits of a sum of inexact values may differ between the stores.
    public static func sum<V: AggregatableValue>(_ keyPath: KeyPath<T, V>) -> AggregateFunction<T, Double?>
    where V.Base == Double {
        let values = nonNullValues(keyPath)
        return .make(.sum, keyPath, .plain) { rows in
            let present = values(rows)
            return present.isEmpty ? nil : present.reduce(0, +)
        }
    }

    /// `sum(column)` of a `Decimal` (`numeric`) column, exact; `nil` when no row has a value.
    public static func sum<V: AggregatableValue>(_ keyPath: KeyPath<T, V>) -> AggregateFunction<T, Decimal?>
    where V.Base == Decimal {
        let values = nonNullValues(keyPath)
        return .make(.sum, keyPath, .plain) { rows in
            let present = values(rows)
            return present.isEmpty ? nil : present.reduce(Decimal(0), +)
        }
    }

    /// `avg(column)` of an integer column: `numeric` (`Decimal`), as PostgreSQL computes it; `nil` when no row
    /// has a value.
    public static func avg<V: AggregatableValue>(_ keyPath: KeyPath<T, V>) -> AggregateFunction<T, Decimal?>
    where V.Base: FixedWidthInteger {
        let values = nonNullValues(keyPath)
        return .make(.avg, keyPath, .plain) { rows in
            let present = values(rows)
            guard !present.isEmpty else { return nil }
            let total = Decimal(string: String(integerTotal(present)))!
            return NumericDivision.quotient(total, scale: 0, dividedBy: present.count)
        }
    }

    /// `avg(column)` of a `Double` column (sum divided by count, in `Double`); `nil` when no row has a value.
    public static func avg<V: AggregatableValue>(_ keyPath: KeyPath<T, V>) -> AggregateFunction<T, Double?>
    where V.Base == Double {
        let values = nonNullValues(keyPath)
        return .make(.avg, keyPath, .plain) { rows in
            let present = values(rows)
            return present.isEmpty ? nil : present.reduce(0, +) / Double(present.count)
        }
    }

    /// `avg(column)` of a `Decimal` (`numeric`) column, with PostgreSQL's division scale; `nil` when no row has
    /// a value.
    public static func avg<V: AggregatableValue>(_ keyPath: KeyPath<T, V>) -> AggregateFunction<T, Decimal?>
    where V.Base == Decimal {
        let values = nonNullValues(keyPath)
        return .make(.avg, keyPath, .plain) { rows in
            let present = values(rows)
            guard !present.isEmpty else { return nil }
            let scale = present.map(NumericDivision.displayScale).max() ?? 0
            return NumericDivision.quotient(present.reduce(Decimal(0), +), scale: scale, dividedBy: present.count)
        }
    }
}

// MARK: - min and max

extension AggregateFunction {
    /// `min(column)`: the smallest value (strings by code point); `nil` when no row has a value.
    ///
    /// ```swift
    /// let first: Date? = try await store.aggregate(FetchDescriptor<Ticket>(), .min(\.createdAt))
    /// ```
    public static func min<V: AggregatableValue>(_ keyPath: KeyPath<T, V>) -> AggregateFunction<T, V.Base?>
    where V.Base: Comparable & PGCodable {
        let values = nonNullValues(keyPath)
        return .make(.min, keyPath, V.Base.self == String.self ? .codePointText : .plain) { rows in
            values(rows).min(by: aggregateOrder)
        }
    }

    /// `max(column)`: the largest value (strings by code point); `nil` when no row has a value.
    public static func max<V: AggregatableValue>(_ keyPath: KeyPath<T, V>) -> AggregateFunction<T, V.Base?>
    where V.Base: Comparable & PGCodable {
        let values = nonNullValues(keyPath)
        return .make(.max, keyPath, V.Base.self == String.self ? .codePointText : .plain) { rows in
            values(rows).max(by: aggregateOrder)
        }
    }
}

// MARK: - Helpers

extension AggregateFunction {
    /// A function whose in-memory result is `compute`'s optional value, encoded as PostgreSQL returns it.
    fileprivate static func make<B: PGCodable>(
        _ kind: AggregateSpec<T>.Kind, _ keyPath: AnyKeyPath, _ shape: AggregateSpec<T>.Shape,
        _ compute: @escaping @Sendable ([T]) throws -> B?
    ) -> AggregateFunction<T, B?> {
        AggregateFunction<T, B?>(
            spec: AggregateSpec(kind: kind, keyPath: keyPath, shape: shape, compute: { rows in
                guard let value = try compute(rows) else { return PGValue(type: B.postgresType, text: nil) }
                return try PGValue(value)
            }),
            decode: { cell in
                guard let text = cell.text else { return nil }
                return try B(postgresText: ArraySlice(text.utf8), type: cell.type == .unspecified ? .unknown : cell.type)
            })
    }
}

private func decodeRequired(_ cell: PGValue) throws -> Int {
    guard let text = cell.text else { throw PGError(kind: .decoding, message: "unexpected NULL count") }
    return try Int(postgresText: ArraySlice(text.utf8), type: cell.type == .unspecified ? .unknown : cell.type)
}

/// The non-`NULL` values of a column over some rows.
private func nonNullValues<T, V: AggregatableValue>(_ keyPath: KeyPath<T, V>) -> @Sendable ([T]) -> [V.Base] {
    // nonisolated(unsafe): a key path to a stored property is an immutable value.
    nonisolated(unsafe) let keyPath = keyPath
    return { rows in rows.compactMap { $0[keyPath: keyPath].aggregateBase } }
}

/// The exact sum of integers (128 bits: no intermediate overflow, as PostgreSQL sums `bigint` in `numeric`).
private func integerTotal<I: FixedWidthInteger>(_ values: [I]) -> Int128 {
    values.reduce(Int128(0)) { $0 + Int128($1) }
}

private func exactInt(_ total: Int128) throws -> Int {
    guard let value = Int(exactly: total) else {
        throw PGError(kind: .server, sqlState: .numericValueOutOfRange, message: "bigint out of range")
    }
    return value
}

/// The order `min` and `max` use, as PostgreSQL's: strings by code point (`COLLATE "C"`), `NaN` above every
/// other floating-point value, otherwise the type's `<`.
func aggregateOrder<B: Comparable>(_ a: B, _ b: B) -> Bool {
    if let a = a as? String, let b = b as? String { return codePointPrecedes(a, b) }
    if let a = a as? Double, let b = b as? Double, a.isNaN || b.isNaN { return !a.isNaN && b.isNaN }
    if let a = a as? Float, let b = b as? Float, a.isNaN || b.isNaN { return !a.isNaN && b.isNaN }
    return a < b
}

/// Whether `a` sorts before `b` by Unicode code point (UTF-8 byte order: `COLLATE "C"`).
func codePointPrecedes(_ a: String, _ b: String) -> Bool {
    a.utf8.lexicographicallyPrecedes(b.utf8)
}
