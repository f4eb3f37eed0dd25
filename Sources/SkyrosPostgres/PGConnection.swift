import Foundation
import Logging
import Metrics
import Tracing

/// Transaction isolation levels for `PGConnection.withTransaction(isolation:_:)`, the pool's transactions and a
/// stack's interactive transactions (`DataStack.transaction(isolation:maxAttempts:_:)`).
public enum IsolationLevel: String, Sendable, Hashable {
    /// PostgreSQL's default: each statement sees what was committed before it began.
    case readCommitted = "READ COMMITTED"
    /// Every statement sees the snapshot taken at the transaction's first statement; a concurrent update of the same
    /// row fails with ``PGError/Kind/serializationFailure``.
    case repeatableRead = "REPEATABLE READ"
    /// As if the transactions ran one after another; conflicts fail with ``PGError/Kind/serializationFailure``, to
    /// be retried.
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
/// let connection = try await PGConnection.connect(to: PGConfiguration(url: url), logger: logger)
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
public actor PGConnection {
    private let executor: ThreadExecutor
    /// The connection's own thread: the actor runs there, so libpq's blocking calls never occupy Swift's cooperative
    /// pool.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { self.executor.asUnownedSerialExecutor() }
    /// The connection's thread, as a task executor (a task started on it runs there from its first step).
    package nonisolated var taskExecutor: any TaskExecutor { self.executor }

    /// A process-unique number for logs.
    public nonisolated let id: Int
    /// What this connection was opened with (its password never printed).
    public nonisolated let configuration: PGConfiguration
    let logger: Logger
    /// The libpq connection, confined to this actor's thread; `nil` before it opened and after ``close()``.
    private var session: PGSession?
    private var canceller: QueryCanceller?
    /// Whether named prepared statements are used (disable behind PgBouncer < 1.21 in transaction mode).
    private let usePreparedStatements: Bool
    /// What a statement's span names (database, server): read once from the configuration.
    package nonisolated let spanTarget: StatementSpanTarget
    /// Where statement durations are reported (`skyros.pg.statement`); `nil`: not timed (a connection opened
    /// outside a pool).
    private let metrics: MetricsScope?
    /// The statement timers made so far, by operation (a handful: one per first keyword seen).
    private var statementTimers: [String: Metrics.Timer] = [:]

    private static let counter = IDCounter()

    private init(configuration: PGConfiguration, logger: Logger, usePreparedStatements: Bool, metrics: MetricsScope? = nil) {
        self.id = Self.counter.next()
        self.executor = ThreadExecutor(name: "skyros-pg-\(self.id)")
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: PGLogKey.connectionID] = "\(self.id)"
        self.logger = logger
        self.usePreparedStatements = usePreparedStatements
        self.spanTarget = StatementSpanTarget(configuration)
        self.metrics = metrics
    }

    /// Opens a connection.
    /// - Parameters:
    ///   - configuration: where and how to connect; any libpq option.
    ///   - logger: receives connection events at debug level; the password is never logged.
    ///   - usePreparedStatements: cache named prepared statements (default `true`).
    /// - Throws: ``PGError`` of kind `.connectionFailed`, `.authenticationFailed`, `.databaseNotFound`
    ///   or `.invalidConfiguration`. The password never appears in it.
    public static func connect(
        to configuration: PGConfiguration,
        logger: Logger = Logger(label: "skyros.postgres", factory: { _ in SwiftLogNoOpLogHandler() }),
        usePreparedStatements: Bool = true
    ) async throws -> PGConnection {
        try await self.connect(to: configuration, logger: logger, usePreparedStatements: usePreparedStatements, metrics: nil)
    }

    /// ``connect(to:logger:usePreparedStatements:)`` for a pool: each statement's duration is reported to
    /// `metrics` (``PGConnectionPool``'s "Metrics").
    package static func connect(
        to configuration: PGConfiguration, logger: Logger, usePreparedStatements: Bool, metrics: MetricsScope?
    ) async throws -> PGConnection {
        let connection = PGConnection(
            configuration: configuration, logger: logger, usePreparedStatements: usePreparedStatements, metrics: metrics)
        try await connection.open()
        return connection
    }

