import DequeModule
import Foundation
import Logging
import Metrics
import ServiceLifecycle

/// A pool of `PGConnection`s: the root writer's connections and every query's lease.
///
/// Leasing never hangs: when all connections are busy a caller waits at most ``Configuration/leaseTimeout``
/// and then gets ``PGError/Kind/poolTimeout``. An idle connection that the server dropped (restart,
/// `pg_terminate_backend`) is detected when leased and replaced transparently.
///
/// ```swift
/// let pool = PGConnectionPool(configuration: .init(maximumConnections: 8), postgres: config, logger: logger)
/// let count = try await pool.withConnection { try await $0.query("SELECT count(*) FROM users") }
/// try await pool.withTransaction(isolation: .serializable) { connection in … }
/// ```
///
/// `run()` (it is a `Service`) keeps `minimumConnections` open, closes idle connections and checks health;
/// leasing works without it.
///
/// ## Metrics
///
/// The pool reports to swift-metrics (the backend bootstrapped when it is created), each metric with the
/// `metricsDimensions` given at creation (a stack's pools carry `stack` and `pool`: `primary` or `replica`):
///
/// | metric | kind | meaning |
/// |---|---|---|
/// | `skyros.pool.leased` | gauge | connections leased now (in use) |
/// | `skyros.pool.idle` | gauge | open connections waiting in the pool |
/// | `skyros.pool.waiters` | gauge | callers waiting for a connection |
/// | `skyros.pool.lease_wait` | timer | from asking for a connection to having one (waiting, or opening one) |
/// | `skyros.pg.statement` | timer | one statement (or pipeline) on a pooled connection, dimension `operation`: its first keyword (`SELECT`, `INSERT`, …; `PIPELINE` for a pipeline) — never its text or values |
public final class PGConnectionPool: Service, Sendable {
    /// Pool sizing and timeouts.
    public struct Configuration: Sendable, Hashable {
        public var minimumConnections: Int
        public var maximumConnections: Int
        /// How long `withConnection` waits for a free connection before failing with `.poolTimeout`.
        public var leaseTimeout: Duration
        /// Idle connections above the minimum are closed after this long.
        public var idleTimeout: Duration
        /// Idle connections are checked this often by `run()`.
        public var healthCheckInterval: Duration
        /// Use cached named prepared statements (turn off behind PgBouncer < 1.21 in transaction mode).
        public var usePreparedStatements: Bool

        public init(
            minimumConnections: Int = 0, maximumConnections: Int = 8, leaseTimeout: Duration = .seconds(10),
            idleTimeout: Duration = .seconds(60), healthCheckInterval: Duration = .seconds(5),
            usePreparedStatements: Bool = true
        ) {
            precondition(maximumConnections >= 1 && minimumConnections <= maximumConnections)
            self.minimumConnections = minimumConnections
            self.maximumConnections = maximumConnections
            self.leaseTimeout = leaseTimeout
            self.idleTimeout = idleTimeout
            self.healthCheckInterval = healthCheckInterval
            self.usePreparedStatements = usePreparedStatements
        }
    }

    /// A snapshot of the pool's counters.
    public struct Statistics: Sendable, Hashable {
        public var inUse: Int
        public var idle: Int
        public var opening: Int
        public var waiting: Int
        public var opened: Int
        public var closed: Int
        public var leaseTimeouts: Int
    }

    private struct Idle {
        let connection: PGConnection
        /// When the connection became idle (for the idle timeout).
        let since: ContinuousClock.Instant
        /// When its health was last confirmed.
        var lastChecked: ContinuousClock.Instant
    }

    private struct Waiter {
        let id: Int
        let continuation: CheckedContinuation<PGConnection?, any Error>
    }

    /// The gauges, and the values they were last set to (each is set again only when its value changed).
    private struct Gauges {
        let leased: Gauge
        let idle: Gauge
        let waiters: Gauge
        var reported = (leased: -1, idle: -1, waiters: -1)

