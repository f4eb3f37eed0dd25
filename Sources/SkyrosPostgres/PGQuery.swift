/// A SQL statement and its bound parameters. Interpolated values become `$n` parameters, never text.
///
/// ```swift
/// let query: PGQuery = "SELECT * FROM \(identifier: table) WHERE id = \(id) AND name = \(name)"
/// // sql: SELECT * FROM "users" WHERE id = $1 AND name = $2, binds: [id, name]
/// ```
///
/// Raw text can only be added explicitly with `\(unsafeRaw:)` or ``init(unsafeSQL:binds:)``.
public struct PGQuery: Sendable, Hashable, ExpressibleByStringInterpolation, CustomStringConvertible {
    /// The statement text with `$1`, `$2`, … placeholders.
    public var sql: String
    /// The parameter values, in placeholder order.
    public var binds: [PGValue]
    /// An interpolated value that failed to encode; reported when the query runs.
    var encodingError: String?

    /// A statement whose text is trusted and whose values are given separately.
    public init(unsafeSQL sql: String, binds: [PGValue] = []) {
        self.sql = sql
        self.binds = binds
    }

    /// A statement without parameters: `let query: PGQuery = "SELECT 1"`.
    public init(stringLiteral value: String) {
        self.sql = value
        self.binds = []
    }

    /// A statement built by interpolation, each interpolated value bound as the next `$n` parameter.
    public init(stringInterpolation: StringInterpolation) {
        self.sql = stringInterpolation.sql
        self.binds = stringInterpolation.binds
        self.encodingError = stringInterpolation.error
    }

    /// The SQL text only; bind values are never printed.
    public var description: String { self.sql }

    /// Builds a ``PGQuery`` from a string literal with interpolations: values become parameters, and only
    /// `\(identifier:)` and `\(unsafeRaw:)` add text.
    public struct StringInterpolation: StringInterpolationProtocol {
        var sql = ""
        var binds: [PGValue] = []
        /// The first encoding error, reported when the query runs.
        var error: String?

        /// Reserves room for the statement text and the parameters (called by the compiler).
        public init(literalCapacity: Int, interpolationCount: Int) {
            self.sql.reserveCapacity(literalCapacity + interpolationCount * 3)
            self.binds.reserveCapacity(interpolationCount)
        }

        /// Appends statement text from the literal (called by the compiler).
        public mutating func appendLiteral(_ literal: String) { self.sql += literal }

        /// Binds a value as the next `$n` parameter.
        public mutating func appendInterpolation<T: PGEncodable>(_ value: T) {
            do {
                self.binds.append(try PGValue(value))
            } catch {
                self.binds.append(PGValue(type: T.postgresType, text: nil))
                if self.error == nil { self.error = "parameter $\(self.binds.count): \((error as? PGError)?.message ?? "\(error)")" }
            }
            self.sql += "$\(self.binds.count)"
        }

        /// Appends a quoted identifier (`"my table"`), with embedded quotes doubled.
        public mutating func appendInterpolation(identifier: String) {
            self.sql += quoteIdentifier(identifier)
        }

        /// Appends a dotted, quoted name (`"schema"."table"`).
        public mutating func appendInterpolation(qualified parts: [String]) {
            self.sql += parts.map(quoteIdentifier).joined(separator: ".")
        }

        /// Appends trusted SQL text as is. Never pass user input here.
        public mutating func appendInterpolation(unsafeRaw text: String) { self.sql += text }
    }

    /// Appends another query, renumbering its placeholders.
    public mutating func append(_ other: PGQuery) {
        if other.binds.isEmpty {
            self.sql += other.sql
            return
        }
        let offset = self.binds.count
        self.sql += renumberPlaceholders(other.sql, by: offset)
        self.binds += other.binds
        if self.encodingError == nil { self.encodingError = other.encodingError }
    }
}

/// Quotes an SQL identifier: wraps it in double quotes and doubles embedded quotes.
/// Equivalent to `PQescapeIdentifier` for UTF-8 text, without a connection.
public func quoteIdentifier(_ name: String) -> String {
    var quoted = "\""
    quoted.reserveCapacity(name.utf8.count + 2)
    for character in name.unicodeScalars {
        if character == "\"" { quoted.unicodeScalars.append("\"") }
        quoted.unicodeScalars.append(character)
    }
    quoted.unicodeScalars.append("\"")
    return quoted
}

