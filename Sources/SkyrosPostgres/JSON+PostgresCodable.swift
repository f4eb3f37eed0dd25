import Foundation

/// A `Codable` value stored in a `jsonb` column (use ``PostgresJSON`` for `json`).
///
/// ```swift
/// struct Settings: Codable, Sendable { var theme: String }
/// try await connection.query("INSERT INTO prefs (data) VALUES (\(PostgresJSONB(Settings(theme: "dark"))))")
/// let settings = try rows[0].decode(PostgresJSONB<Settings>.self, column: "data").value
/// ```
public struct PostgresJSONB<Value: Codable & Sendable>: PostgresArrayElement {
    public var value: Value
    public init(_ value: Value) { self.value = value }
    public static var postgresType: PostgresType { .jsonb }
    public static var postgresArrayType: PostgresType { .jsonbArray }
    public func postgresText() throws -> String? { try jsonText(self.value) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard [.jsonb, .json, .unknown, .text].contains(type) else { throw typeMismatch(Self.self, type) }
        self.value = try jsonValue(Value.self, bytes, type)
    }
}

/// A `Codable` value stored in a `json` column.
public struct PostgresJSON<Value: Codable & Sendable>: PostgresArrayElement {
    public var value: Value
    public init(_ value: Value) { self.value = value }
    public static var postgresType: PostgresType { .json }
    public static var postgresArrayType: PostgresType { .jsonArray }
    public func postgresText() throws -> String? { try jsonText(self.value) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
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
        throw PostgresError(kind: .encoding, message: "cannot encode \(V.self) as JSON: \(error)")
    }
}

private func jsonValue<V: Decodable>(_ type: V.Type, _ bytes: ArraySlice<UInt8>, _ pgType: PostgresType) throws -> V {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .iso8601
    do {
        return try decoder.decode(V.self, from: Data(bytes))
    } catch {
        throw PostgresError(kind: .decoding, message: "cannot decode \(pgType) as \(V.self): \(error)")
    }
}
