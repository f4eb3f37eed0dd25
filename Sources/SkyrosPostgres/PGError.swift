/// An error from the PostgreSQL client: a server error with its SQLSTATE and fields, or a client-side failure.
///
/// `description` is deliberately short and generic-safe: it contains the kind, the SQLSTATE and the server's
/// primary message, never bind values and never a password. `debugDescription` adds the detail, hint, position
/// and the object names the server reported, with the row values the detail may quote redacted (see
/// `redactedDetail`); ``detail`` itself keeps the server's text for code that needs it.
///
/// ```swift
/// do {
///     try await connection.query("INSERT INTO users (email) VALUES (\(email))")
/// } catch let error as PGError where error.kind == .uniqueViolation {
///     print("duplicate:", error.constraint ?? "?")
/// }
/// ```
public struct PGError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The classification of an error. New kinds may be added; switch with a `default` case.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidConfiguration, connectionFailed, authenticationFailed, databaseNotFound, connectionLost
            case connectionClosed, server, uniqueViolation, foreignKeyViolation, notNullViolation, checkViolation
            case serializationFailure, deadlock, queryCancelled, undefinedTable, undefinedColumn, syntaxError
            case encoding, decoding, poolTimeout, poolClosed, protocolViolation, pipelineAborted, resultTooLarge
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }
        /// The kind's name, as in `PGError.uniqueViolation`.
        public var description: String { self.base.rawValue }

        /// The URL or conninfo could not be parsed, or a parameter is invalid.
        public static let invalidConfiguration = Kind(.invalidConfiguration)
        /// The server could not be reached (refused, unreachable, TLS failure, too many connections).
        public static let connectionFailed = Kind(.connectionFailed)
        /// The server rejected the credentials (SQLSTATE 28xxx).
        public static let authenticationFailed = Kind(.authenticationFailed)
        /// The database named in the configuration does not exist (SQLSTATE 3D000).
        public static let databaseNotFound = Kind(.databaseNotFound)
        /// The connection broke during an operation (server restart, terminated backend, network).
        public static let connectionLost = Kind(.connectionLost)
        /// The connection was closed by this process.
        public static let connectionClosed = Kind(.connectionClosed)
        /// Any other error reported by the server; see ``PGError/sqlState``.
        public static let server = Kind(.server)
        /// A duplicate key (SQLSTATE 23505); ``PGError/constraint`` names the index.
        public static let uniqueViolation = Kind(.uniqueViolation)
        /// A reference to a missing row, or a delete of a referenced one (SQLSTATE 23503).
        public static let foreignKeyViolation = Kind(.foreignKeyViolation)
        /// NULL in a `NOT NULL` column (SQLSTATE 23502); ``PGError/column`` names it.
        public static let notNullViolation = Kind(.notNullViolation)
        /// A row fails a `CHECK` constraint (SQLSTATE 23514).
        public static let checkViolation = Kind(.checkViolation)
        /// A conflict under `REPEATABLE READ` or `SERIALIZABLE` (SQLSTATE 40001); retrying the transaction may succeed.
        public static let serializationFailure = Kind(.serializationFailure)
        /// The server broke a deadlock by failing this transaction (SQLSTATE 40P01); retrying it may succeed.
        public static let deadlock = Kind(.deadlock)
        /// The statement was cancelled (task cancellation or `statement_timeout`).
        public static let queryCancelled = Kind(.queryCancelled)
        /// A table or view that does not exist or is not on the `search_path` (SQLSTATE 42P01).
        public static let undefinedTable = Kind(.undefinedTable)
        /// A column that does not exist (SQLSTATE 42703).
        public static let undefinedColumn = Kind(.undefinedColumn)
        /// The statement does not parse (SQLSTATE 42601); ``PGError/position`` points into its text.
        public static let syntaxError = Kind(.syntaxError)
        /// A Swift value cannot be sent (for example text containing a NUL character).
        public static let encoding = Kind(.encoding)
        /// A column value cannot be decoded into the requested Swift type.
        public static let decoding = Kind(.decoding)
        /// No pooled connection became available within the lease timeout.
        public static let poolTimeout = Kind(.poolTimeout)
        /// The pool was shut down.
        public static let poolClosed = Kind(.poolClosed)
        /// libpq reported an unexpected state.
        public static let protocolViolation = Kind(.protocolViolation)
        /// A statement in a pipeline was skipped because an earlier statement failed.
        public static let pipelineAborted = Kind(.pipelineAborted)
        /// A statement's result holds more than 2 GiB of values, more than one `PGRows` can hold: fetch
        /// it in parts (`LIMIT`/`OFFSET`, or a cursor). The connection stays usable.
        ///
        /// ```swift
        /// } catch let error as PGError where error.kind == .resultTooLarge {
        ///     // read the table in pages instead
        /// }
        /// ```
        public static let resultTooLarge = Kind(.resultTooLarge)
    }

    /// The classification.
    public var kind: Kind
    /// The SQLSTATE the server sent, if any.
    public var sqlState: SQLState?
    /// `ERROR`, `FATAL`, `PANIC`… as sent by the server.
    public var severity: String?
    /// The primary message (server) or a client-side explanation.
    public var message: String
    /// The server's `DETAIL` as it sent it. It may quote the values of a row (`Key (email)=(ann@example.com)
    /// already exists.`), so `debugDescription` and Skyros's own messages show `redactedDetail` instead; log
    /// this property only where row values may go.
    public var detail: String?
    /// The server's `HINT`: a suggestion for fixing the problem.
    public var hint: String?
    /// 1-based character position in the statement text, as sent by the server. For
    /// ``Kind/invalidConfiguration``: the position in the URL or conninfo string (counted in Unicode scalars)
    /// where it stops being what libpq accepts, when Skyros could tell.
    public var position: Int?
    /// The schema of the object the error is about, when the server names one.
    public var schema: String?
    /// The table the error is about (constraint violations name it).
    public var table: String?
    /// The column the error is about (a `NOT NULL` violation, or a cell that failed to decode).
    public var column: String?
    /// The data type the error is about (for example a domain whose check failed).
    public var dataType: String?
    /// The constraint that was violated (`users_email_key`): the way to tell two unique violations apart.
    public var constraint: String?
    /// For pipelines: the 0-based index of the statement that failed.
    public var statementIndex: Int?

    /// An error built by hand, as a test double or by a layer above that reports through the client's error.
    public init(
        kind: Kind, sqlState: SQLState? = nil, severity: String? = nil, message: String,
        detail: String? = nil, hint: String? = nil, position: Int? = nil, schema: String? = nil,
        table: String? = nil, column: String? = nil, dataType: String? = nil, constraint: String? = nil,
        statementIndex: Int? = nil
    ) {
        self.kind = kind
        self.sqlState = sqlState
        self.severity = severity
        self.message = message
        self.detail = detail
        self.hint = hint
        self.position = position
        self.schema = schema
        self.table = table
        self.column = column
        self.dataType = dataType
        self.constraint = constraint
        self.statementIndex = statementIndex
    }

    /// Whether retrying the same work on a fresh connection or transaction may succeed.
    public var isTransient: Bool {
        switch self.kind {
        case .connectionLost, .serializationFailure, .deadlock, .poolTimeout: return true
        default:
            return self.sqlState ~= .connectionException || self.sqlState == .adminShutdown
                || self.sqlState == .crashShutdown || self.sqlState == .cannotConnectNow
        }
    }

    /// Whether a connection that failed to open may open when tried again later, because the server was not
    /// there yet rather than configured wrong: refused, no socket, timed out, host name not resolved yet,
    /// network unreachable, closed during start-up, starting up or shutting down (57P03), too many
    /// connections (53300). Authentication, a missing database, TLS and configuration errors are not.
    package var isRetryableConnectFailure: Bool {
        guard self.kind == .connectionFailed else { return false }
        if self.sqlState == .cannotConnectNow || self.sqlState == .tooManyConnections { return true }
        // A certificate file that cannot be read also says "No such file or directory": TLS never retries.
        if self.message.contains("SSL") || self.message.contains("certificate") { return false }
        if self.message.contains("on socket"), self.message.contains("No such file or directory") { return true }
        return Self.retryableConnectMessages.contains { self.message.contains($0) }
    }

    /// What libpq (and the OS, through it) says when the server is not reachable yet.
    private static let retryableConnectMessages = [
        "Connection refused", "timeout expired", "Connection timed out",
        "could not translate host name", "Temporary failure in name resolution", "Name or service not known",
        "No route to host", "Network is unreachable", "Connection reset by peer",
        "server closed the connection unexpectedly",
    ]

    /// The kind, the SQLSTATE, the primary message and the constraint's name: safe to log (no row values, bind
    /// values or password).
    public var description: String {
        var text = "PGError.\(self.kind)"
        if let sqlState { text += " (\(sqlState.rawValue))" }
        text += ": \(self.message)"
        if let constraint { text += " [constraint \(constraint)]" }
        return text
    }

    /// ``description`` plus the severity, the `redactedDetail`, the hint, the position and the objects the server
    /// named.
    public var debugDescription: String {
        var parts = [self.description]
        if let severity { parts.append("severity: \(severity)") }
        if let detail = self.redactedDetail { parts.append("detail: \(detail)") }
        if let hint { parts.append("hint: \(hint)") }
        if let position { parts.append("position: \(position)") }
        if let schema { parts.append("schema: \(schema)") }
        if let table { parts.append("table: \(table)") }
        if let column { parts.append("column: \(column)") }
        if let dataType { parts.append("type: \(dataType)") }
        if let statementIndex { parts.append("statement: \(statementIndex)") }
        return parts.joined(separator: "; ")
    }

    /// Classifies a server error by SQLSTATE.
    static func kind(for state: SQLState?) -> Kind {
        guard let state else { return .server }
        switch state {
        case .uniqueViolation: return .uniqueViolation
        case .foreignKeyViolation: return .foreignKeyViolation
        case .notNullViolation: return .notNullViolation
        case .checkViolation: return .checkViolation
        case .serializationFailure: return .serializationFailure
        case .deadlockDetected: return .deadlock
        case .queryCanceled: return .queryCancelled
        case .undefinedTable: return .undefinedTable
        case .undefinedColumn: return .undefinedColumn
        case .syntaxError: return .syntaxError
        case .invalidCatalogName: return .databaseNotFound
        case .adminShutdown, .crashShutdown, .cannotConnectNow: return .connectionLost
        default:
            if state.errorClass == "28" { return .authenticationFailed }
            if state.errorClass == "08" { return .connectionLost }
            return .server
        }
    }
}

