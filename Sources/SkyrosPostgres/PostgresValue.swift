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

// MARK: - Optional

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    public static var postgresType: PostgresType { Wrapped.postgresType }
    public func postgresText() throws -> String? {
        switch self {
        case .none: return nil
        case .some(let wrapped): return try wrapped.postgresText()
        }
    }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        self = .some(try Wrapped(postgresText: bytes, type: type))
    }
    public static func postgresNull(type: PostgresType) throws -> Self { .none }
}

extension Optional: PostgresArrayElement where Wrapped: PostgresArrayElement {
    public static var postgresArrayType: PostgresType { Wrapped.postgresArrayType }
}

extension PostgresValue: PostgresEncodable {
    public static var postgresType: PostgresType { .unspecified }
    public func postgresText() throws -> String? { self.text }
}

// MARK: - Bool

extension Bool: PostgresArrayElement {
    public static var postgresType: PostgresType { .bool }
    public static var postgresArrayType: PostgresType { .boolArray }
    public func postgresText() throws -> String? { self ? "t" : "f" }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard type == .bool || type == .unknown || type == .text else { throw typeMismatch(Bool.self, type) }
        switch bytes.first {
        case UInt8(ascii: "t"): self = true
        case UInt8(ascii: "f"): self = false
        default: throw decodingError(Bool.self, type, bytes)
        }
    }
}

// MARK: - Integers

@inline(__always)
func parseInteger(_ bytes: ArraySlice<UInt8>) -> Int64? {
    var index = bytes.startIndex
    let end = bytes.endIndex
    guard index < end else { return nil }
    var negative = false
    if bytes[index] == UInt8(ascii: "-") {
        negative = true
        index += 1
    } else if bytes[index] == UInt8(ascii: "+") {
        index += 1
    }
    guard index < end else { return nil }
    var value: Int64 = 0
    while index < end {
        let digit = bytes[index] &- UInt8(ascii: "0")
        guard digit < 10 else { return nil }
        let (m, o1) = value.multipliedReportingOverflow(by: 10)
        let (s, o2) = negative ? m.subtractingReportingOverflow(Int64(digit)) : m.addingReportingOverflow(Int64(digit))
        guard !o1, !o2 else { return nil }
        value = s
        index += 1
    }
    return value
}

/// Whether integers decode from a column of `type` (a comparison per candidate: a `Set` lookup hashed the type
/// on every cell).
private func isIntegerType(_ type: PostgresType) -> Bool {
    switch type {
    case .int8, .int4, .int2, .oid, .xid, .unknown, .text: true
    default: false
    }
}

extension Int: PostgresArrayElement {
    public static var postgresType: PostgresType { .int8 }
    public static var postgresArrayType: PostgresType { .int8Array }
    public func postgresText() throws -> String? { String(self) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard isIntegerType(type) else { throw typeMismatch(Int.self, type) }
        guard let value = parseInteger(bytes) else { throw decodingError(Int.self, type, bytes) }
        self = Int(value)
    }
}

extension Int64: PostgresArrayElement {
    public static var postgresType: PostgresType { .int8 }
    public static var postgresArrayType: PostgresType { .int8Array }
    public func postgresText() throws -> String? { String(self) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard isIntegerType(type) else { throw typeMismatch(Int64.self, type) }
        guard let value = parseInteger(bytes) else { throw decodingError(Int64.self, type, bytes) }
        self = value
    }
}

extension Int32: PostgresArrayElement {
    public static var postgresType: PostgresType { .int4 }
    public static var postgresArrayType: PostgresType { .int4Array }
    public func postgresText() throws -> String? { String(self) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard isIntegerType(type) else { throw typeMismatch(Int32.self, type) }
        guard let value = parseInteger(bytes), let narrow = Int32(exactly: value) else {
            throw decodingError(Int32.self, type, bytes)
        }
        self = narrow
    }
}

extension Int16: PostgresArrayElement {
    public static var postgresType: PostgresType { .int2 }
    public static var postgresArrayType: PostgresType { .int2Array }
    public func postgresText() throws -> String? { String(self) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard isIntegerType(type) else { throw typeMismatch(Int16.self, type) }
        guard let value = parseInteger(bytes), let narrow = Int16(exactly: value) else {
            throw decodingError(Int16.self, type, bytes)
        }
        self = narrow
    }
}

// MARK: - Floating point

/// Exact powers of ten up to 10²², the largest a `Double` holds exactly.
private let exactPowersOfTen: [Double] = (0...22).map { exponent in
    (0..<exponent).reduce(1.0) { value, _ in value * 10 }
}

