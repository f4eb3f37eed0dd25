import Foundation
import SkyrosPostgres

/// One column's new value in a set-based update (`update(where:set:)`): a constant, or an expression over the
/// row's own columns that the database evaluates against the row as it stands when the statement runs
/// (`views = views + 1`), so that concurrent increments never conflict and never lose an update.
///
/// ```swift
/// try await context.update(where: #Predicate<Post> { $0.id == postID }, set: [.set(\.views, to: \.views + 1)])
/// try await context.update(where: #Predicate<Ticket> { $0.project == project }, set: [.set(\.status, to: "closed")])
/// ```
///
/// The in-memory store evaluates the same expression per row, failing as PostgreSQL does: an integer result
/// outside the column's range throws `PGError` with SQLSTATE 22003 (`SQLState.numericValueOutOfRange`).
public struct ColumnAssignment<Root: Entity>: Sendable {
    /// The column written, when the key path is one of `Root.columns`.
    let column: String?
    let expression: ColumnExpressionNode
    /// The new value from the row's current column values (the in-memory store's evaluation).
    let evaluate: @Sendable (_ column: (String) throws -> PGValue) throws -> PGValue

    /// Sets the column to a constant.
    ///
    /// ```swift
    /// let close = ColumnAssignment<Ticket>.set(\.status, to: "closed")
    /// ```
    public static func set<Value: PGEncodable>(_ keyPath: KeyPath<Root, Value>, to value: Value) -> Self {
        let encoded = Result { try PGValue(value) }
        return Self(column: columnName(keyPath), expression: .bound(encoded)) { _ in try encoded.get() }
    }

    /// Sets the column to an expression over the row's columns, evaluated by the database as the row stands
    /// when the statement runs.
    ///
    /// ```swift
    /// let view = ColumnAssignment<Post>.set(\.views, to: \.views + 1)
    /// ```
    public static func set<Value: ColumnArithmetic>(_ keyPath: KeyPath<Root, Value>, to expression: ColumnExpression<Root, Value>) -> Self {
        Self(column: columnName(keyPath), expression: expression.node) { column in try PGValue(expression.evaluate(column)) }
    }
}

/// An arithmetic expression over a row's columns, for ``ColumnAssignment/set(_:to:)-(KeyPath<Root,Value>,ColumnExpression<Root,Value>)``:
/// a column's key path combined with constants or other columns by `+`, `-` and `*`.
///
/// ```swift
/// let doubled: ColumnExpression<Post, Int> = \.views * 2 + \.likes
/// ```
public struct ColumnExpression<Root: Entity, Value: ColumnArithmetic>: Sendable {
    let node: ColumnExpressionNode
    let evaluate: @Sendable (_ column: (String) throws -> PGValue) throws -> Value

    /// The column's current value.
    public static func column(_ keyPath: KeyPath<Root, Value>) -> Self {
        let name = columnName(keyPath)
        return Self(node: .column(name)) { column in
            guard let name else { throw StoreError.unknownColumn(entity: String(describing: Root.self), column: "a key path that is not a column") }
            return try column(name).decode(Value.self)
        }
    }

    /// A constant.
    public static func value(_ value: Value) -> Self {
        let encoded = Result { try PGValue(value) }
        return Self(node: .bound(encoded)) { _ in value }
    }

    static func combine(_ lhs: Self, _ operation: ColumnOperator, _ rhs: Self) -> Self {
        Self(node: .binary(operation, lhs.node, rhs.node)) { column in
            let (left, right) = (try lhs.evaluate(column), try rhs.evaluate(column))
            switch operation {
            case .add: return try Value.adding(left, right)
            case .subtract: return try Value.subtracting(left, right)
            case .multiply: return try Value.multiplying(left, right)
            }
        }
    }
}

/// A number a ``ColumnExpression`` can compute with, failing as PostgreSQL does where it fails. Skyros makes
/// `Int`, `Int64`, `Int32`, `Int16`, `Double`, `Float` and `Decimal` conform.
public protocol ColumnArithmetic: PGCodable {
    /// `lhs + rhs`; an integer overflow throws `PGError` with SQLSTATE 22003.
    static func adding(_ lhs: Self, _ rhs: Self) throws -> Self
    /// `lhs - rhs`; an integer overflow throws `PGError` with SQLSTATE 22003.
    static func subtracting(_ lhs: Self, _ rhs: Self) throws -> Self
    /// `lhs * rhs`; an integer overflow throws `PGError` with SQLSTATE 22003.
    static func multiplying(_ lhs: Self, _ rhs: Self) throws -> Self
}

extension ColumnArithmetic where Self: FixedWidthInteger {
    public static func adding(_ lhs: Self, _ rhs: Self) throws -> Self { try checked(lhs.addingReportingOverflow(rhs)) }
    public static func subtracting(_ lhs: Self, _ rhs: Self) throws -> Self { try checked(lhs.subtractingReportingOverflow(rhs)) }
    public static func multiplying(_ lhs: Self, _ rhs: Self) throws -> Self { try checked(lhs.multipliedReportingOverflow(by: rhs)) }

