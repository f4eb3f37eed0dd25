import Foundation
import Logging
import ServiceLifecycle
import SkyrosMigrations
import SkyrosPostgres
import SkyrosStore
import SkyrosStack
import SkyrosObservation
import SkyrosSync

/// Core Data's context stack over PostgreSQL: a main context with a bounded row cache, contexts that save
/// into it, and an ordered commit path to the store.
///
/// ``start(_:logger:)`` returns a ready stack — the store reachable, migrations applied, entities validated —
/// or throws a `DataStackError` naming what failed. Opening never deletes data.
///
/// ```swift
/// let stack = try await DataStack.start(DataStackConfiguration(
///     store: .postgres(try PGConfiguration(url: url)),
///     migrations: .directory(path: "migrations"),
///     entities: [Author.self, Book.self]))
///
/// try await stack.write { context in                        // visible to every reader on return
///     try context.insert(Author(id: id, name: "Ada Lovelace"))
/// }
/// let ada = try await stack.read { try await $0.object(Author.self, id: id) }   // from memory
/// try await stack.write(durability: .committed) { context in // returns after COMMIT; throws its error
///     try context.insert(Book(id: UUID(), title: "Notes", authorID: id))
/// }
/// ```
///
/// A stack is a swift-service-lifecycle `Service`: ``run()`` waits for graceful shutdown and then drains the
/// commit queue and closes the pool (``shutdown()`` does the same directly).
///
/// ## Topics
/// - ``start(_:logger:)``
/// - ``DataStackConfiguration``
/// - ``read(_:)``
/// - ``write(durability:_:)``
/// - ``write(durability:mergePolicy:_:)``
/// - ``write(_:completion:)``
/// - ``mainContext``
/// - ``newBackgroundContext()``
/// - ``errors``
/// - ``cacheStatistics``
/// - ``commitQueueStatistics``
/// - ``destroyAndRebuild(confirm:)``
/// - ``run()``
/// - ``shutdown()``
/// - ``shutdown(timeout:)``
public final class DataStack: DataStackProtocol, Service {
    private struct Current: Sendable {
        var core: StackCore
        var main: DataContext
    }

    /// The store the stack commits to.
    public var store: any Store { self.commitStore }
    /// The store, as the commit queue commits to it.
    private let commitStore: any GroupCommitStore
    /// The store when it is PostgreSQL (rebuilds re-run migrations; snapshot reads use its pool).
    let postgresStore: PostgresStore?
    private let pool: PGConnectionPool?
    private let configuration: DataStackConfiguration
    let logger: Logger
    private let current: Locked<Current>
    /// The read replica's pool, when configured (``readSnapshot(from:_:)``).
    let replica: ReplicaReader?
    private let errorContinuation: AsyncStream<DataStackError>.Continuation
    /// The change log, the listener for other processes' commits, and the observers (SkyrosSync, SkyrosObservation).
    let sync: StackSync

    /// The change feed's loops (see ``BackgroundWork``).
    private let background = BackgroundWork()
    /// Drains of the commit queue, and writes run for a completion handler: counted, awaited at shutdown.
    private let tasks = TaskTracker()

    /// Commit failures of queued (non-durable) writes and saves, as they happen, for this stack only.
    /// Buffers the newest 256 when nobody listens. Finishes at ``shutdown()``.
    public let errors: AsyncStream<DataStackError>

    private init(
        store: any GroupCommitStore, postgres: PostgresStore?, pool: PGConnectionPool?, configuration: DataStackConfiguration,
        logger: Logger
    ) {
        self.commitStore = store
        self.postgresStore = postgres
        self.pool = pool
        self.configuration = configuration
        self.logger = logger
        let metrics = configuration.metricsScope
        self.replica = pool == nil ? nil : configuration.readReplica.map { ReplicaReader($0, logger: logger, metrics: metrics) }
        let (errors, continuation) = AsyncStream.makeStream(of: DataStackError.self, bufferingPolicy: .bufferingNewest(256))
        self.errors = errors
        self.errorContinuation = continuation
        let core = StackCore(
            store: store, cacheLimit: configuration.cacheLimit, generation: store.generation, logger: logger,
            queueConfiguration: configuration.commitQueue, drains: self.tasks, metrics: metrics,
            onCommitError: { continuation.yield($0) })
        self.current = Locked(Current(core: core, main: DataContext(core: core, parent: .root, isMain: true)))
        self.sync = StackSync(configuration: configuration.changeFeed, metrics: metrics)
        self.sync.attach(core)
    }