/// Parses plain decimal text (`-12.5`, `0.001`, `42`) with at most 15 significant digits and 22 decimals
/// without making a string: the digits form an integer below 2⁵³ and the decimals an exact power of ten, so
/// one division gives the correctly rounded value (Clinger's fast path) — what `Double(String)` returns.
/// `nil` for anything else (exponents, more digits, `NaN`, `Infinity`), which goes the general way.
@inline(__always)
private func parseShortDecimal(_ bytes: ArraySlice<UInt8>) -> Double? {
    var index = bytes.startIndex
    let end = bytes.endIndex
    guard index < end else { return nil }
    let negative = bytes[index] == UInt8(ascii: "-")
    if negative { index += 1 }
    var mantissa: UInt64 = 0
    var significant = 0
    var decimals = 0
    var sawDigit = false
    var sawPoint = false
    while index < end {
        let byte = bytes[index]
        let digit = byte &- UInt8(ascii: "0")
        if digit < 10 {
            sawDigit = true
            if sawPoint { decimals += 1 }
            if mantissa != 0 || digit != 0 {
                guard significant < 15 else { return nil }
                mantissa = mantissa * 10 + UInt64(digit)
                significant += 1
            }
        } else if byte == UInt8(ascii: "."), !sawPoint {
            sawPoint = true
        } else {
            return nil
        }
        index += 1
    }
    guard sawDigit, decimals < exactPowersOfTen.count else { return nil }
    var value = Double(mantissa)
    if decimals > 0 { value /= exactPowersOfTen[decimals] }
    return negative ? -value : value
}

private func floatText(_ value: Double) -> String {
    if value.isNaN { return "NaN" }
    if value.isInfinite { return value < 0 ? "-Infinity" : "Infinity" }
    return value.description
}

/// Whether floating-point numbers decode from a column of `type`.
private func isFloatType(_ type: PostgresType) -> Bool {
    switch type {
    case .float8, .float4, .numeric, .int8, .int4, .int2, .unknown, .text: true
    default: false
    }
}

private func parseDouble(_ bytes: ArraySlice<UInt8>) -> Double? {
    if let value = parseShortDecimal(bytes) { return value }
    switch bytes.count {
    case 3 where bytes.elementsEqual("NaN".utf8): return .nan
    case 8 where bytes.elementsEqual("Infinity".utf8): return .infinity
    case 9 where bytes.elementsEqual("-Infinity".utf8): return -.infinity
    default: return Double(String(decoding: bytes, as: UTF8.self))
    }
}

extension Double: PostgresArrayElement {
    public static var postgresType: PostgresType { .float8 }
    public static var postgresArrayType: PostgresType { .float8Array }
    public func postgresText() throws -> String? { floatText(self) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard isFloatType(type) else { throw typeMismatch(Double.self, type) }
        guard let value = parseDouble(bytes) else { throw decodingError(Double.self, type, bytes) }
        self = value
    }
}

extension Float: PostgresArrayElement {
    public static var postgresType: PostgresType { .float4 }
    public static var postgresArrayType: PostgresType { .float4Array }
    public func postgresText() throws -> String? {
        if self.isNaN { return "NaN" }
        if self.isInfinite { return self < 0 ? "-Infinity" : "Infinity" }
        return self.description
    }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard isFloatType(type) else { throw typeMismatch(Float.self, type) }
        switch bytes.count {
        case 3 where bytes.elementsEqual("NaN".utf8): self = .nan
        case 8 where bytes.elementsEqual("Infinity".utf8): self = .infinity
        case 9 where bytes.elementsEqual("-Infinity".utf8): self = -.infinity
        default:
            guard let value = Float(String(decoding: bytes, as: UTF8.self)) else {
                throw decodingError(Float.self, type, bytes)
            }
            self = value
        }
    }
}

// MARK: - Decimal

private let posix = Locale(identifier: "en_US_POSIX")

/// `numeric` as `Decimal`: exact up to 38 significant digits. A value `Decimal` cannot hold exactly (more digits,
/// or beyond its exponent range) fails with ``PostgresError/Kind/decoding`` instead of being rounded; read such
/// values as `String`.
extension Decimal: PostgresArrayElement {
    public static var postgresType: PostgresType { .numeric }
    public static var postgresArrayType: PostgresType { .numericArray }
    public func postgresText() throws -> String? { self.isNaN ? "NaN" : self.description }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard [.numeric, .int2, .int4, .int8, .unknown, .text].contains(type) else {
            throw typeMismatch(Decimal.self, type)
        }
        let text = String(decoding: bytes, as: UTF8.self)
        if text == "NaN" {
            self = .nan
            return
        }
        // `Decimal(string:)` keeps what fits and silently drops the rest: refuse a value it cannot hold exactly.
        if !Self.holdsExactly(bytes) {
            throw PostgresError(
                kind: .decoding,
                message: "cannot decode \(type) value as Decimal: it has more significant digits than Decimal's 38, "
                    + "or is too large or too small; decode it as String")
        }
        guard let value = Decimal(string: text, locale: posix), !value.isNaN else {
            throw decodingError(Decimal.self, type, bytes)
        }
        self = value
    }

    /// Whether the number written in `bytes` (`[-+]digits[.digits][e[-+]digits]`) is one a `Decimal` holds
    /// exactly: at most 38 significant digits (its 128-bit mantissa holds any 38-digit integer), times a power
    /// of ten from -128 to 127. Anything else is left to `Decimal(string:)` (which refuses it, or reads it).
    static func holdsExactly(_ bytes: ArraySlice<UInt8>) -> Bool {
        var index = bytes.startIndex
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: "-") || bytes[index] == UInt8(ascii: "+") { index += 1 }
        var significant = 0  // digits from the first non-zero one, up to the last non-zero one
        var trailingZeros = 0  // zeros after the last non-zero digit so far
        var fractionDigits = 0
        var inFraction = false
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "."), !inFraction {
                inFraction = true
            } else if byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                if inFraction { fractionDigits += 1 }
                if byte == UInt8(ascii: "0") {
                    if significant > 0 { trailingZeros += 1 }
                } else {
                    significant += trailingZeros + 1
                    trailingZeros = 0
                }
            } else {
                break
            }
            index += 1
        }
        var exponent = 0
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            guard let written = Int(String(decoding: bytes[(index + 1)...], as: UTF8.self)) else { return false }
            exponent = written
        } else if index != bytes.endIndex {
            return true  // not a plain number (`Infinity`): Decimal(string:) decides
        }
        if significant == 0 { return true }  // zero
        if significant > 38 { return false }
        // The value is (its significant digits) × 10^scale. A scale above 127 moves into the mantissa as zeros,
        // while there is room for them.
        let scale = exponent - fractionDigits + trailingZeros
        if scale > 127 { return significant + (scale - 127) <= 38 }
        return scale >= -128
    }
}

