internal import Crypto
import Foundation

/// One versioned migration: the parsed contents of a `migrations/<version>_<description>.sql` file.
///
/// A file is plain SQL with optional markers, each on a line of its own:
///
/// ```sql
/// -- migrate:no-transaction        (optional, at the top: run without a transaction)
/// -- migrate:lock-timeout 5s       (optional, at the top: SET lock_timeout for this migration)
/// -- migrate:statement-timeout 1min
/// -- migrate:up
/// CREATE INDEX CONCURRENTLY books_title ON books (title);
/// -- migrate:down
/// DROP INDEX CONCURRENTLY books_title;
/// ```
///
/// Without `-- migrate:up` the whole file (up to `-- migrate:down`, if any) is the up section. A migration
/// without a non-empty down section is irreversible.
///
/// ```swift
/// let migration = try SchemaMigration(fileName: "1_create_authors.sql", contents: "CREATE TABLE authors (id uuid);")
/// migration.version      // 1
/// migration.description  // "create authors"
/// ```
public struct SchemaMigration: Sendable, Hashable, Identifiable {
    /// The version: a positive integer or a timestamp such as `20250101120000`; migrations run in version order.
    public let version: Int64
    /// The description, from the file name with `_` shown as spaces.
    public let description: String
    /// The file name (`1_create_authors.sql`).
    public let fileName: String
    /// Hex SHA-256 of the file with line endings normalised to `\n`.
    public let checksum: String
    /// The up section.
    public let up: Script
    /// The down section, if the migration is reversible.
    public let down: Script?
    /// `false` when the file starts with `-- migrate:no-transaction`.
    public let isTransactional: Bool
    /// `lock_timeout` for this migration (`-- migrate:lock-timeout`), overriding the migrator's default.
    public let lockTimeout: String?
    /// `statement_timeout` for this migration (`-- migrate:statement-timeout`), overriding the default.
    public let statementTimeout: String?

    /// The hex SHA-256 (64 lowercase digits) of `text`'s UTF-8 bytes: the ``checksum`` of a file whose line
    /// endings are already normalised. History tables store it, so it must never change for the same text.
    static func checksum(of text: String) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var hex: [UInt8] = []
        hex.reserveCapacity(2 * SHA256.byteCount)
        for byte in SHA256.hash(data: Array(text.utf8)) {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: hex, as: UTF8.self)
    }

    /// The version.
    public var id: Int64 { self.version }
    /// Whether the migration has a down section.
    public var isReversible: Bool { self.down != nil }

    /// A section of a migration file: its SQL and where it starts in the file.
    public struct Script: Sendable, Hashable {
        /// The SQL text of the section.
        public let sql: String
        /// The 1-based line of the file on which ``sql`` starts.
        public let firstLine: Int

        var statements: [SQLStatement] { SQLScript.statements(in: self.sql, firstLine: self.firstLine) }
    }

    /// Parses a migration file.
    /// - Parameters:
    ///   - fileName: `<version>_<description>.sql` (a name, not a path).
    ///   - contents: the file's text; CRLF and CR line endings are normalised before hashing and parsing.
    /// - Throws: ``MigrationError`` of kind ``MigrationError/Kind/invalidFileName`` or
    ///   ``MigrationError/Kind/invalidFile``, naming the file and line.
    public init(fileName: String, contents: String) throws {
        let (version, description) = try Self.parseFileName(fileName)
        self.version = version
        self.description = description
        self.fileName = fileName
        let text = Self.normalizeLineEndings(contents)
        self.checksum = Self.checksum(of: text)
        let parsed = try MigrationFileParser.parse(text, fileName: fileName)
        self.up = parsed.up
        self.down = parsed.down
        self.isTransactional = parsed.isTransactional
        self.lockTimeout = parsed.lockTimeout
        self.statementTimeout = parsed.statementTimeout
    }

    /// Builds a migration in code (for example for tests or generated schemas).
    ///
    /// The checksum covers the equivalent file text, so changing any argument later counts as drift.
    /// ```swift
    /// let m = try SchemaMigration(version: 1, description: "create authors", up: "CREATE TABLE authors (id int);",
    ///                       down: "DROP TABLE authors;")
    /// ```
    public init(
        version: Int64, description: String, up: String, down: String? = nil, isTransactional: Bool = true
    ) throws {
        var text = isTransactional ? "" : "-- migrate:no-transaction\n"
        text += "-- migrate:up\n\(up)\n"
        if let down { text += "-- migrate:down\n\(down)\n" }
        let slug = description.replacingOccurrences(of: " ", with: "_")
        try self.init(fileName: "\(version)_\(slug).sql", contents: text)
    }

    /// `CRLF` and lone `CR` become `LF`, so a Windows checkout has the same checksum.
    static func normalizeLineEndings(_ text: String) -> String {
        guard text.unicodeScalars.contains("\r") else { return text }
        var out = String.UnicodeScalarView()
        var previousCR = false
        for scalar in text.unicodeScalars {
            if scalar == "\r" {
                out.append("\n")
                previousCR = true
                continue
            }
            if scalar == "\n" && previousCR {
                previousCR = false
                continue
            }
            previousCR = false
            out.append(scalar)
        }
        return String(out)
    }

    /// Splits `<version>_<description>.sql`.
    static func parseFileName(_ fileName: String) throws -> (Int64, String) {
        func invalid(_ reason: String) -> MigrationError {
            MigrationError(
                kind: .invalidFileName,
                message: "invalid migration file name (\(reason)); expected <version>_<description>.sql, "
                    + "for example 1_create_authors.sql",
                fileName: fileName)
        }
        guard fileName.hasSuffix(".sql") else { throw invalid("it does not end in .sql") }
        let stem = fileName.dropLast(4)
        let digits = stem.prefix { ("0"..."9").contains($0) }
        guard !digits.isEmpty else { throw invalid("it does not start with a version number") }
        guard let version = Int64(digits), version > 0 else {
            throw invalid("the version must be a positive 64-bit integer")
        }
        let rest = stem.dropFirst(digits.count)
        if rest.isEmpty { return (version, "") }
        guard rest.first == "_", rest.count > 1 else { throw invalid("the version must be followed by _") }
        return (version, rest.dropFirst().replacingOccurrences(of: "_", with: " "))
    }
}