    private static func checked(_ result: (partialValue: Self, overflow: Bool)) throws -> Self {
        guard !result.overflow else {
            throw PGError.outOfRange("\(Self.self) out of range")
        }
        return result.partialValue
    }
}

extension ColumnArithmetic where Self: FloatingPoint {
    public static func adding(_ lhs: Self, _ rhs: Self) throws -> Self { lhs + rhs }
    public static func subtracting(_ lhs: Self, _ rhs: Self) throws -> Self { lhs - rhs }
    public static func multiplying(_ lhs: Self, _ rhs: Self) throws -> Self { lhs * rhs }
}

extension Int: ColumnArithmetic {}
extension Int64: ColumnArithmetic {}
extension Int32: ColumnArithmetic {}
extension Int16: ColumnArithmetic {}
extension Double: ColumnArithmetic {}
extension Float: ColumnArithmetic {}
extension Decimal: ColumnArithmetic {
    public static func adding(_ lhs: Decimal, _ rhs: Decimal) throws -> Decimal { lhs + rhs }
    public static func subtracting(_ lhs: Decimal, _ rhs: Decimal) throws -> Decimal { lhs - rhs }
    public static func multiplying(_ lhs: Decimal, _ rhs: Decimal) throws -> Decimal { lhs * rhs }
}

// MARK: Operators

/// `\.views + 1`: a column plus a constant.
public func + <Root, Value>(lhs: KeyPath<Root, Value>, rhs: Value) -> ColumnExpression<Root, Value> {
    .combine(.column(lhs), .add, .value(rhs))
}
/// `\.stock - 1`: a column minus a constant.
public func - <Root, Value>(lhs: KeyPath<Root, Value>, rhs: Value) -> ColumnExpression<Root, Value> {
    .combine(.column(lhs), .subtract, .value(rhs))
}
/// `\.price * 2`: a column times a constant.
public func * <Root, Value>(lhs: KeyPath<Root, Value>, rhs: Value) -> ColumnExpression<Root, Value> {
    .combine(.column(lhs), .multiply, .value(rhs))
}
/// `\.a + \.b`: the sum of two columns.
public func + <Root, Value>(lhs: KeyPath<Root, Value>, rhs: KeyPath<Root, Value>) -> ColumnExpression<Root, Value> {
    .combine(.column(lhs), .add, .column(rhs))
}
/// `\.a - \.b`: the difference of two columns.
public func - <Root, Value>(lhs: KeyPath<Root, Value>, rhs: KeyPath<Root, Value>) -> ColumnExpression<Root, Value> {
    .combine(.column(lhs), .subtract, .column(rhs))
}
/// An expression plus a constant.
public func + <Root, Value>(lhs: ColumnExpression<Root, Value>, rhs: Value) -> ColumnExpression<Root, Value> {
    .combine(lhs, .add, .value(rhs))
}
/// An expression minus a constant.
public func - <Root, Value>(lhs: ColumnExpression<Root, Value>, rhs: Value) -> ColumnExpression<Root, Value> {
    .combine(lhs, .subtract, .value(rhs))
}
/// An expression times a constant.
public func * <Root, Value>(lhs: ColumnExpression<Root, Value>, rhs: Value) -> ColumnExpression<Root, Value> {
    .combine(lhs, .multiply, .value(rhs))
}
/// An expression plus a column.
public func + <Root, Value>(lhs: ColumnExpression<Root, Value>, rhs: KeyPath<Root, Value>) -> ColumnExpression<Root, Value> {
    .combine(lhs, .add, .column(rhs))
}
/// An expression minus a column.
public func - <Root, Value>(lhs: ColumnExpression<Root, Value>, rhs: KeyPath<Root, Value>) -> ColumnExpression<Root, Value> {
    .combine(lhs, .subtract, .column(rhs))
}

// MARK: Representation

enum ColumnOperator: String, Sendable {
    case add = "+", subtract = "-", multiply = "*"
}

/// An expression as SQL sees it: columns by name, constants bound.
indirect enum ColumnExpressionNode: Sendable {
    /// `nil`: the key path is not one of the entity's columns (an error when the statement is built).
    case column(String?)
    case bound(Result<PGValue, any Error>)
    case binary(ColumnOperator, ColumnExpressionNode, ColumnExpressionNode)
}

/// The column `keyPath` maps to, or `nil`.
private func columnName<Root: Entity, Value>(_ keyPath: KeyPath<Root, Value>) -> String? {
    Root.columns.first { $0.keyPath == keyPath }?.name
}

extension PGError {
    /// The error PostgreSQL raises for arithmetic or an assignment out of a type's range (SQLSTATE 22003).
    static func outOfRange(_ message: String) -> PGError {
        PGError(kind: .server, sqlState: .numericValueOutOfRange, severity: "ERROR", message: message)
    }
}

extension PGValue {
    /// The value as `V`.
    func decode<V: PGDecodable>(_ type: V.Type) throws -> V {
        guard let text = self.text else { return try V.postgresNull(type: self.type) }
        return try V(postgresText: ArraySlice(text.utf8), type: self.type)
    }
}
