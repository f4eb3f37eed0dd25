import Foundation

/// A Swift type that can be sent to PostgreSQL as a bound parameter.
public protocol PGEncodable: Sendable {
    /// The parameter type to declare for values of this Swift type.
    static var postgresType: PGType { get }
    /// The value's text-format representation; `nil` encodes NULL.
    func postgresText() throws -> String?
}

/// A Swift type that can be decoded from a PostgreSQL column.
public protocol PGDecodable: Sendable {
    /// Decodes a non-NULL value from its text-format bytes.
    init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws
    /// The value for SQL NULL; throws for non-optional types.
    static func postgresNull(type: PGType) throws -> Self
}

extension PGDecodable {
    public static func postgresNull(type: PGType) throws -> Self {
        throw PGError(kind: .decoding, message: "unexpected NULL of type \(type) for non-optional \(Self.self)")
    }
}

/// A type that can be both bound as a parameter and decoded from a result column, as an entity's columns must.
public typealias PGCodable = PGEncodable & PGDecodable

/// A type that can be an element of a one-dimensional PostgreSQL array.
public protocol PGArrayElement: PGCodable {
    /// The array type whose elements have this type (`int8[]` for `Int`).
    static var postgresArrayType: PGType { get }
}

func decodingError<T>(_ type: T.Type, _ pgType: PGType, _ bytes: ArraySlice<UInt8>) -> PGError {
    let shown = bytes.count > 64 ? String(decoding: bytes.prefix(64), as: UTF8.self) + "…" : String(decoding: bytes, as: UTF8.self)
    return PGError(kind: .decoding, message: "cannot decode \(pgType) value '\(shown)' as \(T.self)")
}

func typeMismatch<T>(_ type: T.Type, _ pgType: PGType) -> PGError {
    PGError(kind: .decoding, message: "cannot decode a column of type \(pgType) as \(T.self)")
}
