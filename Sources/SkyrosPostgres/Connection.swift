import CLibPQ
import Foundation
import Logging

/// Transaction isolation levels for ``Connection/withTransaction(isolation:_:)`` and the pool.
public enum IsolationLevel: String, Sendable, Hashable {
    case readCommitted = "READ COMMITTED"
    case repeatableRead = "REPEATABLE READ"
    case serializable = "SERIALIZABLE"
}

/// One PostgreSQL connection: a libpq `PGconn` confined to its own dedicated thread.
///
/// Every method is `async` and runs on the connection's thread, so blocking libpq calls never occupy
/// Swift's cooperative pool. Statements with parameters are prepared once per connection and reused
/// (prepared again when a migration outdated them, or `DEALLOCATE ALL`/`DISCARD ALL` removed them).
/// Cancelling the calling task cancels the running statement (`PQcancel`); the connection stays usable.
///
/// ```swift
/// let connection = try await Connection.connect(to: PostgresConfiguration(url: url), logger: logger)
/// let rows = try await connection.query("SELECT name FROM users WHERE id = \(42)")
/// let name = try rows.first?.decode(String.self, at: 0)
/// await connection.close()
/// ```
///
/// ## Topics
/// - ``query(_:)``
/// - ``execute(script:)``
/// - ``pipeline(_:)``
/// - ``copyFrom(table:columns:rows:)``
/// - ``withTransaction(isolation:_:)``
/// - ``rollback()``
public actor Connection {
    private let executor: ThreadExecutor
    public nonisolated var unownedExecutor: UnownedSerialExecutor { self.executor.asUnownedSerialExecutor() }
    /// The connection's thread, as a task executor (a task started on it runs there from its first step).
    package nonisolated var taskExecutor: any TaskExecutor { self.executor }

    /// A process-unique number for logs.
    public nonisolated let id: Int
    public nonisolated let configuration: PostgresConfiguration
    let logger: Logger
    private let secrets: [String]
    private let owned = ConnectionHandle()
    private var handle: OpaquePointer? {
        get { self.owned.pointer }
        set { self.owned.pointer = newValue }
    }
    private var canceller: QueryCanceller?
    /// How this connection's thread waits for replies (``PostgresConfiguration/busyPoll``).
    var replyWait: ReplyWait
    private struct PreparedStatement {
        let name: String
        let types: [Oid]
    }
    private var statements: [String: PreparedStatement] = [:]
    /// Statements forgotten while a transaction was open, still allocated on the server.
    private var staleStatements: [String] = []
    private var statementCounter = 0
    /// Whether named prepared statements are used (disable behind PgBouncer < 1.21 in transaction mode).
    private let usePreparedStatements: Bool
    static let statementCacheLimit = 1024
    /// Pipelined statements with more parameters than this (large multi-row inserts) are not prepared.
    static let pipelinePreparedBindLimit = 1024

    private static let counter = IDCounter()

    private init(configuration: PostgresConfiguration, logger: Logger, usePreparedStatements: Bool) {
        self.id = Self.counter.next()
        self.executor = ThreadExecutor(name: "skyros-pg-\(self.id)")
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: PostgresLogKey.connectionID] = "\(self.id)"
        self.logger = logger
        self.secrets = configuration.secrets
        self.usePreparedStatements = usePreparedStatements
        self.replyWait = ReplyWait(busyPoll: configuration.busyPoll)
    }

    /// Opens a connection.
    /// - Parameters:
    ///   - configuration: where and how to connect; any libpq option.
    ///   - logger: receives connection events at debug level; the password is never logged.
    ///   - usePreparedStatements: cache named prepared statements (default `true`).
    /// - Throws: ``PostgresError`` of kind `.connectionFailed`, `.authenticationFailed`, `.databaseNotFound`
    ///   or `.invalidConfiguration`. The password never appears in it.
    public static func connect(
        to configuration: PostgresConfiguration,
        logger: Logger = Logger(label: "skyros.postgres", factory: { _ in SwiftLogNoOpLogHandler() }),
        usePreparedStatements: Bool = true
    ) async throws -> Connection {
        let connection = Connection(
            configuration: configuration, logger: logger, usePreparedStatements: usePreparedStatements)
        try await connection.open()
        return connection
    }

    private func open() throws {
        let keywords = self.configuration.options.map { strdup($0.keyword) }
        let values = self.configuration.options.map { strdup($0.value) }
        defer {
            keywords.forEach { free($0) }
            values.forEach { free($0) }
        }
        var keywordPointers: [UnsafePointer<CChar>?] = keywords.map { UnsafePointer($0) } + [nil]
        var valuePointers: [UnsafePointer<CChar>?] = values.map { UnsafePointer($0) } + [nil]
        let connection = PQconnectdbParams(&keywordPointers, &valuePointers, 0)
        guard let connection, PQstatus(connection) == CONNECTION_OK else {
            var message = connection.flatMap { PQerrorMessage($0) }.map { String(cString: $0) } ?? "out of memory"
            message = PostgresConfiguration.redact(
                message.trimmingCharacters(in: .whitespacesAndNewlines), secrets: self.secrets)
            if let connection { PQfinish(connection) }
            let kind: PostgresError.Kind
            if message.contains("authentication failed") || message.contains("no password supplied")
                || message.contains("password is required")
            {
                kind = .authenticationFailed
            } else if message.contains("does not exist") && message.contains("database") {
                kind = .databaseNotFound
            } else {
                kind = .connectionFailed
            }
            self.logger.debug("connect failed", metadata: ["skyros.error": "\(message)"])
            self.executor.shutdown()
            throw PostgresError(kind: kind, message: message)
        }
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        do {
            try LibPQ.setSessionTimeZone(self.configuration.sessionTimeZone, on: connection, secrets: self.secrets)
        } catch {
            PQfinish(connection)
            self.logger.debug("connect failed", metadata: [PostgresLogKey.error: "\(error)"])
            self.executor.shutdown()
            throw error
        }
        self.handle = connection
        self.canceller = QueryCanceller(connection: connection)
        self.logger.debug(
            "connected",
            metadata: [
                // Redacted: a password that was not percent-encoded may have been split into these.
                PostgresLogKey.host: "\(PostgresConfiguration.redact(String(cString: PQhost(connection)), secrets: self.secrets))",
                PostgresLogKey.database: "\(PostgresConfiguration.redact(String(cString: PQdb(connection)), secrets: self.secrets))",
            ])
    }

    /// Whether the connection is open and healthy as far as can be told without a round trip.
    ///
    /// Reads anything the server sent while idle (for example a FATAL on server shutdown), so a connection
    /// that the server dropped is detected without running a statement.
    public func isHealthy() -> Bool {
        guard let handle, PQstatus(handle) == CONNECTION_OK else { return false }
        // Data on an idle connection is a notice, a notification, or the server's goodbye (FATAL, then EOF):
        // consume until the socket is quiet so a closed peer is noticed.
        var reads = 0
        while reads < 8, LibPQ.wait(handle, read: true, write: false, timeoutMilliseconds: 0) {
            if PQconsumeInput(handle) == 0 { return false }
            while let notify = PQnotifies(handle) { PQfreemem(notify) }
            reads += 1
        }
        return PQstatus(handle) == CONNECTION_OK && PQtransactionStatus(handle) == PQTRANS_IDLE
    }

    /// Whether a transaction is open (or failed) on this connection.
    public var isInTransaction: Bool {
        guard let handle else { return false }
        let status = PQtransactionStatus(handle)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR
    }

    /// Whether ``close()`` was called or the server dropped the connection.
    public var isClosed: Bool {
        guard let handle else { return true }
        return PQstatus(handle) == CONNECTION_BAD
    }

    /// The backend process id (for `pg_cancel_backend`/`pg_terminate_backend`).
    public var backendPID: Int32 {
        guard let handle else { return 0 }
        return PQbackendPID(handle)
    }

    private func connection() throws -> OpaquePointer {
        guard let handle else { throw PostgresError(kind: .connectionClosed, message: "the connection is closed") }
        return handle
    }

    /// Runs one statement with bound parameters and returns its rows.
    ///
    /// ```swift
    /// let rows = try await connection.query("SELECT id FROM users WHERE email = \(email)")
    /// ```
    /// - Throws: ``PostgresError`` (server errors carry their SQLSTATE; `.encoding` for unsendable values;
    ///   `.queryCancelled` when the task was cancelled).
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        let connection = try self.connection()
        if let encodingError = query.encodingError {
            throw PostgresError(kind: .encoding, message: encodingError)
        }
        self.logger.debug("query", metadata: [PostgresLogKey.sql: "\(query.sql)"])
        return try await self.cancellable {
            try self.run(query, on: connection)
        }
    }

    /// Runs statements sent as one text (simple query protocol): several statements separated by `;`,
    /// no parameters. Used for migration scripts and DDL.
    ///
    /// ```swift
    /// try await connection.execute(script: "CREATE TABLE a (id int); CREATE TABLE b (id int);")
    /// ```
    @discardableResult
    public func execute(script sql: String) async throws -> PostgresRows {
        let connection = try self.connection()
        if sql.utf8.contains(0) {
            throw PostgresError(kind: .encoding, message: "statement text contains a NUL (0x00) character")
        }
        self.logger.debug("script", metadata: [PostgresLogKey.sql: "\(sql)"])
        return try await self.cancellable {
            var last: PostgresRows?
            var failure: PostgresError?
            guard PQsendQuery(connection, sql) == 1, LibPQ.flush(connection) else {
                throw LibPQ.error(result: nil, connection: connection, secrets: self.secrets)
            }
            while let result = self.replyWait.nextResult(on: connection) {
                do {
                    let rows = try LibPQ.consume(result, connection: connection)
                    last = rows
                } catch let error as PostgresError {
                    if failure == nil { failure = error }
                }
            }
            if let failure { throw failure }
            return last ?? PostgresRows(columns: [], commandTag: "", affectedRows: 0, storage: [], cells: [], rowCount: 0)
        }
    }

    private func run(_ query: PostgresQuery, on connection: OpaquePointer) throws -> PostgresRows {
        self.deallocateStaleStatements(on: connection)
        return try LibPQ.withParameters(query.binds) { count, types, values in
            if !self.usePreparedStatements || query.binds.isEmpty {
                return try self.exec(on: connection) {
                    PQsendQueryParams(connection, query.sql, count, types, values, nil, nil, 0)
                }
            }
            guard let name = try self.preparedStatement(for: query, types: types, count: count, on: connection) else {
                return try self.exec(on: connection) {
                    PQsendQueryParams(connection, query.sql, count, types, values, nil, nil, 0)
                }
            }
            do {
                return try self.exec(on: connection) { PQsendQueryPrepared(connection, name, count, values, nil, nil, 0) }
            } catch let error as PostgresError
                where error.sqlState == .featureNotSupported || error.sqlState == .invalidSQLStatementName
            {
                // "cached plan must not change result type" (0A000): the statement's table changed since it was
                // prepared (`ALTER TABLE … TYPE`, a table dropped and created again by a migration), and the
                // statement now fails for good on this connection. Or it is gone (26000: `DEALLOCATE ALL`,
                // `DISCARD ALL`). Forget it; outside a transaction the failed statement did nothing, so prepare it
                // again and run it once more. In a transaction the error stands (the transaction is aborted), and
                // the next use prepares it again.
                self.forgetPrepared(
                    query.sql, name: name, on: connection, allocated: error.sqlState != .invalidSQLStatementName)
                guard PQtransactionStatus(connection) == PQTRANS_IDLE,
                    let again = try self.preparedStatement(for: query, types: types, count: count, on: connection)
                else { throw error }
                return try self.exec(on: connection) { PQsendQueryPrepared(connection, again, count, values, nil, nil, 0) }
            }
        }
    }

    /// Drops a cached statement that no longer works, and deallocates it on the server (unless it is no longer
    /// `allocated` there): at once when `connection` is given and has no transaction open, otherwise before this
    /// connection's next statement outside a transaction (an aborted transaction refuses `DEALLOCATE`). Its name
    /// is never reused.
    func forgetPrepared(_ sql: String, name: String? = nil, on connection: OpaquePointer? = nil, allocated: Bool = true) {
        guard let name = name ?? self.statements[sql]?.name else { return }
        self.statements[sql] = nil
        guard allocated else { return }
        if let connection, PQtransactionStatus(connection) == PQTRANS_IDLE {
            PQclear(PQexec(connection, "DEALLOCATE \(name)"))
        } else {
            self.staleStatements.append(name)
        }
    }

    /// Deallocates the statements ``forgetPrepared(_:name:on:)`` could not, once `connection` has no transaction
    /// open (on the connection's thread, before a statement is sent).
    func deallocateStaleStatements(on connection: OpaquePointer) {
        guard !self.staleStatements.isEmpty, PQtransactionStatus(connection) == PQTRANS_IDLE else { return }
        for name in self.staleStatements { PQclear(PQexec(connection, "DEALLOCATE \(name)")) }
        self.staleStatements.removeAll()
    }

    /// Sends one statement with `send` and returns its result, as `PQexec` does, but waiting for the reply
    /// with ``ReplyWait`` (busy polling first) instead of libpq's sleeping wait.
    private func exec(on connection: OpaquePointer, _ send: () -> Int32) throws -> PostgresRows {
        guard send() == 1, LibPQ.flush(connection) else {
            throw LibPQ.error(result: nil, connection: connection, secrets: self.secrets)
        }
        return try LibPQ.consume(self.replyWait.lastResult(on: connection), connection: connection)
    }

    /// The cached prepared statement for `query`, prepared now if new; `nil` (send it unnamed) when the cache
    /// is full or the text is cached with other parameter types, so the server never accumulates statements.
    private func preparedStatement(
        for query: PostgresQuery, types: UnsafePointer<Oid>?, count: Int32, on connection: OpaquePointer
    ) throws -> String? {
        if let cached = self.statements[query.sql] {
            let same = cached.types.count == Int(count) && cached.types.indices.allSatisfy { cached.types[$0] == types![$0] }
            return same ? cached.name : nil
        }
        guard self.statements.count < Self.statementCacheLimit else { return nil }
        let name = self.nextStatementName()
        _ = try LibPQ.consume(PQprepare(connection, name, query.sql, count, types), connection: connection)
        self.statements[query.sql] = PreparedStatement(name: name, types: (0..<Int(count)).map { types![$0] })
        return name
    }

    private func nextStatementName() -> String {
        self.statementCounter += 1
        return "skyros_\(self.statementCounter)"
    }

    /// How each statement of a pipeline is sent: statements with parameters use the connection's prepared
    /// statements, and new ones are prepared inside the same pipeline (so a repeated group commit parses
    /// nothing); the others, and any when the cache is full or disabled, go unnamed.
    func pipelineSteps(for queries: [PostgresQuery]) -> [PipelineStep] {
        guard self.usePreparedStatements else { return Array(repeating: .unnamed, count: queries.count) }
        var new: [String: PreparedStatement] = [:]
        return queries.map { query -> PipelineStep in
            if query.binds.isEmpty || query.binds.count > Self.pipelinePreparedBindLimit { return .unnamed }
            let types = query.binds.map(\.type.rawValue)
            if let known = self.statements[query.sql] ?? new[query.sql] {
                return known.types == types ? .prepared(known.name) : .unnamed
            }
            guard self.statements.count + new.count < Self.statementCacheLimit else { return .unnamed }
            let name = self.nextStatementName()
            new[query.sql] = PreparedStatement(name: name, types: types)
            return .prepare(name)
        }
    }

    /// Records a statement that a pipeline prepared (its `Prepare` succeeded).
    func registerPrepared(_ query: PostgresQuery, name: String) {
        self.statements[query.sql] = PreparedStatement(name: name, types: query.binds.map(\.type.rawValue))
    }

    /// Runs `body` so that cancelling the current task sends `PQcancel` for the running statement.
    private func cancellable<R>(_ body: () throws -> R) async throws -> R {
        guard let canceller = self.canceller else {
            throw PostgresError(kind: .connectionClosed, message: "the connection is closed")
        }
        canceller.begin()
        defer { canceller.end() }
        return try await withTaskCancellationHandler {
            // The closure must capture the isolated `self` to be isolated to this actor; otherwise it would
            // run on the global pool and block it (checked by a test).
            try self.runUnlessCancelled(body)
        } onCancel: {
            canceller.cancel()
        }
    }

    private func runUnlessCancelled<R>(_ body: () throws -> R) throws -> R {
        if Task.isCancelled {
            throw PostgresError(kind: .queryCancelled, message: "the task was cancelled before the statement ran")
        }
        return try body()
    }

    /// Runs `body` inside `BEGIN … COMMIT`; rolls back if it throws, also when the task was cancelled (the
    /// `ROLLBACK` is sent all the same, see ``rollback()``).
    ///
    /// ```swift
    /// try await connection.withTransaction(isolation: .serializable) { connection in
    ///     try await connection.query("UPDATE accounts SET balance = balance - \(amount) WHERE id = \(from)")
    /// }
    /// ```
    /// - Throws: the error thrown by `body` (after ROLLBACK), or the COMMIT's error.
    @discardableResult
    public nonisolated func withTransaction<R>(
        isolation: IsolationLevel? = nil,
        _ body: (Connection) async throws -> R
    ) async throws -> R {
        if let isolation {
            try await self.execute(script: "BEGIN ISOLATION LEVEL \(isolation.rawValue)")
        } else {
            try await self.execute(script: "BEGIN")
        }
        do {
            let value = try await body(self)
            try await self.execute(script: "COMMIT")
            return value
        } catch {
            // Not `execute(script:)`: in a cancelled task it would throw before sending anything, leaving the
            // transaction open on the connection for its next user.
            _ = try? await self.rollback()
            throw error
        }
    }

    /// Ends the open transaction with `ROLLBACK`; does nothing when none is open.
    ///
    /// Cleanup must not be skipped, so unlike ``execute(script:)`` this runs even when the calling task is
    /// cancelled, and cancelling the task does not cancel it. ``withTransaction(isolation:_:)`` and
    /// ``ConnectionPool/release(_:)`` use it; use it after your own `BEGIN`:
    ///
    /// ```swift
    /// try await connection.execute(script: "BEGIN")
    /// do {
    ///     try await connection.query("INSERT INTO audit (event) VALUES (\(event))")
    ///     try await connection.execute(script: "COMMIT")
    /// } catch {
    ///     try? await connection.rollback()   // runs even if the task was cancelled
    ///     throw error
    /// }
    /// ```
    /// - Throws: ``PostgresError``: `.connectionClosed` after ``close()``, `.connectionLost` when the connection
    ///   broke, or the server's error.
    public func rollback() throws {
        let connection = try self.connection()
        guard PQtransactionStatus(connection) != PQTRANS_IDLE else { return }
        self.logger.debug("script", metadata: [PostgresLogKey.sql: "ROLLBACK"])
        _ = try self.exec(on: connection) { PQsendQuery(connection, "ROLLBACK") }
    }

    /// Runs a statement that undoes session state (releases an advisory lock, resets a setting) even when the
    /// calling task is cancelled, and without cancelling it: like ``rollback()``, cleanup must not be skipped.
    /// The migrator releases its lock this way.
    package func cleanUp(_ query: PostgresQuery) throws -> PostgresRows {
        let connection = try self.connection()
        if let encodingError = query.encodingError { throw PostgresError(kind: .encoding, message: encodingError) }
        self.logger.debug("query", metadata: [PostgresLogKey.sql: "\(query.sql)"])
        return try self.run(query, on: connection)
    }

    /// Makes a connection that its user is done with ready for the next one: a transaction left open is
    /// rolled back (even in a cancelled task, see ``rollback()``). `false` when the connection must not be
    /// reused: closed, broken, or still not idle (the rollback failed, or a statement is still running).
    package func prepareForReuse() -> Bool {
        guard let handle, PQstatus(handle) == CONNECTION_OK else { return false }
        if PQtransactionStatus(handle) != PQTRANS_IDLE {
            do {
                try self.rollback()
            } catch {
                self.logger.debug(
                    "could not roll back a transaction left open", metadata: [PostgresLogKey.error: "\(error)"])
            }
        }
        return PQstatus(handle) == CONNECTION_OK && PQtransactionStatus(handle) == PQTRANS_IDLE
    }

    /// Runs `body` with this connection's thread as the task's preferred executor, so a sequence of
    /// statements and the code between them run on one thread without hopping between threads.
    ///
    /// ``ConnectionPool/withConnection(_:)`` does this for you. The thread is dedicated to this connection,
    /// so blocking work inside `body` never stalls Swift's cooperative pool (it only delays this connection).
    ///
    /// ```swift
    /// let total = try await connection.withOwnExecutor {
    ///     var sum = 0
    ///     for id in ids { sum += try await connection.query("SELECT n FROM t WHERE id = \(id)")[0].decode(Int.self, at: 0) }
    ///     return sum
    /// }
    /// ```
    public nonisolated func withOwnExecutor<R>(_ body: () async throws -> R) async rethrows -> R {
        try await withTaskExecutorPreference(self.executor, operation: body)
    }

    /// Closes the connection and stops its thread. Further calls throw `.connectionClosed` (``isClosed`` is `true`;
    /// calling `close()` again does nothing): each runs briefly on a thread of its own, never waits for the
    /// stopped one.
    public func close() {
        if self.handle != nil { self.logger.debug("closed") }
        self.owned.finish()
        self.canceller = nil
        self.executor.shutdown()
    }

    deinit {
        self.executor.shutdown()
    }

    // MARK: Internals shared with pipeline and COPY

    func withHandle<R>(_ body: (OpaquePointer) throws -> R) async throws -> R {
        let connection = try self.connection()
        return try await self.cancellable { try body(connection) }
    }

    var redactionSecrets: [String] { self.secrets }

    /// Whether the next reply will be busy-polled for first (for tests of ``PostgresConfiguration/busyPoll``).
    package var busyPollsNextReply: Bool { self.replyWait.pollsNext }
    /// How many connection threads may busy-poll at once, and the most that ever did (for tests).
    package static var busyPollers: (limit: Int, peak: Int) { (ReplyWait.maximumPollers, ReplyWait.peakConcurrentPollers) }

    /// Whether the connection's own thread has stopped (after ``close()``), asked without running on it (for
    /// tests of calls after `close()`).
    package nonisolated var threadHasExited: Bool { self.executor.hasExited }

    /// Whether this connection's libpq calls run on its own thread (for tests of the threading model).
    package func runsOnOwnThread() async throws -> Bool {
        let direct = self.executor.isCurrentThread
        let inCancellable = try await self.withHandle { _ in self.executor.isCurrentThread }
        return direct && inCancellable
    }
}

