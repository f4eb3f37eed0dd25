import Metrics
import SkyrosMigrations
import SkyrosPostgres
import SkyrosStore
import SkyrosStack
import SkyrosObservation
import SkyrosSync

/// Everything ``DataStack/start(_:logger:)`` needs: where the data lives, the migrations to apply, the
/// entities to validate, and the cache bound.
///
/// ```swift
/// var configuration = DataStackConfiguration(
///     store: .postgres(try PGConfiguration(url: url), schema: "app"),
///     migrations: .directory(path: "migrations"),
///     entities: [Author.self, Book.self])
/// configuration.cacheLimit = CacheLimit(maxRows: 50_000)
/// let stack = try await DataStack.start(configuration)
/// ```
public struct DataStackConfiguration: Sendable {
    /// Where a stack keeps its rows.
    public enum StoreLocation: Sendable {
        /// In process memory (`InMemoryStore`): no server, same semantics. For tests and demos.
        case inMemory
        /// A PostgreSQL database, optionally sandboxed in a schema (created when missing; migrations run in it).
        ///
        /// Without a schema, tables are found through the connection's `search_path` and migrations run in
        /// ``DataStackConfiguration/migrator``'s schema: `SchemaMigrator.Configuration.defaultSchema` (`public`) unless
        /// set there. That is also where `swift run migrate` looks without `--schema` or `DATABASE_SCHEMA`, so
        /// its `status` shows what the app applied.
        ///
        /// ```swift
        /// let configuration = DataStackConfiguration(
        ///     store: .postgres(try PGConfiguration(url: url)),        // migrations and history in "public"
        ///     migrations: .directory(path: "migrations"))
        /// ```
        case postgres(PGConfiguration, schema: String? = nil)
    }

    /// Where the rows live.
    public var store: StoreLocation
    /// Migrations applied at start (PostgreSQL only); `nil` applies none.
    public var migrations: MigrationSource?
    /// The history table, timeouts and policies of the migrator. Its schema is the store's when the store names
    /// one; else the one it names, or, left at `SchemaMigrator.Configuration.defaultSchema`, the connection's
    /// `current_schema()`, where the stack's tables are read and written.
    ///
    /// During a rolling deploy the previous build still starts after a newer one applied more migrations: its
    /// files being a prefix of the history, the newer versions are logged at `notice` (see
    /// `SchemaMigrator/NewerMigrationsPolicy`). To refuse instead:
    ///
    /// ```swift
    /// var configuration = DataStackConfiguration(
    ///     store: .postgres(try PGConfiguration(url: url)), migrations: .directory(path: "migrations"))
    /// configuration.migrator.newerAppliedMigrations = .refuse
    /// ```
    public var migrator: SchemaMigrator.Configuration
    /// Entities checked against the live schema at start (PostgreSQL only).
    public var entities: [any Entity.Type]
    /// The bound of the main context's row cache.
    public var cacheLimit: CacheLimit
    /// The connection pool's configuration (PostgreSQL only).
    public var pool: PGConnectionPool.Configuration
    /// Group-commit bounds, backpressure, retries and the default merge policy.
    public var commitQueue = CommitQueueConfiguration()
    /// What ``DataStack/write(_:)`` waits for when the caller does not say: `WriteDurability/visible`
    /// (default: it returns once every reader in the process sees the change, and a commit failure later
    /// reaches ``DataStack/errors``, the log at `error` and the metrics) or `WriteDurability/committed` (it
    /// returns after the PostgreSQL commit and throws its error). A request handler that answers "created"
    /// should write `.committed`, so that a constraint the database checks fails the request instead of a
    /// log line.
    ///
    /// ```swift
    /// var configuration = DataStackConfiguration(store: .inMemory)
    /// configuration.defaultDurability = .committed
    /// ```
    public var defaultDurability: WriteDurability = .visible