extension PGError {
    /// ``detail`` with the values of rows replaced by `<redacted>`: what `debugDescription` and Skyros's own
    /// messages (a failed migration's, for example) show.
    ///
    /// PostgreSQL quotes the values of a row in the `DETAIL` of integrity and data errors: the key of a unique,
    /// foreign-key or exclusion violation, the failing row of a `NOT NULL` or `CHECK` violation, a partition key,
    /// a JSON token. In those shapes the column names stay and the values go:
    ///
    /// ```swift
    /// do {
    ///     try await connection.query("INSERT INTO users (email) VALUES (\(email))")
    /// } catch let error as PGError where error.kind == .uniqueViolation {
    ///     logger.info("duplicate user", metadata: ["detail": "\(error.redactedDetail ?? "")"])
    ///     // detail: Key (email)=(<redacted>) already exists.
    /// }
    /// ```
    ///
    /// Any other detail shows whole only when its SQLSTATE class is one whose details name objects, processes
    /// or counts, never values: connection (`08`), unsupported feature (`0A`), transaction state (`25`, `40`),
    /// authorization (`28`), dependent objects (`2B`), catalog and schema names (`3D`, `3F`), syntax and
    /// access (`42`), resources and limits (`53`, `54`), object state and locks (`55`), operator intervention
    /// (`57`), system (`58`). Every other detail is `<redacted>` whole: a PL/pgSQL `RAISE … USING DETAIL`
    /// (class `P0`), an internal error, and a value-bearing detail from a server whose messages are translated
    /// (`lc_messages`), which no shape matches. ``detail`` keeps the server's text.
    public var redactedDetail: String? {
        self.detail.map { Self.redactingValues(in: $0, sqlState: self.sqlState) }
    }