        mutating func report(_ now: (leased: Int, idle: Int, waiters: Int)) {
            if now.leased != self.reported.leased { self.leased.record(now.leased) }
            if now.idle != self.reported.idle { self.idle.record(now.idle) }
            if now.waiters != self.reported.waiters { self.waiters.record(now.waiters) }
            self.reported = now
        }
    }

    private struct State {
        var gauges: Gauges
        var idle: [Idle] = []
        var leased = 0
        var opening = 0
        var waiters: Deque<Waiter> = []
        var nextWaiterID = 0
        var shutDown = false
        var opened = 0
        var closed = 0
        var leaseTimeouts = 0
        var total: Int { self.idle.count + self.leased + self.opening }

        mutating func reportGauges() {
            let now = (leased: self.leased, idle: self.idle.count, waiters: self.waiters.count)
            self.gauges.report(now)
        }
    }

    public let configuration: Configuration
    public let postgres: PGConfiguration
    private let logger: Logger
    private let state: Locked<State>
    private let leaseWait: Metrics.Timer
    /// Where the pooled connections report their statements' durations.
    private let metrics: MetricsScope
    /// ``maintain()``'s failures to open the minimum of connections, at `warning` (rate-limited), and the
    /// recovery at `notice`.
    private let openOutage: OutageLog

