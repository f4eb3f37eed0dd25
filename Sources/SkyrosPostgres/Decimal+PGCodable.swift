import Foundation

private let posix = Locale(identifier: "en_US_POSIX")

/// `numeric` as `Decimal`: exact up to 38 significant digits. A value `Decimal` cannot hold exactly (more digits,
/// or beyond its exponent range) fails with ``PGError/Kind/decoding`` instead of being rounded; read such
/// values as `String`.
extension Decimal: PGArrayElement {
    public static var postgresType: PGType { .numeric }
    public static var postgresArrayType: PGType { .numericArray }
    public func postgresText() throws -> String? { self.isNaN ? "NaN" : self.description }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
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
            throw PGError(
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