    /// What stands for a redacted value.
    static let redactedValue = "<redacted>"

    /// The SQLSTATE classes whose `DETAIL` names objects, processes or counts, never the values of a row.
    static let classesWithoutValuesInDetail: Set<String> = [
        "08", "0A", "0B", "0L", "0P", "25", "28", "2B", "2D", "3B", "3D", "3F", "40", "42", "53", "54", "55", "57",
        "58", "F0",
    ]

    /// `detail` with the values in it redacted: a known shape keeps its words and column names; otherwise the
    /// whole text, unless `sqlState`'s class never puts values there.
    static func redactingValues(in detail: String, sqlState: SQLState?) -> String {
        if let redacted = self.redactingKnownShape(detail) { return redacted }
        if let sqlState, self.classesWithoutValuesInDetail.contains(sqlState.errorClass) { return detail }
        return self.redactedValue
    }

    /// The shapes of PostgreSQL's (English) details that quote values, with the values replaced; `nil` for any
    /// other text.
    private static func redactingKnownShape(_ detail: String) -> String? {
        let value = self.redactedValue
        // BuildIndexValueDescription and ri_ReportViolation: `Key (columns)=(values) …`.
        let keyPrefix = "Key ("
        if detail.hasPrefix(keyPrefix) {
            let afterPrefix = detail.dropFirst(keyPrefix.count)
            guard let equals = afterPrefix.firstRange(of: ")=(") else { return nil }
            let columns = afterPrefix[..<equals.lowerBound]
            let key = "Key (\(columns))=(\(value))"
            // Exclusion constraints: the new key and the existing one, on the same columns.
            for phrase in ["conflicts with existing key", "conflicts with key"] where detail.contains(") \(phrase) (") {
                return "\(key) \(phrase) (\(columns))=(\(value))."
            }
            for ending in [") already exists.", ") is duplicated."] where detail.hasSuffix(ending) {
                return key + ending.dropFirst()
            }
            // The table named at the end comes after the values: the last occurrence of its words is its.
            for words in [") is not present in table \"", ") is still referenced from table \""] {
                guard detail.hasSuffix("\"."), let range = detail.ranges(of: words).last else { continue }
                let tableEnd = detail.index(detail.endIndex, offsetBy: -2)
                guard range.upperBound <= tableEnd else { continue }
                return key + words.dropFirst() + detail[range.upperBound..<tableEnd] + "\"."
            }
            return "\(key) \(value)"
        }
        // ExecBuildSlotValueDescription: the values of a row that a NOT NULL, CHECK or partition constraint refused.
        if detail.hasPrefix("Failing row contains (") { return "Failing row contains (\(value))." }
        let partitionPrefix = "Partition key of the failing row contains ("
        if detail.hasPrefix(partitionPrefix) {
            let afterPrefix = detail.dropFirst(partitionPrefix.count)
            guard let equals = afterPrefix.firstRange(of: ") = (") else { return "\(partitionPrefix)\(value))." }
            return "\(partitionPrefix)\(afterPrefix[..<equals.lowerBound])) = (\(value))."
        }
        // The JSON parser: the token it could not read.
        if detail.hasPrefix("Token \""), detail.hasSuffix("\" is invalid.") { return "Token \"\(value)\" is invalid." }
        // A foreign key whose columns the role may not read: no values.
        if detail.hasPrefix("Key is not present in table \"") || detail.hasPrefix("Key is still referenced from table \"") {
            return detail
        }
        return nil
    }
}
