import Foundation

/// A bound parameter value: a PostgreSQL type and its text-format representation (`nil` is SQL NULL).
///
/// Values are always sent as bound parameters (`$1`, `$2`, …), never spliced into statement text.
///
/// ```swift
/// let value = try PostgresValue(42)          // int8 "42"
/// let null = PostgresValue.null              // NULL
/// ```
public struct PostgresValue: Sendable, Hashable, CustomStringConvertible {
    /// The parameter type sent to the server (`.unspecified` lets the server infer it).
    public var type: PostgresType
    /// The text-format representation, or `nil` for NULL.
    public var text: String?

    public init(type: PostgresType, text: String?) {
        self.type = type
        self.text = text
    }

    /// Encodes a Swift value.
    /// - Throws: ``PostgresError`` of kind ``PostgresError/Kind/encoding`` (for example text with a NUL).
    public init<T: PostgresEncodable>(_ value: T) throws {
        self.type = T.postgresType
        self.text = try value.postgresText()
    }

    public static let null = PostgresValue(type: .unspecified, text: nil)

    public var isNull: Bool { self.text == nil }

    /// Generic on purpose: bind values may be secrets and are not printed.
    public var description: String { self.text == nil ? "NULL" : "<\(self.type) value>" }
}

extension PostgresValue: PostgresEncodable {
    public static var postgresType: PostgresType { .unspecified }
    public func postgresText() throws -> String? { self.text }
}
