/// A SQL statement and its bound parameters. Interpolated values become `$n` parameters, never text.
///
/// ```swift
/// let query: PostgresQuery = "SELECT * FROM \(identifier: table) WHERE id = \(id) AND name = \(name)"
/// // sql: SELECT * FROM "users" WHERE id = $1 AND name = $2, binds: [id, name]
/// ```
///
/// Raw text can only be added explicitly with `\(unsafeRaw:)` or ``init(unsafeSQL:binds:)``.
public struct PostgresQuery: Sendable, Hashable, ExpressibleByStringInterpolation, CustomStringConvertible {
    /// The statement text with `$1`, `$2`, … placeholders.
    public var sql: String
    /// The parameter values, in placeholder order.
    public var binds: [PostgresValue]
    /// An interpolated value that failed to encode; reported when the query runs.
    var encodingError: String?

    /// A statement whose text is trusted and whose values are given separately.
    public init(unsafeSQL sql: String, binds: [PostgresValue] = []) {
        self.sql = sql
        self.binds = binds
    }

    public init(stringLiteral value: String) {
        self.sql = value
        self.binds = []
    }

    public init(stringInterpolation: StringInterpolation) {
        self.sql = stringInterpolation.sql
        self.binds = stringInterpolation.binds
        self.encodingError = stringInterpolation.error
    }

    /// The SQL text only; bind values are never printed.
    public var description: String { self.sql }

    public struct StringInterpolation: StringInterpolationProtocol {
        var sql = ""
        var binds: [PostgresValue] = []
        /// The first encoding error, reported when the query runs.
        var error: String?

        public init(literalCapacity: Int, interpolationCount: Int) {
            self.sql.reserveCapacity(literalCapacity + interpolationCount * 3)
            self.binds.reserveCapacity(interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) { self.sql += literal }

        /// Binds a value as the next `$n` parameter.
        public mutating func appendInterpolation<T: PostgresEncodable>(_ value: T) {
            do {
                self.binds.append(try PostgresValue(value))
            } catch {
                self.binds.append(PostgresValue(type: T.postgresType, text: nil))
                if self.error == nil { self.error = "parameter $\(self.binds.count): \((error as? PostgresError)?.message ?? "\(error)")" }
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
    public mutating func append(_ other: PostgresQuery) {
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

/// Shifts `$n` placeholders outside string literals, quoted identifiers and comments by `offset`.
func renumberPlaceholders(_ sql: String, by offset: Int) -> String {
    var out = ""
    out.reserveCapacity(sql.utf8.count + 8)
    let scalars = Array(sql.unicodeScalars)
    var i = 0
    while i < scalars.count {
        let c = scalars[i]
        if c == "'" || c == "\"" {
            let quote = c
            out.unicodeScalars.append(c)
            i += 1
            while i < scalars.count {
                out.unicodeScalars.append(scalars[i])
                if scalars[i] == quote { i += 1; break }
                i += 1
            }
            continue
        }
        if c == "$", i + 1 < scalars.count, ("0"..."9").contains(scalars[i + 1]) {
            var j = i + 1
            var number = 0
            while j < scalars.count, ("0"..."9").contains(scalars[j]) {
                number = number * 10 + Int(scalars[j].value - 48)
                j += 1
            }
            out += "$\(number + offset)"
            i = j
            continue
        }
        out.unicodeScalars.append(c)
        i += 1
    }
    return out
}