    /// Runs `body` and, when the connection reports metrics, records its duration under `operation` (evaluated
    /// only then). Costs reading the operation, a clock read before and after and a dictionary lookup
    /// (Benchmarks/README.md, "Figures that used to live in code comments").
    func timed<R>(_ operation: @autoclosure () -> String, _ body: () async throws -> R) async rethrows -> R {
        guard let metrics = self.metrics else { return try await body() }
        let started = ContinuousClock.now
        defer {
            let (seconds, attoseconds) = (ContinuousClock.now - started).components
            let name = operation()
            let timer: Metrics.Timer
            if let known = self.statementTimers[name] {
                timer = known
            } else {
                timer = metrics.timer("skyros.pg.statement", [("operation", name)])
                self.statementTimers[name] = timer
            }
            timer.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        }
        return try await body()
    }

    private func open() throws {
        let session: PGSession
        do {
            session = try PGSession.open(self.configuration, statements: .connection(preparing: self.usePreparedStatements))
        } catch {
            let message = (error as? PGError)?.message ?? "\(error)"
            self.logger.debug("connect failed", metadata: [PGLogKey.error: "\(message)"])
            self.executor.shutdown()
            throw error
        }
        self.session = session
        self.canceller = QueryCanceller(connection: session.handle)
        self.logger.debug(
            "connected",
            metadata: [
                PGLogKey.host: "\(session.host)",
                PGLogKey.database: "\(session.database)",
            ])
    }

    /// Whether the connection is open and healthy as far as can be told without a round trip.
    ///
    /// Reads anything the server sent while idle (for example a FATAL on server shutdown), so a connection
    /// that the server dropped is detected without running a statement.
    public func isHealthy() -> Bool {
        self.session?.isHealthy() ?? false
    }

    /// Whether a transaction is open (or failed) on this connection.
    public var isInTransaction: Bool {
        self.session?.isInTransaction ?? false
    }

    /// Whether ``close()`` was called or the server dropped the connection.
    public var isClosed: Bool {
        self.session?.isBroken ?? true
    }

    /// The backend process id (for `pg_cancel_backend`/`pg_terminate_backend`).
    public var backendPID: Int32 {
        self.session?.backendPID ?? 0
    }

    /// The open session; `.connectionClosed` after ``close()``.
    func openSession() throws -> PGSession {
        guard let session else { throw PGError(kind: .connectionClosed, message: "the connection is closed") }
        return session
    }

    /// Runs one statement with bound parameters and returns its rows.
    ///
    /// ```swift
    /// let rows = try await connection.query("SELECT id FROM users WHERE email = \(email)")
    /// ```
    /// - Throws: ``PGError`` (server errors carry their SQLSTATE; `.encoding` for unsendable values;
    ///   `.queryCancelled` when the task was cancelled).
    @discardableResult
    public func query(_ query: PGQuery) async throws -> PGRows {
        let session = try self.openSession()
        if let encodingError = query.encodingError {
            throw PGError(kind: .encoding, message: encodingError)
        }
        self.logger.debug("query", metadata: [PGLogKey.sql: "\(query.sql)"])
        return try await self.timed(StatementSpanTarget.operationName(of: query.sql)) {
            try await self.spanTarget.trace(sql: query.sql) { try await self.cancellable { try session.run(query) } }
        }
    }

    /// Runs statements sent as one text (simple query protocol): several statements separated by `;`,
    /// no parameters. Used for migration scripts and DDL.
    ///
    /// ```swift
    /// try await connection.execute(script: "CREATE TABLE a (id int); CREATE TABLE b (id int);")
    /// ```
    @discardableResult
    public func execute(script sql: String) async throws -> PGRows {
        let session = try self.openSession()
        if sql.utf8.contains(0) {
            throw PGError(kind: .encoding, message: "statement text contains a NUL (0x00) character")
        }
        self.logger.debug("script", metadata: [PGLogKey.sql: "\(sql)"])
        return try await self.timed(StatementSpanTarget.operationName(of: sql)) {
            try await self.spanTarget.trace(sql: sql, text: false) {
                try await self.cancellable { try session.execute(script: sql) }
            }
        }
    }

