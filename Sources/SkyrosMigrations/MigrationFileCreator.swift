import Foundation

/// Writes new, empty migration files with the next version (`migrate create NAME`).
///
/// ```swift
/// let url = try MigrationFileCreator.create(named: "add books", in: URL(fileURLWithPath: "migrations"))
/// // migrations/4_add_books.sql containing "-- migrate:up" and "-- migrate:down" sections
/// ```
public enum MigrationFileCreator {
    /// Versions at or above this are treated as timestamps (`yyyyMMddHHmmss` has 14 digits).
    static let timestampThreshold: Int64 = 10_000_000_000_000

    /// Creates `<next version>_<name>.sql` in `directory` (created if missing).
    ///
    /// The next version is the highest existing version + 1, or, when the directory already uses timestamps
    /// (or `timestamp` is `true`), the current UTC time as `yyyyMMddHHmmss` (bumped past the newest file).
    /// - Parameters:
    ///   - name: a description; characters other than letters and digits become `_`.
    ///   - directory: the migrations directory.
    ///   - timestamp: force timestamp (`true`) or sequential (`false`) versions; `nil` follows the directory.
    ///   - now: the clock for timestamp versions.
    ///   - contents: the file's text; `nil` for an empty `-- migrate:up` / `-- migrate:down` template.
    /// - Returns: the new file's URL.
    /// - Throws: ``MigrationError`` (``MigrationError/Kind/invalidArgument`` for an empty name,
    ///   ``MigrationError/Kind/fileExists``, or an I/O failure as ``MigrationError/Kind/unreadableFile``).
    @discardableResult
    public static func create(
        named name: String, in directory: URL, timestamp: Bool? = nil, now: Date = Date(), contents: String? = nil
    ) throws -> URL {
        let fileName = try Self.nextFileName(named: name, in: directory, timestamp: timestamp, now: now)
        let fileManager = FileManager.default
        do {
            try fileManager.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw MigrationError(
                kind: .unreadableFile, message: "cannot create \(directory.path): \(error.localizedDescription)")
        }
        let url = directory.appendingPathComponent(fileName)
        guard !fileManager.fileExists(atPath: url.path) else {
            throw MigrationError(kind: .fileExists, message: "the file already exists", fileName: fileName)
        }
        let template = contents ?? """
            -- migrate:up


            -- migrate:down


            """
        do {
            try Data(template.utf8).write(to: url, options: .withoutOverwriting)
        } catch {
            throw MigrationError(
                kind: .unreadableFile, message: "cannot write the file: \(error.localizedDescription)",
                fileName: fileName)
        }
        return url
    }

    /// The name ``create(named:in:timestamp:now:contents:)`` gives the next file, without writing anything:
    /// `<next version>_<slug>.sql`.
    ///
    /// ```swift
    /// let name = try MigrationFileCreator.nextFileName(named: "add reviews", in: URL(fileURLWithPath: "migrations"))
    /// // "4_add_reviews.sql" after 3_index_books_title.sql
    /// ```
    /// - Parameters:
    ///   - name: a description; characters other than letters and digits become `_`.
    ///   - directory: the migrations directory (a missing one counts as empty).
    ///   - timestamp: force timestamp (`true`) or sequential (`false`) versions; `nil` follows the directory.
    ///   - now: the clock for timestamp versions.
    /// - Throws: ``MigrationError`` of kind ``MigrationError/Kind/invalidArgument`` for a name without letters
    ///   or digits.
    public static func nextFileName(named name: String, in directory: URL, timestamp: Bool? = nil, now: Date = Date())
        throws -> String
    {
        let slug = Self.slug(name)
        guard !slug.isEmpty else {
            throw MigrationError(
                kind: .invalidArgument, message: "the migration name \"\(name)\" has no letters or digits")
        }
        let fileManager = FileManager.default
        let existing = ((try? fileManager.contentsOfDirectory(atPath: directory.path)) ?? [])
            .filter { $0.hasSuffix(".sql") }
            .compactMap { try? SchemaMigration.parseFileName($0).0 }
        let newest = existing.max() ?? 0
        let version: Int64
        if timestamp ?? (newest >= Self.timestampThreshold) {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "UTC")
            formatter.dateFormat = "yyyyMMddHHmmss"
            version = max(Int64(formatter.string(from: now)) ?? 0, newest + 1)
        } else {
            version = newest + 1
        }
        return "\(version)_\(slug).sql"
    }

    /// `"Add Books (v2)"` → `"add_books_v2"`.
    static func slug(_ name: String) -> String {
        var out = ""
        for character in name.lowercased() {
            if character.isASCII, character.isLetter || character.isNumber {
                out.append(character)
            } else if !out.isEmpty, out.last != "_" {
                out.append("_")
            }
        }
        while out.last == "_" { out.removeLast() }
        return out
    }
}
