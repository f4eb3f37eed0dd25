import Foundation

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
private func isFloatType(_ type: PGType) -> Bool {
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

extension Double: PGArrayElement {
    public static var postgresType: PGType { .float8 }
    public static var postgresArrayType: PGType { .float8Array }
    public func postgresText() throws -> String? { floatText(self) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
        guard isFloatType(type) else { throw typeMismatch(Double.self, type) }
        guard let value = parseDouble(bytes) else { throw decodingError(Double.self, type, bytes) }
        self = value
    }
}

extension Float: PGArrayElement {
    public static var postgresType: PGType { .float4 }
    public static var postgresArrayType: PGType { .float4Array }
    public func postgresText() throws -> String? {
        if self.isNaN { return "NaN" }
        if self.isInfinite { return self < 0 ? "-Infinity" : "Infinity" }
        return self.description
    }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
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