    /// Opens a stack: connects, applies migrations, validates entities, and returns it ready.
    ///
    /// ```swift
    /// let stack = try await DataStack.start(DataStackConfiguration(store: .inMemory))
    /// ```
    /// - Parameters:
    ///   - configuration: the store, migrations, entities and cache bound.
    ///   - logger: receives debug/info records; a no-op logger by default.
    /// It first waits for PostgreSQL to accept a connection, retrying while it refuses, does not answer, is
    /// starting up or has no free slot, for up to ``DataStackConfiguration/waitForDatabase`` (30 s by default);
    /// each failed attempt is logged at `warning` with its reason.
    ///
    /// - Throws: `DataStackError` with code `.storeUnreachable` (bad URL, host, password, database, or no
    ///   connection within ``DataStackConfiguration/waitForDatabase``),
    ///   `.migrationFailed` (wrapping the migrator's error, naming the file), or `.schemaMismatch` (naming
    ///   entity, column and types). Nothing is deleted on failure.
    public static func start(
        _ configuration: DataStackConfiguration,
        logger: Logger = Logger(label: "skyros.stack", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws -> DataStack {
        switch configuration.store {
        case .inMemory:
            // No tables to check in memory; a many-to-many's join entity must still be listed, as on PostgreSQL.
            if let mismatch = ForeignKeyCheck.joinEntityMismatch(configuration.entities) {
                throw DataStackError(code: .schemaMismatch, message: "the entities do not match", underlying: mismatch)
            }
            let stack = DataStack(store: InMemoryStore(), postgres: nil, pool: nil, configuration: configuration, logger: logger)
            try await stack.core.prepareIdentities(configuration.entities)
            return stack
        case .postgres(let postgres, let schema):
            try await StartupWait(deadline: configuration.waitForDatabase).waitForDatabase(postgres, logger: logger)
            let pool = PGConnectionPool(
                configuration: configuration.pool, postgres: postgres, logger: logger,
                metrics: configuration.metricsScope.adding("pool", "primary"))
            do {
                let store = try await self.open(postgres, schema: schema, pool: pool, configuration: configuration, logger: logger)
                let stack = DataStack(store: store, postgres: store, pool: pool, configuration: configuration, logger: logger)
                try await stack.core.prepareIdentities(configuration.entities)
                var lock = configuration.migrator
                if let schema { lock.schema = schema }
                try await stack.sync.start(
                    pool: pool, session: configuration.directConnection ?? postgres, schema: schema,
                    tables: Self.mappedTables(configuration.entities), lock: (lock.schema, lock.historyTable), logger: logger)
                if stack.sync.changeFeed != nil { stack.background.start(stack.sync.loops) }
                return stack
            } catch {
                await pool.shutdown()
                throw error
            }
        }
    }

    /// The tables of `entities`, each once, in order.
    private static func mappedTables(_ entities: [any Entity.Type]) -> [String] {
        var seen: Set<String> = []
        var tables: [String] = []
        for entity in entities where seen.insert(entity.tableName).inserted { tables.append(entity.tableName) }
        return tables
    }

    private static func open(
        _ postgres: PGConfiguration, schema: String?, pool: PGConnectionPool,
        configuration: DataStackConfiguration, logger: Logger
    ) async throws -> PostgresStore {
        do {
            try await pool.withConnection { _ = try await $0.query("SELECT 1") }
        } catch {
            throw DataStackError(
                code: .storeUnreachable, message: "cannot connect to PostgreSQL at \(Self.describe(postgres))", underlying: error)
        }
        let store = PostgresStore(pool: pool, schema: schema, logger: logger)
        try await self.migrate(postgres, schema: schema, store: store, configuration: configuration, logger: logger)
        try await store.createCommitLogIfNeeded()
        do {
            try await store.validate(configuration.entities)
        } catch {
            throw DataStackError(
                code: .schemaMismatch, message: "the entities do not match the tables in schema \(schema ?? "current_schema()")",
                underlying: error)
        }
        logger.info("data stack ready", metadata: ["skyros.stack.schema": "\(schema ?? "current_schema()")"])
        return store
    }

    private static func migrate(
        _ postgres: PGConfiguration, schema: String?, store: PostgresStore,
        configuration: DataStackConfiguration, logger: Logger
    ) async throws {
        guard let source = configuration.migrations else {
            try await store.createSchemaIfNeeded()
            return
        }
        var migratorConfiguration = configuration.migrator
        if let schema {
            migratorConfiguration.schema = schema
        } else if migratorConfiguration.schema == SchemaMigrator.Configuration.defaultSchema {
            // A stack without a schema reads and writes `current_schema()` (the connection's `search_path`): its
            // migrations go there too, unless `migrator.schema` names another.
            let current = try await store.pool.withConnection { connection in
                try await connection.query("SELECT current_schema()::text")[0].decode(String?.self, at: 0)
            }
            if let current { migratorConfiguration.schema = current }
        }
        do {
            let report = try await SchemaMigrator(source: source, configuration: migratorConfiguration, logger: logger)
                .migrate(database: configuration.directConnection ?? postgres)   // its lock needs a session
            logger.debug("migrations applied", metadata: ["skyros.stack.migrations": "\(report.completed.count)"])
        } catch {
            throw DataStackError(code: .migrationFailed, message: "applying the migrations in \(source) failed", underlying: error)
        }
    }

    /// Host, port and database only (never the password).
    static func describe(_ postgres: PGConfiguration) -> String {
        let host = postgres["host"] ?? postgres["hostaddr"] ?? "localhost"
        let port = postgres["port"] ?? "5432"
        let database = postgres["dbname"] ?? postgres["user"] ?? ""
        return "\(host):\(port)/\(database)"
    }

    // MARK: Contexts

    /// The context readers share. Reads see every saved write of this process (even while its commit is
    /// queued); reads by id are served from its bounded cache.
    public var mainContext: DataContext { self.current.withLock { $0.main } }

    var core: StackCore { self.current.withLock { $0.core } }

    /// A new context whose `DataContext/save()` goes straight to the commit queue (a sibling of the main
    /// context, like Core Data's `newBackgroundContext()`).
    public func newBackgroundContext() -> DataContext {
        DataContext(core: self.core, parent: .root)
    }

    /// Runs `body` against the main context and returns its value.
    ///
    /// ```swift
    /// let books = try await stack.read { try await $0.fetch(FetchDescriptor<Book>(fetchLimit: 20)) }
    /// ```
    public func read<R>(_ body: (DataContext) async throws -> R) async throws -> R {
        try await self.mainContext.perform(body)
    }

    /// Runs `body` on a new context and saves its changes as one atomic commit (all or nothing). When the
    /// body throws, nothing is saved.
    ///
    /// ```swift
    /// try await stack.write(durability: .committed) { context in
    ///     try context.insert(book)
    /// }
    /// ```
    /// - Parameters:
    ///   - durability: `WriteDurability/visible` (default) returns once every reader in the process sees
    ///     the change; `WriteDurability/committed` returns after the PostgreSQL commit.
    ///   - body: the changes.
    /// - Returns: the body's value. With `.committed`, a body that returns one entity gets it back as stored
    ///   (with the values the database set, `DatabaseGenerated`); any other value (an array, a tuple, an id) is
    ///   returned as the body gave it: read the rows again for their stored values.
    /// - Throws: the body's error; with `.committed`, the commit's error (`StoreError`, `PGError`);
    ///   `DataStackError` (`.stackShutDown`, `.contextInvalidated`). Waits first while the commit queue is
    ///   full (`CommitQueueConfiguration/maximumQueuedCommits`, `CommitQueueConfiguration/maximumQueuedBytes`).
    @discardableResult
    public func write<R>(durability: WriteDurability, _ body: (DataContext) async throws -> R) async throws -> R {
        try await self.write(durability: durability, policy: nil, body)
    }

    /// ``write(durability:_:)`` with the stack's ``DataStackConfiguration/defaultDurability``
    /// (`WriteDurability/visible` unless configured).
    ///
    /// ```swift
    /// try await stack.write { context in
    ///     try context.insert(book)
    /// }
    /// ```
    @discardableResult
    public func write<R>(_ body: (DataContext) async throws -> R) async throws -> R {
        try await self.write(durability: self.configuration.defaultDurability, policy: nil, body)
    }

    /// ``write(durability:_:)`` with a merge policy for this write's version conflicts (instead of the
    /// stack's `CommitQueueConfiguration/mergePolicy`).
    ///
    /// ```swift
    /// try await stack.write(durability: .committed, mergePolicy: .mergeByProperty) { context in
    ///     try await context.update(renamed)
    /// }
    /// ```
    @discardableResult
    public func write<R>(
        durability: WriteDurability? = nil, mergePolicy: MergePolicy, _ body: (DataContext) async throws -> R
    ) async throws -> R {
        try await self.write(durability: durability ?? self.configuration.defaultDurability, policy: mergePolicy, body)
    }

    /// ``write(durability:_:)`` whose own log records go to `logger` instead of the stack's: pass a request's
    /// logger, and a queued write that fails to commit after the handler returned is logged at `error` there,
    /// with the request's metadata (its id) beside the entity, row, SQLSTATE and constraint.
    ///
    /// ```swift
    /// var requestLogger = Logger(label: "tickets")
    /// requestLogger[metadataKey: "request-id"] = "4f1c"
    /// try await stack.write(logger: requestLogger) { context in
    ///     try context.insert(book)
    /// }
    /// ```
    /// - Parameters:
    ///   - durability: as for ``write(durability:_:)``; the stack's ``DataStackConfiguration/defaultDurability``
    ///     when `nil`.
    ///   - mergePolicy: this write's merge policy; the stack's when `nil`.
    ///   - logger: where this write's records go (the stack's own records, start-up and the change feed, stay
    ///     with the stack's logger).
    ///   - body: the changes.
    @discardableResult
    public func write<R>(
        durability: WriteDurability? = nil, mergePolicy: MergePolicy? = nil, logger: Logger,
        _ body: (DataContext) async throws -> R
    ) async throws -> R {
        try await self.write(
            durability: durability ?? self.configuration.defaultDurability, policy: mergePolicy, logger: logger, body)
    }

    /// ``write(durability:_:)`` that ends by `deadline`: a request handler's write answers in time while the
    /// database is unreachable. The write stops waiting when the deadline passes or its task is cancelled, and
    /// throws ``DataStackError`` `.deadlineExceeded` (or `.writeCancelled`); its
    /// ``DataStackError/mayStillCommit`` says whether the changes were already queued, in which case the commit
    /// queue keeps retrying them (``CommitQueueConfiguration/maximumRetryDuration``) and a failure reaches
    /// ``errors``. A write whose deadline passes before its changes are queued saves nothing. The deadline
    /// bounds the waits (room in the queue, the commit); a body that runs past it is not interrupted, but its
    /// changes are then not saved.
    ///
    /// ```swift
    /// do {
    ///     try await stack.write(durability: .committed, deadline: .now + .seconds(2)) { context in
    ///         try context.insert(book)
    ///     }
    /// } catch let error as DataStackError where error.code == .deadlineExceeded {
    ///     // answer 503; error.mayStillCommit says whether the row may appear later
    /// }
    /// ```
    /// - Parameters:
    ///   - durability: as for ``write(durability:_:)``; the stack's ``DataStackConfiguration/defaultDurability``
    ///     when `nil`. With `WriteDurability/visible` the deadline bounds only the wait for room in the queue.
    ///   - deadline: when the write must have ended.
    ///   - mergePolicy: this write's merge policy; the stack's when `nil`.
    ///   - logger: where this write's records go; the stack's logger when `nil`.
    ///   - body: the changes.
    @discardableResult
    public func write<R>(
        durability: WriteDurability? = nil, deadline: ContinuousClock.Instant, mergePolicy: MergePolicy? = nil,
        logger: Logger? = nil, _ body: (DataContext) async throws -> R
    ) async throws -> R {
        try await self.write(
            durability: durability ?? self.configuration.defaultDurability, policy: mergePolicy, logger: logger,
            deadline: deadline, body)
    }

    private func write<R>(
        durability: WriteDurability, policy mergePolicy: MergePolicy?, logger: Logger? = nil,
        deadline explicitDeadline: ContinuousClock.Instant? = nil, _ body: (DataContext) async throws -> R
    ) async throws -> R {
        let core = self.core
        let deadline = WriteDeadline(explicitDeadline ?? self.configuration.writeTimeout.map { .now + $0 })
        try await core.waitForRoom(until: deadline)
        try await core.identities.waitForIdentities()
        if durability == .committed { core.startDrainAhead() }
        let context = self.newBackgroundContext()
        let result = try await context.perform(body)
        // Past the deadline (or cancelled), nothing is queued: the caller is told the write did not happen.
        if let interruption = deadline.interruption(queued: false) { throw interruption }
        let ticket = try context.push(policy: mergePolicy, logger: logger)
        if durability == .committed, let ticket {
            try await ticket.wait(until: deadline)
            // A row the body returns comes back as stored: with the values the database set.
            if let row = result as? any Entity, let stored = try await core.current(row) as? R { return stored }
        }
        return result
    }

    /// Runs `body` on a new context, saves it, and calls `completion` exactly once: with the body's value after
    /// the commit, or with the body's or the commit's error.
    ///
    /// ```swift
    /// stack.write({ context in try context.insert(book) }, completion: { result in
    ///     if case .failure(let error) = result { log(error) }
    /// })
    /// ```
    public func write<R: Sendable>(
        _ body: @escaping @Sendable (DataContext) async throws -> R,
        completion: @escaping @Sendable (Result<R, any Error>) -> Void
    ) {
        self.tasks.spawn {
            let result: Result<R, any Error>
            do {
                result = .success(try await self.write(durability: .committed, body))
            } catch {
                result = .failure(error)
            }
            completion(result)
        }
    }

    /// Returns the stored row with `value`'s primary key, creating it from `value` when there is none, at once:
    /// committed before this returns, outside any context and race-free across processes
    /// (`INSERT … ON CONFLICT DO NOTHING`, then a read when another writer created the row first). A row it
    /// creates is announced like a commit's: observers in this stack and other processes see it. Inside
    /// `write {}`, `DataContext/findOrCreate(_:)` is the atomic form, committed with the write's other changes.
    ///
    /// ```swift
    /// let (tag, created) = try await stack.findOrCreate(Tag(id: "swift", uses: 0))
    /// ```
    ///
    /// A row the main context sees (cached, or changed by a queued write) is returned without a round trip.
    /// When a queued write deletes the row, the new row is written through the commit queue after that
    /// deletion, and this returns once it committed.
    /// - Throws: `PGError`, `ColumnValueError`, ``DataStackError``.
    @discardableResult
    public func findOrCreate<T: Entity>(_ value: T) async throws -> (value: T, created: Bool) {
        let core = self.core
        if let found = try await self.mainContext.object(T.self, id: value.id) { return (found, false) }
        if core.isPendingDeletion(try RowKey(value)) {
            return (try await self.write(durability: .committed) { try $0.insert(value) }, true)
        }
        let (row, _, created) = try await core.findOrCreate(value)
        return (row, created)
    }

    // MARK: Cache, store and lifecycle

    /// The main context's cache counters (rows, approximate bytes, hits, misses, evictions).
    public var cacheStatistics: CacheStatistics { self.core.statistics }

    /// Deletes every row (`Store/destroy(confirm:)`), re-applies the migrations, and starts over with an
    /// empty cache and a new main context. Contexts created before throw `DataStackError` `.contextInvalidated`;
    /// queued commits that had not started fail with the same error. With a change feed, the change log is
    /// created again too: if that fails, this throws, and writes fail (rather than commit unannounced to other
    /// processes) until a later call succeeds.
    /// - Throws: the store's error, `DataStackError` `.migrationFailed`, or the error that stopped the change
    ///   log's creation.
    public func destroyAndRebuild(confirm: DestroyConfirmation) async throws {
        let old = self.core
        old.holdCommits()
        old.invalidate()
        try await self.store.destroy(confirm: confirm)
        if let postgres = self.postgresStore, case .postgres(let configuration, let schema) = self.configuration.store {
            try await Self.migrate(configuration, schema: schema, store: postgres, configuration: self.configuration, logger: self.logger)
            try await postgres.createCommitLogIfNeeded()
        }
        let continuation = self.errorContinuation
        let core = StackCore(
            store: self.commitStore, cacheLimit: self.configuration.cacheLimit, generation: self.commitStore.generation,
            logger: self.logger, queueConfiguration: self.configuration.commitQueue, drains: self.tasks,
            metrics: self.configuration.metricsScope, onCommitError: { continuation.yield($0) })
        // Its commits wait until the change feed has attached to it and the capture is installed again: one before
        // that would write no change-log entry and send no hint, and other processes would keep what they cache
        // of it.
        core.holdCommits()
        // Its first identity blocks before any writer can reach it: an insert would otherwise find no id.
        try await core.prepareIdentities(self.configuration.entities)
        self.current.withLock { $0 = Current(core: core, main: DataContext(core: core, parent: .root, isMain: true)) }
        do {
            if let pool = self.pool {
                try await self.sync.storeRebuilt(core: core, pool: pool, logger: self.logger)
            }
        } catch {
            core.releaseCommits()
            throw error
        }
        core.releaseCommits()
        self.logger.info("store destroyed and rebuilt")
    }

    /// Waits for graceful shutdown (or cancellation), then ``shutdown()`` — or ``shutdown(timeout:)`` with
    /// `CommitQueueConfiguration/shutdownTimeout`, logging what did not commit. Returns once every background
    /// task of the stack has ended.
    public func run() async throws {
        try? await gracefulShutdown()
        guard let timeout = self.configuration.commitQueue.shutdownTimeout else {
            await self.shutdown()
            return
        }
        let report = await self.shutdown(timeout: timeout)
        if !report.isComplete {
            self.logger.error("shutdown deadline passed", metadata: ["skyros.stack.report": "\(report)"])
        }
    }

    /// Stops accepting writes, waits for every queued commit, ends the stack's background work (the change
    /// feed's loops, the commit queue's drains) and waits for it, closes the pool, and finishes ``errors``.
    /// Writes after this throw `DataStackError` `.stackShutDown`; no connection is opened after it returns.
    public func shutdown() async {
        await self.core.shutdown()
        await self.stopBackgroundWork()
    }

    /// Like ``shutdown()``, but waits at most `timeout` for the queue to drain; then the sets still queued fail
    /// (reverted; their callers get `DataStackError` `.stackShutDown`) and the report names them.
    ///
    /// ```swift
    /// let report = await stack.shutdown(timeout: .seconds(10))
    /// if !report.isComplete { logger.error("\(report)") }
    /// ```
    @discardableResult
    public func shutdown(timeout: Duration) async -> ShutdownReport {
        let report = await self.core.shutdown(timeout: timeout)
        // A group still in flight after the deadline is not waited for (its drain ends when its transaction does).
        await self.stopBackgroundWork(waitingForDrains: report.inFlight.isEmpty)
        return report
    }

    /// After the commit queue stopped: ends the change feed and its loops, waits for the counted tasks, then
    /// closes the pools.
    private func stopBackgroundWork(waitingForDrains: Bool = true) async {
        await self.sync.stop()
        await self.background.stop()
        if waitingForDrains { await self.tasks.allEnded() }
        await self.pool?.shutdown()
        await self.replica?.shutdown()
        self.errorContinuation.finish()
    }

    /// The stack's background tasks still running: the change feed's loops, drains of the commit queue, and
    /// writes run for a completion handler. Zero once ``shutdown()`` (or ``run()``) returned.
    package var backgroundTasks: Int { self.background.running + self.tasks.running }

    /// The commit queue's counters: depth, groups, sets, conflicts, retries, latency.
    public var commitQueueStatistics: CommitQueueStatistics { self.core.metrics.statistics }

    /// Registers work that runs inside every group-commit transaction before `COMMIT` (PostgreSQL only).
    package func setCommitHook(_ hook: (any CommitTransactionHook)?) { self.core.setCommitHook(hook) }

    /// Test hook: queued commits wait until ``releaseCommits()`` (writes still become visible at once).
    package func holdCommits() { self.core.holdCommits() }

    /// Test hook: lets held commits run.
    package func releaseCommits() { self.core.releaseCommits() }

    /// Test hook: the number of commits queued and not yet started.
    package var queuedCommits: Int { self.core.queuedCommits }

    /// Test hook: how many blocks of ids were taken from `T`'s identity sequence (one round trip each).
    package func identityBlocksFetched<T: Entity>(_ type: T.Type) -> Int { self.core.identities.blocksFetched(T.self) }
}
