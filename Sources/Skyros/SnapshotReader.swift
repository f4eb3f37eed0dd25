import SkyrosPostgres
@_spi(Benchmarks) import SkyrosStore
import SkyrosStack
import SkyrosObservation
import SkyrosSync

/// Reads that all see one consistent snapshot of the database: they run in one `REPEATABLE READ`
/// transaction (see `DataStack/readSnapshot(_:)`).
///
/// A snapshot reader reads committed data only: it bypasses the main context's cache and does not include
/// this process's writes that are still queued for commit.
public struct SnapshotReader: Sendable {
    enum Source: Sendable {
        case postgres(PGConnection, schema: String?)
        case store(any Store)
    }

    let source: Source

    /// Runs `body` in one read-only `REPEATABLE READ` transaction on `connection`.
    static func run<R>(on connection: PGConnection, schema: String?, _ body: (SnapshotReader) async throws -> R) async throws -> R {
        try await connection.withTransaction(isolation: .repeatableRead) { connection in
            _ = try await connection.execute(script: "SET TRANSACTION READ ONLY")
            return try await body(SnapshotReader(source: .postgres(connection, schema: schema)))
        }
    }

    /// The rows matching `descriptor`, as of the snapshot.
    /// - Throws: `QueryError` for an untranslatable predicate, `PGError`.
    public func fetch<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> [T] {
        switch self.source {
        case .postgres(let connection, let schema):
            let query = try SQLQueryBuilder.select(descriptor, schema: schema, includeVersion: true)
            return try RowDecoder<T>().decode(try await connection.query(query)).map(\.value)
        case .store(let store):
            return try await store.fetch(descriptor).map(\.value)
        }
    }

    /// The first row matching `descriptor`, as of the snapshot.
    public func first<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> T? {
        var descriptor = descriptor
        descriptor.fetchLimit = 1
        return try await self.fetch(descriptor).first
    }

    /// The number of rows matching `descriptor`, as of the snapshot.
    public func count<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> Int {
        switch self.source {
        case .postgres(let connection, let schema):
            let rows = try await connection.query(try SQLQueryBuilder.count(descriptor, schema: schema))
            return try rows.first?.decode(Int.self, at: 0) ?? 0
        case .store(let store):
            return try await store.count(descriptor)
        }
    }
}

extension DataStack {
    /// Runs several reads against one consistent snapshot: on PostgreSQL, one `REPEATABLE READ` transaction,
    /// so a commit by anyone in the middle is not seen by any of them.
    ///
    /// ```swift
    /// let (orders, lines) = try await stack.readSnapshot { reader in
    ///     (try await reader.fetch(FetchDescriptor<Order>()), try await reader.count(FetchDescriptor<OrderLine>()))
    /// }
    /// let report = try await stack.readSnapshot(from: .replica) { try await $0.fetch(FetchDescriptor<Order>()) }
    /// ```
    /// Reads committed data only (not the main context's cache or queued writes). On the in-memory store each
    /// read is atomic but the reads are not isolated from each other.
    ///
    /// - Parameters:
    ///   - source: ``SnapshotSource/primary`` (default), or ``SnapshotSource/replica``: the configured
    ///     ``ReadReplica`` once it has replayed everything committed before the read started (see there), else
    ///     the primary.
    ///   - body: the reads.
    /// - Throws: the body's error, `PGError`.
    public func readSnapshot<R>(from source: SnapshotSource = .primary, _ body: (SnapshotReader) async throws -> R) async throws -> R {
        guard let postgres = self.postgresStore else {
            return try await body(SnapshotReader(source: .store(self.store)))
        }
        if source == .replica, let replica = self.replica {
            // How far the primary's log goes now: every commit acknowledged before this read is at or before it
            // (the insert position: with synchronous_commit = off an acknowledged commit may not be written yet).
            let lsn = try await postgres.pool.withConnection {
                try await $0.query("SELECT pg_current_wal_insert_lsn()::text")[0].decode(String.self, at: 0)
            }
            let read = try await replica.read(caughtUpTo: lsn, logger: self.logger) {
                try await SnapshotReader.run(on: $0, schema: postgres.schema, body)
            }
            if let read { return read }
        }
        return try await postgres.pool.withConnection { try await SnapshotReader.run(on: $0, schema: postgres.schema, body) }
    }

    /// Counters of ``readSnapshot(from:_:)`` on the replica: reads it served, and reads that went to the primary
    /// because it lagged or could not be reached.
    ///
    /// ```swift
    /// let replica = stack.replicaReadStatistics
    /// logger.info("replica reads", metadata: ["served": "\(replica.replicaReads)", "fallbacks": "\(replica.fallbacks)"])
    /// ```
    public var replicaReadStatistics: ReplicaReadStatistics { self.replica?.counters ?? ReplicaReadStatistics() }
}
