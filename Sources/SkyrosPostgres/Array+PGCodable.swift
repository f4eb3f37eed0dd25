import Foundation

extension Array: PGEncodable where Element: PGArrayElement {
    public static var postgresType: PGType { Element.postgresArrayType }

    /// The array literal `{…}` with every element quoted and NULL for nil elements.
    public func postgresText() throws -> String? {
        var out = "{"
        var first = true
        for element in self {
            if !first { out += "," }
            first = false
            guard let text = try element.postgresText() else {
                out += "NULL"
                continue
            }
            out += "\""
            if text.utf8.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                for scalar in text.unicodeScalars {
                    if scalar == "\"" || scalar == "\\" { out += "\\" }
                    out.unicodeScalars.append(scalar)
                }
            } else {
                out += text
            }
            out += "\""
        }
        out += "}"
        return out
    }
}

extension Array: PGDecodable where Element: PGArrayElement {
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
        guard type.isArray || type == .unknown || type == .text else { throw typeMismatch(Self.self, type) }
        let elementType = PostgresArrayCoding.elementType(of: type)
        var result: [Element] = []
        try PostgresArrayCoding.parse(bytes) { element in
            if let element {
                result.append(try Element(postgresText: element, type: elementType))
            } else {
                result.append(try Element.postgresNull(type: elementType))
            }
        }
        self = result
    }
}

enum PostgresArrayCoding {
    static func elementType(of arrayType: PGType) -> PGType {
        switch arrayType {
        case .boolArray: return .bool
        case .byteaArray: return .bytea
        case .int2Array: return .int2
        case .int4Array: return .int4
        case .int8Array: return .int8
        case .textArray: return .text
        case .varcharArray: return .varchar
        case .float4Array: return .float4
        case .float8Array: return .float8
        case .timestampArray: return .timestamp
        case .timestamptzArray: return .timestamptz
        case .dateArray: return .date
        case .numericArray: return .numeric
        case .uuidArray: return .uuid
        case .jsonArray: return .json
        case .jsonbArray: return .jsonb
        default: return .unknown
        }
    }

    /// Parses a one-dimensional array literal, calling `body` with each element's text (nil for NULL).
    static func parse(_ bytes: ArraySlice<UInt8>, _ body: (ArraySlice<UInt8>?) throws -> Void) throws {
        var index = bytes.startIndex
        let end = bytes.endIndex
        // Skip an explicit bounds decoration such as "[0:2]=".
        if index < end, bytes[index] == UInt8(ascii: "[") {
            guard let equals = bytes[index...].firstIndex(of: UInt8(ascii: "=")) else {
                throw PGError(kind: .decoding, message: "malformed array literal")
            }
            index = equals + 1
        }
        guard index < end, bytes[index] == UInt8(ascii: "{"), bytes[end - 1] == UInt8(ascii: "}") else {
            throw PGError(kind: .decoding, message: "malformed array literal")
        }
        index += 1
        let close = end - 1
        if index == close { return }
        while index <= close {
            if bytes[index] == UInt8(ascii: "{") {
                throw PGError(kind: .decoding, message: "multi-dimensional arrays are not supported")
            }
            if bytes[index] == UInt8(ascii: "\"") {
                index += 1
                var element: [UInt8] = []
                while index < close, bytes[index] != UInt8(ascii: "\"") {
                    if bytes[index] == UInt8(ascii: "\\") { index += 1 }
                    element.append(bytes[index])
                    index += 1
                }
                index += 1  // closing quote
                try body(element[...])
            } else {
                let start = index
                while index < close, bytes[index] != UInt8(ascii: ",") { index += 1 }
                let token = bytes[start..<index]
                try body(token.elementsEqual("NULL".utf8) ? nil : token)
            }
            index += 1  // the comma, or past the closing brace
        }
    }
}