// MARK: - Text

extension String: PostgresArrayElement {
    public static var postgresType: PostgresType { .text }
    public static var postgresArrayType: PostgresType { .textArray }
    public func postgresText() throws -> String? {
        if self.utf8.contains(0) {
            throw PostgresError(
                kind: .encoding,
                message: "text value contains a NUL (0x00) character, which PostgreSQL text cannot store; use bytea"
            )
        }
        return self
    }
    /// Any column decodes as `String` (its text representation).
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        self = String(decoding: bytes, as: UTF8.self)
    }
}

// MARK: - bytea

private let hexDigits = Array("0123456789abcdef".utf8)

extension Data: PostgresArrayElement {
    public static var postgresType: PostgresType { .bytea }
    public static var postgresArrayType: PostgresType { .byteaArray }
    public func postgresText() throws -> String? {
        var out = [UInt8]()
        out.reserveCapacity(2 + self.count * 2)
        out.append(UInt8(ascii: "\\"))
        out.append(UInt8(ascii: "x"))
        for byte in self {
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard type == .bytea || type == .unknown else { throw typeMismatch(Data.self, type) }
        guard bytes.count >= 2, bytes[bytes.startIndex] == UInt8(ascii: "\\"),
            bytes[bytes.startIndex + 1] == UInt8(ascii: "x"), bytes.count % 2 == 0
        else { throw decodingError(Data.self, type, bytes) }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var data = Data(capacity: (bytes.count - 2) / 2)
        var index = bytes.startIndex + 2
        while index < bytes.endIndex {
            guard let high = nibble(bytes[index]), let low = nibble(bytes[index + 1]) else {
                throw decodingError(Data.self, type, bytes)
            }
            data.append(high << 4 | low)
            index += 2
        }
        self = data
    }
}

// MARK: - UUID

extension UUID: PostgresArrayElement {
    public static var postgresType: PostgresType { .uuid }
    public static var postgresArrayType: PostgresType { .uuidArray }
    public func postgresText() throws -> String? { self.uuidString.lowercased() }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard type == .uuid || type == .unknown || type == .text else { throw typeMismatch(UUID.self, type) }
        guard let value = UUID(uuidString: String(decoding: bytes, as: UTF8.self)) else {
            throw decodingError(UUID.self, type, bytes)
        }
        self = value
    }
}

// MARK: - Dates

extension Date: PostgresArrayElement {
    /// Dates are sent as `timestamptz` in UTC with microsecond precision; PostgreSQL casts them on assignment
    /// to `timestamp` and `date` columns in the session time zone, which is UTC unless
    /// ``PostgresConfiguration/sessionTimeZone`` says otherwise.
    public static var postgresType: PostgresType { .timestamptz }
    public static var postgresArrayType: PostgresType { .timestamptzArray }
    /// The `timestamptz` text; `Date.distantFuture` and `Date.distantPast` are sent as `infinity` and
    /// `-infinity`.
    /// - Throws: ``PostgresError`` of kind ``PostgresError/Kind/encoding`` for a date PostgreSQL cannot store
    ///   (NaN, infinite, or outside 4714 BC to 294276 AD).
    public func postgresText() throws -> String? { try PostgresDateCoding.format(self) }
    /// Decodes `timestamptz`, `timestamp` (read as UTC) and `date` (midnight UTC), every date PostgreSQL
    /// allows included (to 5874897 AD); `infinity` and `-infinity` decode as `Date.distantFuture` and
    /// `Date.distantPast`.
    /// - Throws: ``PostgresError`` of kind ``PostgresError/Kind/decoding`` for text that is not such a value.
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard [.timestamptz, .timestamp, .date, .unknown, .text].contains(type) else {
            throw typeMismatch(Date.self, type)
        }
        guard let value = PostgresDateCoding.parse(bytes) else { throw decodingError(Date.self, type, bytes) }
        self = value
    }
}

// MARK: - JSON

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
