import Logging
import SkyrosPostgres
import SkyrosStore
import SkyrosStack
import SkyrosObservation
import SkyrosSync

/// A streaming replica of the stack's database that ``DataStack/readSnapshot(from:_:)`` can read from, to take
/// read load off the primary without giving up read-your-writes.
///
/// A replica read first asks the primary how far its write-ahead log goes (`pg_current_wal_insert_lsn()`, no
/// table access), then waits until the replica has replayed that far, so it sees every transaction committed
/// before the read started — this process's durable writes included. When the replica lags longer than
/// ``maximumLagWait``, or cannot be reached, the read runs on the primary instead (logged, and counted by
/// swift-metrics as `skyros.replica.fallbacks`; reads that ran on the replica: `skyros.replica.reads`). With
/// `synchronous_commit = off` on the primary, the last commits reach the replica only once the WAL writer has
/// written them (`wal_writer_delay`, 200 ms by default): set ``maximumLagWait`` above it.
///
/// ```swift
/// var configuration = DataStackConfiguration(store: .postgres(try PGConfiguration(url: primaryURL)))
/// configuration.readReplica = ReadReplica(try PGConfiguration(url: replicaURL))
/// let stack = try await DataStack.start(configuration)
/// let report = try await stack.readSnapshot(from: .replica) { reader in
///     try await reader.fetch(FetchDescriptor<Order>(predicate: #Predicate { $0.total > 1000 }))
/// }
/// ```
public struct ReadReplica: Sendable {
    /// The replica (a hot standby). Use `target_session_attrs=prefer-standby` with a host list to spread
    /// reads over several standbys.
    public var postgres: PGConfiguration
    /// The replica pool's bounds (its connections open when first needed).
    public var pool: PGConnectionPool.Configuration
    /// How long a read waits for the replica to replay the primary's log before reading the primary.
    public var maximumLagWait: Duration

    /// Creates a replica configuration.
    public init(
        _ postgres: PGConfiguration, pool: PGConnectionPool.Configuration = .init(maximumConnections: 4),
        maximumLagWait: Duration = .seconds(1)
    ) {
        self.postgres = postgres
        self.pool = pool
        self.maximumLagWait = maximumLagWait
    }
}

/// Where ``DataStack/readSnapshot(from:_:)`` reads.
public enum SnapshotSource: Sendable, Hashable {
    /// The primary, through the stack's pool.
    case primary
    /// The stack's ``ReadReplica`` once it caught up with the primary (the primary when none is configured,
    /// it lags too long, or it cannot be reached).
    case replica
}

/// Counters of a stack's replica reads.
public struct ReplicaReadStatistics: Sendable, Hashable {
    /// Snapshot reads that ran on the replica.
    public package(set) var replicaReads = 0
    /// Replica reads that ran on the primary instead (the replica lagged or could not be reached).
    public package(set) var fallbacks = 0
}

/// The replica's pool and the waiting for it to catch up.
final class ReplicaReader: Sendable {
    let configuration: ReadReplica
    let pool: PGConnectionPool
    private let replicaReads: ReportedCounter
    private let fallbacks: ReportedCounter

    init(_ configuration: ReadReplica, logger: Logger, metrics: MetricsScope = MetricsScope()) {
        self.configuration = configuration
        self.pool = PGConnectionPool(
            configuration: configuration.pool, postgres: configuration.postgres, logger: logger,
            metrics: metrics.adding("pool", "replica"))
        self.replicaReads = ReportedCounter("skyros.replica.reads", in: metrics)
        self.fallbacks = ReportedCounter("skyros.replica.fallbacks", in: metrics)
    }

    var counters: ReplicaReadStatistics {
        ReplicaReadStatistics(replicaReads: self.replicaReads.current, fallbacks: self.fallbacks.current)
    }

    /// Runs `body` on a replica connection once the replica has replayed the primary's log up to `lsn`; `nil`
    /// (without running `body`) when it does not within ``ReadReplica/maximumLagWait`` or cannot be reached.
    /// Errors of `body` itself are thrown.
    func read<R>(caughtUpTo lsn: String, logger: Logger, _ body: (PGConnection) async throws -> R) async throws -> R? {
        var bodyStarted = false
        var lagging = false
        do {
            let result = try await self.pool.withConnection { connection -> R? in
                guard try await self.waitForReplay(to: lsn, on: connection) else {
                    lagging = true
                    return nil
                }
                bodyStarted = true
                return try await body(connection)
            }
            if lagging {
                self.fellBack(logger, "the read replica lags more than \(self.configuration.maximumLagWait) behind the primary", nil)
                return nil
            }
            self.replicaReads.increment()
            return result
        } catch where !bodyStarted && !(error is CancellationError) {
            self.fellBack(logger, "the read replica cannot be reached", error)
            return nil
        }
    }

    /// Polls the replica's replay position (1 ms, growing to 10 ms) until it reaches `lsn` or the wait is over.
    /// A server that is not in recovery (a replica promoted since) counts as caught up.
    private func waitForReplay(to lsn: String, on connection: PGConnection) async throws -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + self.configuration.maximumLagWait
        var interval = Duration.milliseconds(1)
        while true {
            let rows = try await connection.query(
                "SELECT coalesce(pg_last_wal_replay_lsn() >= \(lsn)::pg_lsn, NOT pg_is_in_recovery())")
            if try rows.first?.decode(Bool.self, at: 0) == true { return true }
            if clock.now >= deadline { return false }
            try await Task.sleep(for: min(interval, deadline - clock.now))
            interval = min(interval * 2, .milliseconds(10))
        }
    }

    private func fellBack(_ logger: Logger, _ reason: String, _ error: (any Error)?) {
        self.fallbacks.increment()
        var metadata: Logger.Metadata = [:]
        if let error { metadata["skyros.error"] = "\(error)" }
        logger.warning("\(reason); reading the primary", metadata: metadata)
    }

    func shutdown() async { await self.pool.shutdown() }
}