/// Metadata keys used in log records.
public enum PostgresLogKey {
    public static let connectionID = "skyros.connection.id"
    public static let sql = "skyros.sql"
    public static let host = "skyros.host"
    public static let database = "skyros.database"
    public static let error = "skyros.error"
    public static let pool = "skyros.pool"
}

final class IDCounter: Sendable {
    private let value = Locked(0)
    func next() -> Int { self.value.withLock { $0 += 1; return $0 } }
}

extension ReplyWait {
    /// The last result of the statement sent on `connection`, as `PQexec` returns it, waiting for each with
    /// ``awaitReply(_:)`` (busy polling first) instead of libpq's sleeping wait.
    mutating func lastResult(on connection: OpaquePointer) -> OpaquePointer? {
        var last: OpaquePointer?
        while let result = self.nextResult(on: connection) {
            if let last { PQclear(last) }
            last = result
            if PQstatus(connection) == CONNECTION_BAD { break }
        }
        return last
    }

    /// The next result of the running statement(s) once it arrives (``awaitReply(_:)``), or `nil` when they
    /// are done; a `COPY` started this way is ended first (``endCopy(_:on:)``).
    mutating func nextResult(on connection: OpaquePointer) -> OpaquePointer? {
        while true {
            _ = self.awaitReply(connection)
            guard let result = PQgetResult(connection) else { return nil }
            if !Self.endCopy(result, on: connection) { return result }
        }
    }

    /// A statement run as a query that starts a `COPY` (the COPY API is ``copyFrom(table:columns:rows:)``):
    /// ends it with an error (`COPY FROM STDIN`) or reads and drops its data (`COPY TO STDOUT`), so the
    /// statement finishes and the connection stays usable. Frees `result`; `true` when it was such a result.
    fileprivate static func endCopy(_ result: OpaquePointer, on connection: OpaquePointer) -> Bool {
        switch PQresultStatus(result) {
        case PGRES_COPY_IN, PGRES_COPY_BOTH:
            PQclear(result)
            _ = PQputCopyEnd(
                connection, "COPY FROM STDIN is not supported by query and execute(script:); use copyFrom(table:columns:rows:)")
            return true
        case PGRES_COPY_OUT:
            PQclear(result)
            var buffer: UnsafeMutablePointer<CChar>?
            while PQgetCopyData(connection, &buffer, 0) >= 0 {
                if let buffer { PQfreemem(buffer) }
                buffer = nil
            }
            return true
        default:
            return false
        }
    }
}
