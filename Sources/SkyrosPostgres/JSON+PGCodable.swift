import Foundation

/// A `Codable` value stored in a `jsonb` column (use ``PGJSON`` for `json`).
///
/// ```swift
/// struct Settings: Codable, Sendable { var theme: String }
/// try await connection.query("INSERT INTO prefs (data) VALUES (\(PGJSONB(Settings(theme: "dark"))))")
/// let settings = try rows[0].decode(PGJSONB<Settings>.self, column: "data").value
/// ```
public struct PGJSONB<Value: Codable & Sendable>: PGArrayElement {
    /// The value, encoded with `JSONEncoder` when sent and decoded with `JSONDecoder` when read.
    public var value: Value
    /// Wraps a value to bind it as `jsonb`: `\(PGJSONB(settings))` in a `PGQuery`.
    public init(_ value: Value) { self.value = value }
    public static var postgresType: PGType { .jsonb }
    public static var postgresArrayType: PGType { .jsonbArray }
    public func postgresText() throws -> String? { try jsonText(self.value) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
        guard [.jsonb, .json, .unknown, .text].contains(type) else { throw typeMismatch(Self.self, type) }
        self.value = try jsonValue(Value.self, bytes, type)
    }
}

/// A `Codable` value stored in a `json` column.
public struct PGJSON<Value: Codable & Sendable>: PGArrayElement {
    /// The value, encoded with `JSONEncoder` when sent and decoded with `JSONDecoder` when read.
    public var value: Value
    /// Wraps a value to bind it as `json`: `\(PGJSON(settings))` in a `PGQuery`.
    public init(_ value: Value) { self.value = value }
    public static var postgresType: PGType { .json }
    public static var postgresArrayType: PGType { .jsonArray }
    public func postgresText() throws -> String? { try jsonText(self.value) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
        guard [.jsonb, .json, .unknown, .text].contains(type) else { throw typeMismatch(Self.self, type) }
        self.value = try jsonValue(Value.self, bytes, type)
    }
}

private func jsonText<V: Encodable>(_ value: V) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    do {
        let text = String(decoding: try encoder.encode(value), as: UTF8.self)
        return text
    } catch {
        throw PGError(kind: .encoding, message: "cannot encode \(V.self) as JSON: \(error)")
    }
}

private func jsonValue<V: Decodable>(_ type: V.Type, _ bytes: ArraySlice<UInt8>, _ pgType: PGType) throws -> V {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .iso8601
    do {
        return try decoder.decode(V.self, from: Data(bytes))
    } catch {
        throw PGError(kind: .decoding, message: "cannot decode \(pgType) as \(V.self): \(error)")
    }
}