/// Parses markers and directives of a migration file.
enum MigrationFileParser {
    struct Parsed {
        var up: SchemaMigration.Script
        var down: SchemaMigration.Script?
        var isTransactional = true
        var lockTimeout: String?
        var statementTimeout: String?
    }

    static func parse(_ text: String, fileName: String) throws -> Parsed {
        func invalid(_ message: String, line: Int) -> MigrationError {
            MigrationError(kind: .invalidFile, message: message, fileName: fileName, line: line)
        }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        var isTransactional = true
        var lockTimeout: String?
        var statementTimeout: String?
        var upMarker: Int?  // 0-based index of the marker line
        var downMarker: Int?
        var inHeader = true  // only comments and blank lines so far
        for (index, rawLine) in lines.enumerated() {
            let lineNumber = index + 1
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            guard let directive = Self.directive(in: line) else {
                if !line.isEmpty && !line.hasPrefix("--") { inHeader = false }
                continue
            }
            let parts = directive.split(separator: " ", maxSplits: 1).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            let name = parts[0].lowercased()
            let argument = parts.count > 1 && !parts[1].isEmpty ? parts[1] : nil
            switch name {
            case "up":
                if upMarker != nil { throw invalid("a second -- migrate:up marker", line: lineNumber) }
                if downMarker != nil { throw invalid("-- migrate:up must come before -- migrate:down", line: lineNumber) }
                if !inHeader { throw invalid("SQL before the -- migrate:up marker", line: lineNumber) }
                upMarker = index
            case "down":
                if downMarker != nil { throw invalid("a second -- migrate:down marker", line: lineNumber) }
                downMarker = index
            case "no-transaction", "lock-timeout", "statement-timeout":
                guard inHeader, downMarker == nil else {
                    throw invalid(
                        "-- migrate:\(name) must be at the top of the file, before any SQL", line: lineNumber)
                }
                if name == "no-transaction" {
                    isTransactional = false
                } else {
                    guard let argument else {
                        throw invalid("-- migrate:\(name) needs a value, for example 5s", line: lineNumber)
                    }
                    if name == "lock-timeout" { lockTimeout = argument } else { statementTimeout = argument }
                }
            default:
                throw invalid(
                    "unknown directive -- migrate:\(parts[0]) (known: up, down, no-transaction, lock-timeout, "
                        + "statement-timeout)", line: lineNumber)
            }
        }
        func section(from start: Int, to end: Int) -> SchemaMigration.Script {
            let body = start < end ? lines[start..<end].joined(separator: "\n") : ""
            return SchemaMigration.Script(sql: body, firstLine: start + 1)
        }
        let upStart = upMarker.map { $0 + 1 } ?? 0
        let upEnd = downMarker ?? lines.count
        let up = section(from: upStart, to: upEnd)
        guard !up.statements.isEmpty else {
            throw invalid("the up section has no SQL statement", line: upStart + 1)
        }
        var down: SchemaMigration.Script?
        if let downMarker {
            let script = section(from: downMarker + 1, to: lines.count)
            if !script.statements.isEmpty { down = script }
        }
        return Parsed(
            up: up, down: down, isTransactional: isTransactional, lockTimeout: lockTimeout,
            statementTimeout: statementTimeout)
    }

    /// The text after `-- migrate:` (or `--migrate:`) on a marker line, or `nil`.
    private static func directive(in line: String) -> String? {
        guard line.hasPrefix("--") else { return nil }
        let rest = line.dropFirst(2).drop { $0 == " " || $0 == "\t" }
        guard rest.lowercased().hasPrefix("migrate:") else { return nil }
        return String(rest.dropFirst("migrate:".count)).trimmingCharacters(in: .whitespaces)
    }
}
