import Foundation

/// A Swift type that can be sent to PostgreSQL as a bound parameter.
public protocol PostgresEncodable: Sendable {
    /// The parameter type to declare for values of this Swift type.
    static var postgresType: PostgresType { get }
    /// The value's text-format representation; `nil` encodes NULL.
    func postgresText() throws -> String?
}

/// A Swift type that can be decoded from a PostgreSQL column.
public protocol PostgresDecodable: Sendable {
    /// Decodes a non-NULL value from its text-format bytes.
    init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws
    /// The value for SQL NULL; throws for non-optional types.
    static func postgresNull(type: PostgresType) throws -> Self
}

extension PostgresDecodable {
    public static func postgresNull(type: PostgresType) throws -> Self {
        throw PostgresError(kind: .decoding, message: "unexpected NULL of type \(type) for non-optional \(Self.self)")
    }
}

public typealias PostgresCodable = PostgresEncodable & PostgresDecodable

/// A type that can be an element of a one-dimensional PostgreSQL array.
public protocol PostgresArrayElement: PostgresCodable {
    /// The array type whose elements have this type (`int8[]` for `Int`).
    static var postgresArrayType: PostgresType { get }
}

func decodingError<T>(_ type: T.Type, _ pgType: PostgresType, _ bytes: ArraySlice<UInt8>) -> PostgresError {
    let shown = bytes.count > 64 ? String(decoding: bytes.prefix(64), as: UTF8.self) + "…" : String(decoding: bytes, as: UTF8.self)
    return PostgresError(kind: .decoding, message: "cannot decode \(pgType) value '\(shown)' as \(T.self)")
}

func typeMismatch<T>(_ type: T.Type, _ pgType: PostgresType) -> PostgresError {
    PostgresError(kind: .decoding, message: "cannot decode a column of type \(pgType) as \(T.self)")
}