    /// Creates a pool; no connection is opened until one is needed (or `run()` starts).
    ///
    /// ```swift
    /// let pool = PGConnectionPool(
    ///     postgres: try PGConfiguration(url: url), metricsDimensions: [("service", "billing")])
    /// ```
    /// - Parameters:
    ///   - configuration: sizing and timeouts.
    ///   - postgres: where and how to connect.
    ///   - logger: receives the pool's and its connections' records; the password is never logged.
    ///   - metricsDimensions: dimensions every metric of the pool carries (see "Metrics" above).
    public convenience init(
        configuration: Configuration = .init(), postgres: PGConfiguration,
        logger: Logger = Logger(label: "skyros.pool", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsDimensions: [(String, String)] = []
    ) {
        self.init(configuration: configuration, postgres: postgres, logger: logger, metrics: MetricsScope(dimensions: metricsDimensions))
    }

    /// A pool whose metrics go to `metrics` (its backend and dimensions).
    package init(configuration: Configuration, postgres: PGConfiguration, logger: Logger, metrics: MetricsScope) {
        self.configuration = configuration
        self.postgres = postgres
        self.logger = logger
        self.metrics = metrics
        self.openOutage = OutageLog(logger: logger, event: "opening the pool's minimum connections")
        var state = State(gauges: Gauges(
            leased: metrics.gauge("skyros.pool.leased"), idle: metrics.gauge("skyros.pool.idle"),
            waiters: metrics.gauge("skyros.pool.waiters")))
        state.reportGauges()
        self.state = Locked(state)
        self.leaseWait = metrics.timer("skyros.pool.lease_wait")
    }

    /// Changes the state under its lock and reports the gauges whose values changed (in the same critical
    /// section, so that two changes cannot report out of order).
    private func withState<R>(_ body: (inout State) throws -> R) rethrows -> R {
        try self.state.withLock { state in
            let result = try body(&state)
            state.reportGauges()
            return result
        }
    }

    /// Current counters: in use, idle, opening, waiting, and totals since creation.
    public var statistics: Statistics {
        self.state.withLock {
            Statistics(
                inUse: $0.leased, idle: $0.idle.count, opening: $0.opening, waiting: $0.waiters.count,
                opened: $0.opened, closed: $0.closed, leaseTimeouts: $0.leaseTimeouts)
        }
    }

    private enum LeaseAction {
        case use(PGConnection)
        case open
        case wait
        case fail(PGError)
    }

    /// Leases a connection; pair with ``release(_:)``. Prefer ``withConnection(_:)``.
    public func lease() async throws -> PGConnection {
        while true {
            let (connection, wasIdle) = try await self.leaseCandidate()
            if !wasIdle { return connection }
            if await self.keepIfHealthy(connection) { return connection }
        }
    }

    /// Records the time from `started` to now as a lease's wait.
    private func recordLeaseWait(since started: ContinuousClock.Instant) {
        let (seconds, attoseconds) = (ContinuousClock.now - started).components
        self.leaseWait.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// Whether an idle connection still works; a dropped one is discarded.
    private func keepIfHealthy(_ connection: PGConnection) async -> Bool {
        if await connection.isHealthy() { return true }
        self.logger.debug("discarding a dropped idle connection", metadata: [PGLogKey.connectionID: "\(connection.id)"])
        await self.discard(connection)
        return false
    }

    /// A leased connection: an idle one (`wasIdle`: its health is not checked yet) or a new one.
    /// The time until it returns or throws is recorded as the lease's wait.
    private func leaseCandidate() async throws -> (connection: PGConnection, wasIdle: Bool) {
        let started = ContinuousClock.now
        defer { self.recordLeaseWait(since: started) }
        while true {
            let action = self.withState { state -> LeaseAction in
                if state.shutDown { return .fail(PGError(kind: .poolClosed, message: "the connection pool is shut down")) }
                if let idle = state.idle.popLast() {
                    state.leased += 1
                    return .use(idle.connection)
                }
                if state.total < self.configuration.maximumConnections {
                    state.opening += 1
                    return .open
                }
                return .wait
            }
            switch action {
            case .fail(let error):
                throw error
            case .use(let connection):
                return (connection, true)
            case .open:
                do {
                    return (try await self.openLeased(), false)
                } catch {
                    let waiter = self.withState { state -> Waiter? in
                        state.opening -= 1
                        return state.waiters.popFirst()
                    }
                    waiter?.continuation.resume(returning: nil)
                    throw error
                }
            case .wait:
                // A connection handed over by a release was just checked: open, and no transaction left open.
                if let connection = try await self.waitForConnection() { return (connection, false) }
            }
        }
    }

    /// Opens a connection counted as `opening`, and counts it as leased once open (on failure it is still
    /// counted as `opening`: the caller undoes that).
    private func openLeased() async throws -> PGConnection {
        let connection = try await PGConnection.connect(
            to: self.postgres, logger: self.logger, usePreparedStatements: self.configuration.usePreparedStatements,
            metrics: self.metrics)
        self.withState {
            $0.opening -= 1
            $0.leased += 1
            $0.opened += 1
        }
        return connection
    }

    /// Waits for a released connection (returned) or for free capacity (nil: try again), at most
    /// ``Configuration/leaseTimeout``: a child task sleeps for that long and then fails the wait with
    /// `.poolTimeout`, unless the wait ended first (the child is then cancelled and awaited).
    private func waitForConnection() async throws -> PGConnection? {
        let id = self.withState { state -> Int in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        let timeout = self.configuration.leaseTimeout
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await Task.sleep(for: timeout)
                self.expire(waiter: id, error: PGError(
                    kind: .poolTimeout,
                    message: "no connection became available within \(timeout) (pool of \(self.configuration.maximumConnections), all in use)"))
            }
            defer { group.cancelAll() }
            return try await self.enqueue(waiter: id)
        }
    }

    /// Queues the waiter `id` until a connection is handed to it, capacity frees up, or ``expire(waiter:error:)``
    /// fails it (the lease timeout, or cancellation of the task: `.queryCancelled`).
    private func enqueue(waiter id: Int) async throws -> PGConnection? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<PGConnection?, any Error>) in
                let enqueued = self.withState { state -> Bool in
                    if state.shutDown || Task.isCancelled { return false }
                    if !state.idle.isEmpty || state.total < self.configuration.maximumConnections {
                        continuation.resume(returning: nil)
                        return true
                    }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return true
                }
                if !enqueued {
                    continuation.resume(throwing: PGError(kind: .poolClosed, message: "the connection pool is shut down or the task was cancelled"))
                }
            }
        } onCancel: {
            self.expire(waiter: id, error: PGError(kind: .queryCancelled, message: "the task was cancelled while waiting for a connection"))
        }
    }

    private func expire(waiter id: Int, error: PGError) {
        let waiter = self.withState { state -> Waiter? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            if error.kind == .poolTimeout { state.leaseTimeouts += 1 }
            return state.waiters.remove(at: index)
        }
        waiter?.continuation.resume(throwing: error)
    }

    /// Returns a leased connection. A transaction left open is rolled back first, even when the task is
    /// cancelled (see `PGConnection.rollback()`); a broken connection, or one whose rollback failed, is closed,
    /// so the next caller never gets a connection inside someone else's transaction.
    public func release(_ connection: PGConnection) async {
        guard await connection.prepareForReuse() else {
            self.logger.debug(
                "closing a released connection that cannot be reused",
                metadata: [PGLogKey.connectionID: "\(connection.id)"])
            await self.discard(connection)
            return
        }
        await self.returnIdle(Idle(connection: connection, since: .now, lastChecked: .now))
    }

    /// Puts a released or checked connection back (a checked one keeps its idle-since time), or hands it to a
    /// waiter; closes it when the pool was shut down meanwhile (``shutdown()`` only closes the connections that
    /// are idle when it runs).
    private func returnIdle(_ idle: Idle) async {
        let (waiter, closeIt) = self.withState { state -> (Waiter?, Bool) in
            if state.shutDown {
                state.leased -= 1
                state.closed += 1
                return (nil, true)
            }
            if let waiter = state.waiters.popFirst() { return (waiter, false) }
            state.leased -= 1
            state.idle.append(idle)
            return (nil, false)
        }
        if closeIt { await idle.connection.close() }
        waiter?.continuation.resume(returning: idle.connection)
    }

    private func discard(_ connection: PGConnection) async {
        let waiter = self.withState { state -> Waiter? in
            state.leased -= 1
            state.closed += 1
            return state.waiters.popFirst()
        }
        await connection.close()
        waiter?.continuation.resume(returning: nil)
    }

    /// Leases a connection for the duration of `body`, which runs on the connection's own thread (see
    /// `PGConnection.withOwnExecutor(_:)`): consecutive statements do not hop between threads.
    ///
    /// ```swift
    /// let rows = try await pool.withConnection { try await $0.query("SELECT 1") }
    /// ```
    /// - Throws: `.poolTimeout` when no connection frees up within the lease timeout, or `body`'s error.
    @discardableResult
    public func withConnection<R>(_ body: (PGConnection) async throws -> R) async throws -> R {
        while true {
            let (connection, wasIdle) = try await self.leaseCandidate()
            if let outcome = await self.run(body, on: connection, checkingHealth: wasIdle) { return try outcome.get() }
        }
    }

    /// An idle connection, leased now without waiting (no health check yet), or `nil` when none is idle. Pass
    /// it to ``withConnection(leased:_:)``, for instance from a task started on its thread
    /// (``PGConnection/taskExecutor``).
    package func leaseIdleNow() -> PGConnection? {
        self.withState { state in
            guard !state.shutDown, let idle = state.idle.popLast() else { return nil }
            state.leased += 1
            return idle.connection
        }
    }

    /// ``withConnection(_:)`` with a connection ``leaseIdleNow()`` leased: its health is checked first, and if it
    /// was dropped, another is leased as usual.
    package func withConnection<R>(leased connection: PGConnection, _ body: (PGConnection) async throws -> R) async throws -> R {
        if let outcome = await self.run(body, on: connection, checkingHealth: true) { return try outcome.get() }
        return try await self.withConnection(body)
    }

    /// Runs `body` on a leased connection and releases it. The health check, the body and the release all run
    /// on the connection's thread: one hop there and one back per lease. `nil`: the idle connection was dropped
    /// (and is discarded); lease another.
    private func run<R>(
        _ body: (PGConnection) async throws -> R, on connection: PGConnection, checkingHealth: Bool
    ) async -> Result<R, any Error>? {
        await connection.withOwnExecutor {
            if checkingHealth, !(await self.keepIfHealthy(connection)) { return nil }
            do {
                let value = try await body(connection)
                await self.release(connection)
                return .success(value)
            } catch {
                await self.release(connection)
                return .failure(error)
            }
        }
    }

    /// Runs `body` in a transaction on a leased connection: COMMIT on return, ROLLBACK on throw.
    ///
    /// ```swift
    /// try await pool.withTransaction(isolation: .repeatableRead) { connection in
    ///     try await connection.query("INSERT INTO audit (event) VALUES (\(event))")
    /// }
    /// ```
    @discardableResult
    public func withTransaction<R>(
        isolation: IsolationLevel? = nil, _ body: (PGConnection) async throws -> R
    ) async throws -> R {
        try await self.withConnection { connection in
            try await connection.withTransaction(isolation: isolation, body)
        }
    }

    /// Maintains the pool until cancelled or gracefully shut down, then closes every connection.
    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await self.maintain()
                try? await Task.sleep(for: min(self.configuration.healthCheckInterval, .seconds(1)))
            }
        }
        await self.shutdown()
    }

    /// One maintenance pass: close expired idle connections, check idle health, open up to the minimum.
    /// ``run()`` repeats it (package-visible for tests).
    package func maintain() async {
        let now = ContinuousClock.now
        let expired = self.withState { state -> [PGConnection] in
            var expired: [PGConnection] = []
            var kept: [Idle] = []
            let total = state.total
            for idle in state.idle {
                if total - expired.count > self.configuration.minimumConnections,
                    now - idle.since > self.configuration.idleTimeout
                {
                    expired.append(idle.connection)
                } else {
                    kept.append(idle)
                }
            }
            state.idle = kept
            state.closed += expired.count
            return expired
        }
        for connection in expired { await connection.close() }

        let checkBefore = now - self.configuration.healthCheckInterval
        let idle = self.withState { state -> [Idle] in
            let due = state.idle.filter { $0.lastChecked < checkBefore }
            state.idle.removeAll { $0.lastChecked < checkBefore }
            state.leased += due.count
            return due
        }
        for entry in idle {
            if await entry.connection.isHealthy() {
                await self.returnIdle(Idle(connection: entry.connection, since: entry.since, lastChecked: .now))
            } else {
                await self.discard(entry.connection)
            }
        }

        while true {
            let open = self.withState { state -> Bool in
                guard !state.shutDown, state.total < self.configuration.minimumConnections else { return false }
                state.opening += 1
                return true
            }
            guard open else { break }
            do {
                await self.release(try await self.openLeased())
                self.openOutage.recovered()
            } catch {
                self.withState { $0.opening -= 1 }
                self.openOutage.failed(error, retryIn: min(self.configuration.healthCheckInterval, .seconds(1)))
                break
            }
        }
    }

    /// Refuses new leases, fails waiters, and closes idle connections; leased connections close on release.
    public func shutdown() async {
        let (idle, waiters) = self.withState { state -> ([PGConnection], [Waiter]) in
            state.shutDown = true
            let idle = state.idle.map(\.connection)
            state.closed += idle.count
            state.idle.removeAll()
            // Not `Array(_:)` of an empty deque: it writes the count of the shared empty array storage, a
            // write ThreadSanitizer reports against every reader of an empty array.
            let waiters = state.waiters.isEmpty ? [] : Array(state.waiters)
            state.waiters.removeAll()
            return (idle, waiters)
        }
        for waiter in waiters {
            waiter.continuation.resume(throwing: PGError(kind: .poolClosed, message: "the connection pool is shut down"))
        }
        for connection in idle { await connection.close() }
    }
}
