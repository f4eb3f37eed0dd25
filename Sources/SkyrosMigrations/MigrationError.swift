import SkyrosPostgres

/// Why the migrator refused to run or failed.
///
/// Every error names what it is about: the migration file (and the line of the failing statement when the
/// server reported a position or the statement is known), the version, and for server errors the SQLSTATE and
/// the server's message. `description` is the one-line text the `migrate` tool prints; it never contains a
/// password.
///
/// ```swift
/// do {
///     try await migrator.migrate(on: connection)
/// } catch let error as MigrationError where error.kind == .statementFailed {
///     print(error.fileName ?? "?", error.line ?? 0, error.sqlState?.rawValue ?? "")
/// }
/// ```
public struct MigrationError: Error, Sendable, CustomStringConvertible {
    /// The classification of a ``MigrationError``. New kinds may be added; switch with a `default` case.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case sourceNotFound, unreadableFile, invalidFileName, duplicateVersion, invalidFile
            case refused, nonTransactionalStatement, statementFailed, lockTimeout, irreversible
            case invalidBaseline, invalidArgument, fileExists, history, sessionChanged
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }
        public var description: String { self.base.rawValue }

        /// The migrations directory or bundle resource does not exist.
        public static let sourceNotFound = Kind(.sourceNotFound)
        /// A migration file could not be read or is not valid UTF-8.
        public static let unreadableFile = Kind(.unreadableFile)
        /// A `.sql` file is not named `<version>_<description>.sql`.
        public static let invalidFileName = Kind(.invalidFileName)
        /// Two files share a version.
        public static let duplicateVersion = Kind(.duplicateVersion)
        /// A file has an unknown `-- migrate:` directive, misplaced markers or an empty up section.
        public static let invalidFile = Kind(.invalidFile)
        /// The history and the files disagree (checksum drift, missing file, out-of-order file); see ``issues``.
        public static let refused = Kind(.refused)
        /// A transactional migration contains a statement that cannot run inside a transaction.
        public static let nonTransactionalStatement = Kind(.nonTransactionalStatement)
        /// A statement of a migration failed on the server; see ``sqlState`` and ``line``.
        public static let statementFailed = Kind(.statementFailed)
        /// The migration lock was not acquired before the deadline.
        public static let lockTimeout = Kind(.lockTimeout)
        /// A migration to roll back has no `-- migrate:down` section.
        public static let irreversible = Kind(.irreversible)
        /// `baseline` is not possible (the history is not empty, or the version is invalid).
        public static let invalidBaseline = Kind(.invalidBaseline)
        /// An argument is out of range (for example `steps` < 1).
        public static let invalidArgument = Kind(.invalidArgument)
        /// `create` would overwrite an existing file.
        public static let fileExists = Kind(.fileExists)
        /// Reading or writing the history table failed.
        public static let history = Kind(.history)
        /// The migrator's statements ran on different server sessions: the connection goes through a
        /// transaction-pooling proxy (PgBouncer `pool_mode = transaction`), where its session lock and
        /// `search_path` do not hold. Migrate over a direct URL.
        public static let sessionChanged = Kind(.sessionChanged)
    }

    /// The classification.
    public var kind: Kind
    /// What went wrong, in words (without the file/line prefix).
    public var message: String
    /// The migration file concerned, if any (a file name, not a path).
    public var fileName: String?
    /// The 1-based line in ``fileName`` of the failing statement, if known.
    public var line: Int?
    /// The migration version concerned, if any.
    public var version: Int64?
    /// The server error behind a ``Kind/statementFailed`` or ``Kind/history`` error.
    public var underlying: PGError?
    /// For ``Kind/refused``: every disagreement found between the history and the files.
    public var issues: [MigrationIssue]

    /// The SQLSTATE of the server error, if any.
    public var sqlState: SQLState? { self.underlying?.sqlState }

    /// Creates an error.
    public init(
        kind: Kind, message: String, fileName: String? = nil, line: Int? = nil, version: Int64? = nil,
        underlying: PGError? = nil, issues: [MigrationIssue] = []
    ) {
        self.kind = kind
        self.message = message
        self.fileName = fileName
        self.line = line
        self.version = version
        self.underlying = underlying
        self.issues = issues
    }

    /// `file:line: message`, then the SQLSTATE for server errors, the server's detail with the values of rows
    /// redacted (`PGError.redactedDetail`) and its hint; one line per issue for refusals.
    public var description: String {
        var text = ""
        if let fileName {
            text += fileName
            if let line { text += ":\(line)" }
            text += ": "
        }
        if let sqlState = self.underlying?.sqlState {
            text += "SQLSTATE \(sqlState.rawValue): "
        }
        text += self.message
        // The detail may quote the values of a row (a duplicate key): they are redacted.
        if let detail = self.underlying?.redactedDetail { text += "\n  detail: \(detail)" }
        if let hint = self.underlying?.hint { text += "\n  hint: \(hint)" }
        for issue in self.issues { text += "\n  - \(issue)" }
        return text
    }
}

/// One disagreement between the history table and the migration files, found by ``SchemaMigrator/verify(on:)``
/// and refused by ``SchemaMigrator/migrate(on:to:dryRun:progress:)``.
public struct MigrationIssue: Sendable, Hashable, CustomStringConvertible {
    /// The kind of disagreement.
    public enum Kind: String, Sendable, Hashable {
        /// An applied file was edited: its checksum differs from the recorded one.
        case checksumMismatch = "checksum mismatch"
        /// A version is recorded as applied but no file has it, and newer files exist.
        case missingFile = "missing file"
        /// A version is recorded as applied that is newer than every file (the database is ahead of the files).
        case unknownAppliedVersion = "unknown applied version"
        /// A pending file is older than the newest applied migration.
        case outOfOrder = "out of order"
    }

    /// The kind of disagreement.
    public var kind: Kind
    /// The version concerned.
    public var version: Int64
    /// The file concerned (for a missing file: the name recorded in the history).
    public var fileName: String
    /// A sentence explaining the issue and what to do.
    public var message: String

    public var description: String { "\(self.fileName): \(self.message)" }
}
