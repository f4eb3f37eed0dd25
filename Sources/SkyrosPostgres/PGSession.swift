import CLibPQ
import Foundation

/// One libpq connection (`PGconn`) and what is kept per connection: opening it (the only
/// `PQconnectdbParams` call), its cache of named prepared statements, running a statement and reading its
/// results into ``PGRows``, and closing it (`PQfinish`, when the session is released).
///
/// ``PGConnection`` (the async front, on its own thread) and ``PGListener`` (on its thread) each own one.
/// Every call must come from the owning thread, so a session is not `Sendable`.
package final class PGSession {
    /// The libpq connection, finished when the session is released.
    let handle: OpaquePointer
    /// How this session's thread waits for replies (``PGConfiguration/busyPoll``).
    var replyWait: ReplyWait

    /// Which statements are prepared under a name, and what those names look like.
    struct StatementPolicy {
        /// The most statements prepared at once on this connection (0: none; every statement is sent unnamed).
        var limit: Int
        /// The names' prefix, followed by a number that is never reused on this connection.
        var prefix: String

        /// A ``PGConnection``'s statements (disable behind PgBouncer < 1.21 in transaction mode).
        static func connection(preparing: Bool) -> Self { Self(limit: preparing ? 1024 : 0, prefix: "skyros_") }
        /// A ``PGListener``'s reads: a few statements, run often.
        static let listener = Self(limit: 64, prefix: "skyros_listener_")
    }

    private struct PreparedStatement {
        let name: String
        let types: [Oid]
    }
    private let policy: StatementPolicy
    /// Statement text → its prepared statement on this connection.
    private var statements: [String: PreparedStatement] = [:]
    /// Statements forgotten while a transaction was open, still allocated on the server.
    private var staleStatements: [String] = []
    private var statementCounter = 0
    /// Pipelined statements with more parameters than this (large multi-row inserts) are not prepared.
    static let pipelinePreparedBindLimit = 1024

    /// Set (on the connection's thread, from libpq's notice receiver) when the server sent a `FATAL` or `PANIC`
    /// outside a statement: libpq hands such an error to the notice receiver while the connection is idle, and
    /// the server closes the connection right after it. Until libpq reads that close, the connection still looks
    /// open; this flag makes it unhealthy at once.
    final class Farewell {
        var received = false
    }
    private let farewell: Farewell

    private init(handle: OpaquePointer, configuration: PGConfiguration, policy: StatementPolicy, farewell: Farewell) {
        self.handle = handle
        self.replyWait = ReplyWait(busyPoll: configuration.busyPoll)
        self.policy = policy
        self.farewell = farewell
    }

    // The connection goes first: libpq's notice receiver points at `farewell`, released after this.
    deinit { PQfinish(self.handle) }

    /// Opens a connection with the configuration's libpq options (and ``PGConfiguration/connectTimeout``
    /// as `connect_timeout` when they set none), and sets its session time zone
    /// (``PGConfiguration/sessionTimeZone``). Server notices are dropped.
    /// - Throws: ``PGError`` of kind `.connectionFailed` (with SQLSTATE 57P03 or 53300 when the server
    ///   said it is starting up or has no free connection slot), `.authenticationFailed`, `.databaseNotFound`,
    ///   or `.invalidConfiguration` when the time zone is refused. libpq's message is kept whole: it never
    ///   contains the password.
    static func open(_ configuration: PGConfiguration, statements policy: StatementPolicy) throws -> PGSession {
        let options = configuration.connectOptions
        let keywords = options.map { strdup($0.keyword) }
        let values = options.map { strdup($0.value) }
        defer {
            keywords.forEach { free($0) }
            values.forEach { free($0) }
        }
        var keywordPointers: [UnsafePointer<CChar>?] = keywords.map { UnsafePointer($0) } + [nil]
        var valuePointers: [UnsafePointer<CChar>?] = values.map { UnsafePointer($0) } + [nil]
        _ = OpenSSLExit.prepared
        let connection = PQconnectdbParams(&keywordPointers, &valuePointers, 0)
        guard let connection, PQstatus(connection) == CONNECTION_OK else {
            let message = connection.flatMap { PQerrorMessage($0) }.map { String(cString: $0) } ?? "out of memory"
            if let connection { PQfinish(connection) }
            throw Self.connectError(message.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        // Notices are dropped, except a FATAL or PANIC the server sent outside a statement (see ``Farewell``).
        let farewell = Farewell()
        PQsetNoticeReceiver(
            connection,
            { argument, result in
                guard let argument, let result, let severity = PQresultErrorField(result, skyros_diag_severity_nonlocalized()) else {
                    return
                }
                let level = String(cString: severity)
                if level == "FATAL" || level == "PANIC" {
                    Unmanaged<Farewell>.fromOpaque(argument).takeUnretainedValue().received = true
                }
            }, Unmanaged.passUnretained(farewell).toOpaque())
        // From here on the session owns the connection: a failure below finishes it as the session goes.
        let session = PGSession(handle: connection, configuration: configuration, policy: policy, farewell: farewell)
        try LibPQ.setSessionTimeZone(configuration.sessionTimeZone, on: connection)
        return session
    }

    /// Classifies libpq's message for a connection that failed to open. A server's refusal at start-up
    /// carries no result, so its SQLSTATE is told from the message PostgreSQL sends (in English unless the
    /// server's `lc_messages` says otherwise).
    static func connectError(_ message: String) -> PGError {
        if message.contains("authentication failed") || message.contains("no password supplied")
            || message.contains("password is required")
        {
            return PGError(kind: .authenticationFailed, message: message)
        }
        if message.contains("does not exist") && message.contains("database") {
            return PGError(kind: .databaseNotFound, sqlState: .invalidCatalogName, message: message)
        }
        var sqlState: SQLState?
        if message.contains("the database system is ") {
            // Every 57P03 message: starting up, shutting down, in recovery mode, not (yet) accepting connections.
            sqlState = .cannotConnectNow
        } else if message.contains("too many clients already") || message.contains("remaining connection slots are reserved") {
            sqlState = .tooManyConnections
        }
        return PGError(kind: .connectionFailed, sqlState: sqlState, message: message)
    }

    // MARK: State

    /// Whether the connection is up as far as libpq knows (no round trip).
    var isConnected: Bool { PQstatus(self.handle) == CONNECTION_OK }
    /// Whether libpq found the connection broken.
    var isBroken: Bool { PQstatus(self.handle) == CONNECTION_BAD }
    /// Whether no transaction is open (nor failed, nor a statement running).
    var isIdle: Bool { PQtransactionStatus(self.handle) == PQTRANS_IDLE }
    /// Whether a transaction is open, or failed and not yet rolled back.
    var isInTransaction: Bool {
        let status = PQtransactionStatus(self.handle)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR
    }
    /// The backend process id.
    var backendPID: Int32 { PQbackendPID(self.handle) }
    /// The server's host, and the database, as libpq connected to them.
    var host: String { String(cString: PQhost(self.handle)) }
    var database: String { String(cString: PQdb(self.handle)) }

    /// Whether the connection is open and idle, reading first what the server sent while it was idle (a
    /// FATAL on server shutdown, then EOF), so a connection the server dropped is noticed without a statement.
    func isHealthy() -> Bool {
        guard self.isConnected else { return false }
        var reads = 0
        while reads < 8, LibPQ.wait(self.handle, read: true, write: false, timeoutMilliseconds: 0) {
            if PQconsumeInput(self.handle) == 0 { return false }
            while let notify = PQnotifies(self.handle) { PQfreemem(notify) }
            reads += 1
        }
        return self.isConnected && self.isIdle && !self.farewell.received
    }

    /// The libpq options this connection was opened with (`PQconninfo`), passwords left out.
    var connectionOptions: [String: String] {
        guard let options = PQconninfo(self.handle) else { return [:] }
        defer { PQconninfoFree(options) }
        var result: [String: String] = [:]
        var cursor = options
        while let keyword = cursor.pointee.keyword {
            let name = String(cString: keyword)
            if let value = cursor.pointee.val, !PGConfiguration.isSecret(name) { result[name] = String(cString: value) }
            cursor += 1
        }
        return result
    }

    // MARK: Statements

    /// Runs one statement with bound parameters and returns its rows. A statement with parameters is prepared
    /// once (within the ``StatementPolicy``) and reused; one that a migration outdated (SQLSTATE 0A000) or that
    /// is gone (26000) is prepared again and run once more when no transaction is open.
    func run(_ query: PGQuery) throws -> PGRows {
        if let encodingError = query.encodingError { throw PGError(kind: .encoding, message: encodingError) }
        let connection = self.handle
        self.deallocateStaleStatements()
        return try LibPQ.withParameters(query.binds) { count, types, values in
            guard !query.binds.isEmpty, let name = try self.preparedStatement(for: query, types: types, count: count) else {
                return try self.exec { PQsendQueryParams(connection, query.sql, count, types, values, nil, nil, 0) }
            }
            do {
                return try self.exec { PQsendQueryPrepared(connection, name, count, values, nil, nil, 0) }
            } catch let error as PGError
                where error.sqlState == .featureNotSupported || error.sqlState == .invalidSQLStatementName
            {
                // "cached plan must not change result type" (0A000): the statement's table changed since it was
                // prepared (`ALTER TABLE … TYPE`, a table dropped and created again by a migration), and the
                // statement now fails for good on this connection. Or it is gone (26000: `DEALLOCATE ALL`,
                // `DISCARD ALL`). Forget it; outside a transaction the failed statement did nothing, so prepare it
                // again and run it once more. In a transaction the error stands (the transaction is aborted), and
                // the next use prepares it again.
                self.forgetPrepared(query.sql, name: name, allocated: error.sqlState != .invalidSQLStatementName)
                guard self.isIdle, let again = try self.preparedStatement(for: query, types: types, count: count)
                else { throw error }
                return try self.exec { PQsendQueryPrepared(connection, again, count, values, nil, nil, 0) }
            }
        }
    }

    /// Runs statements sent as one text (simple query protocol, no parameters) and returns the last one's
    /// rows.
    /// - Throws: the first failing statement's ``PGError``, once all have been read.
    func execute(script sql: String) throws -> PGRows {
        guard PQsendQuery(self.handle, sql) == 1, LibPQ.flush(self.handle) else {
            throw LibPQ.error(result: nil, connection: self.handle)
        }
        var last: PGRows?
        var failure: PGError?
        while let result = self.replyWait.nextResult(on: self.handle) {
            do {
                last = try LibPQ.consume(result, connection: self.handle)
            } catch let error as PGError {
                if failure == nil { failure = error }
            }
        }
        if let failure { throw failure }
        return last ?? PGRows(columns: [], commandTag: "", affectedRows: 0, storage: [], cells: [], rowCount: 0)
    }

    /// Sends one statement text (simple query protocol) and returns its last result, as `PQexec` does.
    func execute(_ sql: String) throws -> PGRows {
        try self.exec { PQsendQuery(self.handle, sql) }
    }

    /// Sends one statement with `send` and returns its result, as `PQexec` does, but waiting for the reply
    /// with ``ReplyWait`` (busy polling first) instead of libpq's sleeping wait.
    private func exec(_ send: () -> Int32) throws -> PGRows {
        guard send() == 1, LibPQ.flush(self.handle) else {
            throw LibPQ.error(result: nil, connection: self.handle)
        }
        return try LibPQ.consume(self.replyWait.lastResult(on: self.handle), connection: self.handle)
    }

    // MARK: Prepared statements

    /// The cached prepared statement for `query`, prepared now if new; `nil` (send it unnamed) when the cache
    /// is full or the text is cached with other parameter types, so the server never accumulates statements.
    private func preparedStatement(for query: PGQuery, types: UnsafePointer<Oid>?, count: Int32) throws -> String? {
        if let cached = self.statements[query.sql] {
            let same = cached.types.count == Int(count) && cached.types.indices.allSatisfy { cached.types[$0] == types![$0] }
            return same ? cached.name : nil
        }
        guard self.statements.count < self.policy.limit else { return nil }
        let name = self.nextStatementName()
        _ = try LibPQ.consume(PQprepare(self.handle, name, query.sql, count, types), connection: self.handle)
        self.statements[query.sql] = PreparedStatement(name: name, types: (0..<Int(count)).map { types![$0] })
        return name
    }

    private func nextStatementName() -> String {
        self.statementCounter += 1
        return "\(self.policy.prefix)\(self.statementCounter)"
    }

    /// Drops a cached statement that no longer works, and deallocates it on the server (unless it is no longer
    /// `allocated` there): at once when no transaction is open, otherwise before this connection's next
    /// statement outside a transaction (an aborted transaction refuses `DEALLOCATE`). Its name is never reused.
    func forgetPrepared(_ sql: String, name: String? = nil, allocated: Bool = true) {
        guard let name = name ?? self.statements[sql]?.name else { return }
        self.statements[sql] = nil
        guard allocated else { return }
        if self.isIdle {
            PQclear(PQexec(self.handle, "DEALLOCATE \(name)"))
        } else {
            self.staleStatements.append(name)
        }
    }

    /// Deallocates the statements ``forgetPrepared(_:name:allocated:)`` could not, once no transaction is open
    /// (before a statement is sent).
    func deallocateStaleStatements() {
        guard !self.staleStatements.isEmpty, self.isIdle else { return }
        for name in self.staleStatements { PQclear(PQexec(self.handle, "DEALLOCATE \(name)")) }
        self.staleStatements.removeAll()
    }

    /// How each statement of a pipeline is sent: statements with parameters use the prepared statements, and
    /// new ones are prepared inside the same pipeline (so a repeated group commit parses nothing); the others,
    /// and any when the cache is full or disabled, go unnamed.
    func pipelineSteps(for queries: [PGQuery]) -> [PipelineStep] {
        guard self.policy.limit > 0 else { return Array(repeating: .unnamed, count: queries.count) }
        var new: [String: PreparedStatement] = [:]
        return queries.map { query -> PipelineStep in
            if query.binds.isEmpty || query.binds.count > Self.pipelinePreparedBindLimit { return .unnamed }
            let types = query.binds.map(\.type.rawValue)
            if let known = self.statements[query.sql] ?? new[query.sql] {
                return known.types == types ? .prepared(known.name) : .unnamed
            }
            guard self.statements.count + new.count < self.policy.limit else { return .unnamed }
            let name = self.nextStatementName()
            new[query.sql] = PreparedStatement(name: name, types: types)
            return .prepare(name)
        }
    }

    /// Records a statement that a pipeline prepared (its `Prepare` succeeded).
    func registerPrepared(_ query: PGQuery, name: String) {
        self.statements[query.sql] = PreparedStatement(name: name, types: query.binds.map(\.type.rawValue))
    }

    // MARK: Notifications

    /// Waits up to `timeoutMilliseconds` for the server to send something; `true` when it did.
    func waitForInput(timeoutMilliseconds: Int32) -> Bool {
        LibPQ.wait(self.handle, read: true, write: false, timeoutMilliseconds: timeoutMilliseconds)
    }

    /// Reads what the server sent; `false` when the connection failed.
    func consumeInput() -> Bool {
        PQconsumeInput(self.handle) != 0 && self.isConnected
    }

    /// The notifications read so far, in the order the server sent them.
    func notifications() -> [PGNotification] {
        var received: [PGNotification] = []
        while let notify = PQnotifies(self.handle) {
            received.append(PGNotification(
                channel: String(cString: notify.pointee.relname),
                payload: String(cString: notify.pointee.extra),
                senderPID: notify.pointee.be_pid))
            PQfreemem(notify)
        }
        return received
    }

    /// Sends an empty statement and waits up to `timeout` for its reply (notifications that arrive meanwhile
    /// stay queued in libpq). `false` when none came, or the connection failed.
    func answers(within timeout: Duration) -> Bool {
        let connection = self.handle
        guard PQsendQuery(connection, "") == 1, LibPQ.flush(connection) else { return false }
        let deadline = ContinuousClock.now + timeout
        while true {
            while PQisBusy(connection) == 0 {
                guard let result = PQgetResult(connection) else { return self.isConnected }
                PQclear(result)
            }
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { return false }
            let milliseconds = remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000 + 1
            LibPQ.wait(connection, read: true, write: false, timeoutMilliseconds: Int32(clamping: milliseconds))
            if PQconsumeInput(connection) == 0 { return false }
        }
    }
}

@available(*, unavailable)
extension PGSession: Sendable {}