    /// How long a write may take when the call names no deadline (``DataStack/write(durability:deadline:mergePolicy:logger:_:)``):
    /// past it, the write throws `DataStackError` `.deadlineExceeded`. `nil` (the default): writes wait for
    /// room in the queue and durable writes for their commit as long as the commit queue retries
    /// (`CommitQueueConfiguration/maximumRetryDuration`); task cancellation still ends the wait.
    ///
    /// ```swift
    /// var configuration = DataStackConfiguration(store: .inMemory)
    /// configuration.writeTimeout = .seconds(2)   // a request's write answers within 2 s, database down or not
    /// ```
    public var writeTimeout: Duration?
    /// The change log and listener that keep several processes' caches and observers current.
    public var changeFeed = ChangeFeedConfiguration()
    /// A direct connection to the same database, for the work that needs a server session of its own: the
    /// migrations' advisory lock at start and the change feed's `LISTEN` (unless
    /// `ChangeFeedConfiguration/listener` names another). `nil` uses the store's.
    ///
    /// Set it when the store's URL goes through a transaction-pooling proxy (PgBouncer's
    /// `pool_mode = transaction`): there each transaction may run on another server connection, so a session's
    /// lock or `LISTEN` would stay behind on whichever connection served that one statement.
    ///
    /// ```swift
    /// var configuration = DataStackConfiguration(
    ///     store: .postgres(try PGConfiguration(url: pgbouncerURL), schema: "app"),
    ///     migrations: .directory(path: "migrations"))
    /// configuration.directConnection = try PGConfiguration(url: directURL)
    /// configuration.pool.usePreparedStatements = false      // PgBouncer before 1.21
    /// ```
    public var directConnection: PGConfiguration?
    /// The stack's name in its metrics: every metric the stack reports (commit queue, change feed, relay,
    /// pool, statements, replica reads) carries it as the dimension `stack`, so that two stacks in one process
    /// are told apart. `nil` (default): the store's schema, else the migrator's schema (`public` unless set
    /// there); `memory` for an in-memory store. Keep it stable across deploys: dashboards select on it.
    ///
    /// ```swift
    /// var configuration = DataStackConfiguration(store: .postgres(try PGConfiguration(url: url), schema: "app"))
    /// configuration.name = "orders"        // skyros.commit.sets{stack="orders"}, skyros.pool.leased{stack="orders",pool="primary"}, …
    /// ```
    public var name: String?

    /// The metrics backend of this stack's metrics instead of the one bootstrapped (tests use their own, so as
    /// not to bootstrap the process-wide system).
    package var metricsFactory: (any MetricsFactory)?

    /// ``name``, or its default.
    package var resolvedName: String {
        if let name { return name }
        switch self.store {
        case .inMemory: return "memory"
        case .postgres(_, let schema): return schema ?? self.migrator.schema
        }
    }

    /// Where the stack's metrics go: the `stack` dimension, and the backend.
    var metricsScope: MetricsScope {
        MetricsScope(dimensions: [("stack", self.resolvedName)], factory: self.metricsFactory)
    }

    /// A streaming replica for ``DataStack/readSnapshot(from:_:)`` with ``SnapshotSource/replica`` (PostgreSQL
    /// only; `nil`: those reads run on the primary).
    public var readReplica: ReadReplica?

    /// Creates a configuration.
    /// - Parameters:
    ///   - store: ``StoreLocation/inMemory`` or ``StoreLocation/postgres(_:schema:)``.
    ///   - migrations: the migrations to apply at start; `nil` for none.
    ///   - entities: the entity types to validate against the schema at start.
    ///   - cacheLimit: the row cache bound.
    ///   - pool: the connection pool configuration.
    public init(
        store: StoreLocation, migrations: MigrationSource? = nil, entities: [any Entity.Type] = [],
        cacheLimit: CacheLimit = .default, pool: PGConnectionPool.Configuration = .init()
    ) {
        self.store = store
        self.migrations = migrations
        self.migrator = SchemaMigrator.Configuration()
        self.entities = entities
        self.cacheLimit = cacheLimit
        self.pool = pool
    }

    /// How long ``DataStack/start(_:logger:)`` waits for PostgreSQL to accept a connection (default 30 s;
    /// `.zero`: one attempt).
    ///
    /// While the server refuses connections, does not answer, is starting up (SQLSTATE 57P03) or has no free
    /// connection slot (53300), start tries again with a backoff from 250 ms doubling up to 2 s, and logs each
    /// failed attempt at `warning` with the reason. When the time has passed it throws one
    /// `DataStackError` `.storeUnreachable` naming the target, the time and the attempts, wrapping the last
    /// `PGError`. A wrong password, a missing database, a TLS or configuration error fails at once.
    /// Each attempt is bounded by the connection's `connect_timeout` (``connectTimeout``), cut to what is left.
    ///
    /// ```swift
    /// var configuration = DataStackConfiguration(store: .postgres(try PGConfiguration(url: url)))
    /// configuration.waitForDatabase = .seconds(120)   // the database restores a snapshot at boot
    /// ```
    public var waitForDatabase: Duration = .seconds(30)

    /// How long opening one connection may take (libpq's `connect_timeout`) when the store's URL sets none:
    /// `PGConfiguration/connectTimeout` of the store and of ``directConnection`` (default 10 s; `nil`
    /// for no limit; `nil` when the store is in memory).
    ///
    /// ```swift
    /// var configuration = DataStackConfiguration(store: .postgres(try PGConfiguration(url: url)))
    /// configuration.connectTimeout = .seconds(3)
    /// ```
    public var connectTimeout: Duration? {
        get {
            guard case .postgres(let postgres, _) = self.store else { return nil }
            return postgres.connectTimeout
        }
        set {
            if case .postgres(var postgres, let schema) = self.store {
                postgres.connectTimeout = newValue
                self.store = .postgres(postgres, schema: schema)
            }
            self.directConnection?.connectTimeout = newValue
        }
    }
}
