import Foundation

/// PostgreSQL's text form of a row value (`record_out` / `record_in`): `(a,"b c",)`, a field quoted when it is
/// empty or holds a quote, backslash, parenthesis, comma or white space, NULL as nothing.
package enum RecordText {
    /// The text of a row of `fields` (`nil`: NULL).
    package static func format(_ fields: [String?]) -> String {
        var out = "("
        for (index, field) in fields.enumerated() {
            if index > 0 { out.append(",") }
            guard let field else { continue }
            let quoted = field.isEmpty || field.utf8.contains(where: Self.needsQuotes)
            if quoted { out.append("\"") }
            for character in field.unicodeScalars {
                if character == "\"" || character == "\\" { out.unicodeScalars.append(character) }
                out.unicodeScalars.append(character)
            }
            if quoted { out.append("\"") }
        }
        out.append(")")
        return out
    }

    private static func needsQuotes(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: ","): true
        // C's isspace: space, \t, \n, \v, \f, \r.
        case 0x20, 0x09...0x0D: true
        default: false
        }
    }

    /// The fields of a row's text (`nil`: NULL).
    /// - Throws: ``PGError`` of kind ``PGError/Kind/decoding`` when the text is not a row.
    package static func parse(_ bytes: ArraySlice<UInt8>) throws -> [String?] {
        var index = bytes.startIndex
        func malformed() -> PGError {
            PGError(kind: .decoding, message: "malformed row value '\(String(decoding: bytes.prefix(64), as: UTF8.self))'")
        }
        guard index < bytes.endIndex, bytes[index] == UInt8(ascii: "(") else { throw malformed() }
        index += 1
        var fields: [String?] = []
        while true {
            guard index < bytes.endIndex else { throw malformed() }
            var field: [UInt8] = []
            var sawQuote = false
            var inQuotes = false
            while index < bytes.endIndex {
                let byte = bytes[index]
                if !inQuotes, byte == UInt8(ascii: ",") || byte == UInt8(ascii: ")") { break }
                index += 1
                if byte == UInt8(ascii: "\\") {
                    guard index < bytes.endIndex else { throw malformed() }
                    field.append(bytes[index])
                    index += 1
                } else if byte == UInt8(ascii: "\"") {
                    if inQuotes, index < bytes.endIndex, bytes[index] == UInt8(ascii: "\"") {
                        field.append(byte)
                        index += 1
                    } else {
                        inQuotes.toggle()
                        sawQuote = true
                    }
                } else {
                    field.append(byte)
                }
            }
            guard index < bytes.endIndex, !inQuotes else { throw malformed() }
            fields.append(field.isEmpty && !sawQuote ? nil : String(decoding: field, as: UTF8.self))
            let separator = bytes[index]
            index += 1
            if separator == UInt8(ascii: ")") { break }
        }
        guard index == bytes.endIndex else { throw malformed() }
        return fields
    }
}