/// Shifts the `$n` parameters of `sql` by `offset`, leaving alone everything PostgreSQL's lexer does not read as
/// a parameter: string constants (`'…'` with `''`, `E'…'` with backslash escapes, `U&'…'`, `B'…'`, `X'…'`),
/// dollar-quoted strings (`$$…$$`, `$tag$…$tag$`), quoted identifiers (`"…"`), `--` line comments, nested
/// `/* … */` block comments, and identifiers containing `$` (`a$1`).
///
/// `standard_conforming_strings` is assumed on (PostgreSQL's default since 9.1): in `'…'` a backslash is an
/// ordinary character.
func renumberPlaceholders(_ sql: String, by offset: Int) -> String {
    let bytes = Array(sql.utf8)
    let count = bytes.count
    var out = [UInt8]()
    out.reserveCapacity(count + 8)
    var i = 0

    /// Copies `bytes[i..<end]` to `out` and moves `i` to `end`.
    func copy(to end: Int) {
        out.append(contentsOf: bytes[i..<end])
        i = end
    }
    /// The index just past a quoted run that starts at `start` (the opening quote) and ends with `quote`
    /// (a doubled quote is part of it); with `backslashEscapes`, a backslash escapes the next byte.
    func quotedEnd(from start: Int, quote: UInt8, backslashEscapes: Bool) -> Int {
        var j = start + 1
        while j < count {
            let byte = bytes[j]
            if backslashEscapes, byte == UInt8(ascii: "\\") {
                j += 2
                continue
            }
            if byte == quote {
                if j + 1 < count, bytes[j + 1] == quote {
                    j += 2
                    continue
                }
                return j + 1
            }
            j += 1
        }
        return count
    }

    while i < count {
        let byte = bytes[i]
        let next: UInt8? = i + 1 < count ? bytes[i + 1] : nil
        switch byte {
        case UInt8(ascii: "'"):
            copy(to: quotedEnd(from: i, quote: byte, backslashEscapes: false))
        case UInt8(ascii: "\""):
            copy(to: quotedEnd(from: i, quote: byte, backslashEscapes: false))
        case UInt8(ascii: "-") where next == UInt8(ascii: "-"):
            var j = i + 2
            while j < count, bytes[j] != UInt8(ascii: "\n"), bytes[j] != UInt8(ascii: "\r") { j += 1 }
            copy(to: j)
        case UInt8(ascii: "/") where next == UInt8(ascii: "*"):
            // Block comments nest in PostgreSQL.
            var depth = 1
            var j = i + 2
            while j < count, depth > 0 {
                if bytes[j] == UInt8(ascii: "/"), j + 1 < count, bytes[j + 1] == UInt8(ascii: "*") {
                    depth += 1
                    j += 2
                } else if bytes[j] == UInt8(ascii: "*"), j + 1 < count, bytes[j + 1] == UInt8(ascii: "/") {
                    depth -= 1
                    j += 2
                } else {
                    j += 1
                }
            }
            copy(to: j)
        case UInt8(ascii: "E") where next == UInt8(ascii: "'"), UInt8(ascii: "e") where next == UInt8(ascii: "'"):
            // An escape string: E'it\'s'. (Only at the start of a word: identifiers are copied whole below.)
            copy(to: quotedEnd(from: i + 1, quote: UInt8(ascii: "'"), backslashEscapes: true))
        case UInt8(ascii: "$"):
            if let next, isDigit(next) {
                // A parameter: `$` and digits (a dollar-quote tag cannot start with a digit).
                var j = i + 1
                var number = 0
                while j < count, isDigit(bytes[j]) {
                    number = number &* 10 &+ Int(bytes[j] - UInt8(ascii: "0"))
                    j += 1
                }
                out.append(contentsOf: "$\(number &+ offset)".utf8)
                i = j
            } else if let tagEnd = dollarQuoteTagEnd(bytes, from: i) {
                // `$tag$ … $tag$` (or `$$ … $$`): everything up to the same tag is text.
                let tag = bytes[i..<tagEnd]
                var j = tagEnd
                var end = count
                while j < count {
                    if bytes[j] == UInt8(ascii: "$"), bytes[j...].starts(with: tag) {
                        end = j + tag.count
                        break
                    }
                    j += 1
                }
                copy(to: end)
            } else {
                copy(to: i + 1)
            }
        default:
            if isIdentifierStart(byte) {
                // A keyword or identifier, with any `$` and digits it contains (`a$1` is one identifier).
                var j = i + 1
                while j < count, isIdentifierStart(bytes[j]) || isDigit(bytes[j]) || bytes[j] == UInt8(ascii: "$") { j += 1 }
                copy(to: j)
            } else {
                copy(to: i + 1)
            }
        }
    }
    return String(decoding: out, as: UTF8.self)
}

private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

/// A letter, `_`, or any byte of a non-ASCII character, as in PostgreSQL's lexer (`ident_start`).
private func isIdentifierStart(_ byte: UInt8) -> Bool {
    (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
        || byte == UInt8(ascii: "_") || byte >= 0x80
}

/// The index just past a dollar-quote opening tag (`$$` or `$tag$`) starting at `start`, or `nil` when the `$`
/// there does not open one.
private func dollarQuoteTagEnd(_ bytes: [UInt8], from start: Int) -> Int? {
    var j = start + 1
    if j < bytes.count, isIdentifierStart(bytes[j]) {
        j += 1
        while j < bytes.count, isIdentifierStart(bytes[j]) || isDigit(bytes[j]) { j += 1 }
    }
    return j < bytes.count && bytes[j] == UInt8(ascii: "$") ? j + 1 : nil
}
