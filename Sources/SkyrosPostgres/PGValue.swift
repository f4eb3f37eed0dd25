import Foundation

/// A bound parameter value: a PostgreSQL type and its text-format representation (`nil` is SQL NULL).
///
/// Values are always sent as bound parameters (`$1`, `$2`, …), never spliced into statement text.
///
/// ```swift
/// let value = try PGValue(42)          // int8 "42"
/// let null = PGValue.null              // NULL
/// ```
public struct PGValue: Sendable, Hashable, CustomStringConvertible {
    /// The parameter type sent to the server (`.unspecified` lets the server infer it).
    public var type: PGType
    /// The text-format representation, or `nil` for NULL.
    public var text: String?

    /// A value from its type and its text-format representation (`nil` for NULL), for a type without a
    /// ``PGEncodable`` conformance.
    public init(type: PGType, text: String?) {
        self.type = type
        self.text = text
    }

    /// Encodes a Swift value.
    /// - Throws: ``PGError`` of kind ``PGError/Kind/encoding`` (for example text with a NUL).
    public init<T: PGEncodable>(_ value: T) throws {
        self.type = T.postgresType
        self.text = try value.postgresText()
    }

    /// SQL NULL, of a type the server infers.
    public static let null = PGValue(type: .unspecified, text: nil)

    /// Whether this is SQL NULL.
    public var isNull: Bool { self.text == nil }

    /// Generic on purpose: bind values may be secrets and are not printed.
    public var description: String { self.text == nil ? "NULL" : "<\(self.type) value>" }
}

extension PGValue: PGEncodable {
    public static var postgresType: PGType { .unspecified }
    public func postgresText() throws -> String? { self.text }
}