    /// Runs `body` so that cancelling the current task sends `PQcancel` for the running statement.
    private func cancellable<R>(_ body: () throws -> R) async throws -> R {
        guard let canceller = self.canceller else {
            throw PGError(kind: .connectionClosed, message: "the connection is closed")
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
            throw PGError(kind: .queryCancelled, message: "the task was cancelled before the statement ran")
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
        _ body: (PGConnection) async throws -> R
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
    /// ``PGConnectionPool/release(_:)`` use it; use it after your own `BEGIN`:
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
    /// - Throws: ``PGError``: `.connectionClosed` after ``close()``, `.connectionLost` when the connection
    ///   broke, or the server's error.
    public func rollback() throws {
        let session = try self.openSession()
        guard !session.isIdle else { return }
        self.logger.debug("script", metadata: [PGLogKey.sql: "ROLLBACK"])
        _ = try session.execute("ROLLBACK")
    }

    /// Runs a statement that undoes session state (releases an advisory lock, resets a setting) even when the
    /// calling task is cancelled, and without cancelling it: like ``rollback()``, cleanup must not be skipped.
    /// The migrator releases its lock this way.
    package func cleanUp(_ query: PGQuery) throws -> PGRows {
        let session = try self.openSession()
        if let encodingError = query.encodingError { throw PGError(kind: .encoding, message: encodingError) }
        self.logger.debug("query", metadata: [PGLogKey.sql: "\(query.sql)"])
        return try session.run(query)
    }

    /// Makes a connection that its user is done with ready for the next one: a transaction left open is
    /// rolled back (even in a cancelled task, see ``rollback()``). `false` when the connection must not be
    /// reused: closed, broken, or still not idle (the rollback failed, or a statement is still running).
    package func prepareForReuse() -> Bool {
        guard let session, session.isConnected else { return false }
        if !session.isIdle {
            do {
                try self.rollback()
            } catch {
                self.logger.debug(
                    "could not roll back a transaction left open", metadata: [PGLogKey.error: "\(error)"])
            }
        }
        return session.isConnected && session.isIdle
    }

    /// Runs `body` with this connection's thread as the task's preferred executor, so a sequence of
    /// statements and the code between them run on one thread without hopping between threads.
    ///
    /// ``PGConnectionPool/withConnection(_:)`` does this for you. The thread is dedicated to this connection,
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
        if self.session != nil { self.logger.debug("closed") }
        // The last reference: the session finishes its connection as it goes.
        self.session = nil
        self.canceller = nil
        self.executor.shutdown()
    }

    deinit {
        self.executor.shutdown()
    }

    // MARK: Internals shared with pipeline and COPY

    /// Runs `body` with the connection's session, on its thread; cancelling the task cancels the statement.
    func withSession<R>(_ body: (PGSession) throws -> R) async throws -> R {
        let session = try self.openSession()
        return try await self.cancellable { try body(session) }
    }


    /// Whether the next reply will be busy-polled for first (for tests of ``PGConfiguration/busyPoll``).
    package var busyPollsNextReply: Bool { self.session?.replyWait.pollsNext ?? false }
    /// How many connection threads may busy-poll at once, and the most that ever did (for tests).
    package static var busyPollers: (limit: Int, peak: Int) { (ReplyWait.maximumPollers, ReplyWait.peakConcurrentPollers) }

    /// Whether the connection's own thread has stopped (after ``close()``), asked without running on it (for
    /// tests of calls after `close()`).
    package nonisolated var threadHasExited: Bool { self.executor.hasExited }

    /// Whether this connection's libpq calls run on its own thread (for tests of the threading model).
    package func runsOnOwnThread() async throws -> Bool {
        let direct = self.executor.isCurrentThread
        let inCancellable = try await self.withSession { _ in self.executor.isCurrentThread }
        return direct && inCancellable
    }
}

/// Metadata keys used in log records.
public enum PGLogKey {
    /// The connection's process-unique ``PGConnection/id``.
    public static let connectionID = "skyros.connection.id"
    /// A statement's text, with `$n` placeholders (bind values are never logged).
    public static let sql = "skyros.sql"
    /// The server's host.
    public static let host = "skyros.host"
    /// The database name.
    public static let database = "skyros.database"
    /// An error's ``PGError/description``.
    public static let error = "skyros.error"
    /// Which pool a connection belongs to.
    public static let pool = "skyros.pool"
}

final class IDCounter: Sendable {
    private let value = Locked(0)
    func next() -> Int { self.value.withLock { $0 += 1; return $0 } }
}
