import SkyrosPostgres

extension PostgresStore {
    /// The connection a commit queue's drain holds while it runs (see ``withCommitConnection(_:)``).
    @TaskLocal package static var commitConnection: PGConnection?

    /// Runs `body` — a commit queue's drain — holding one pooled connection, with that connection's thread as
    /// the task's preferred executor.
    ///
    /// Each group then goes out on the thread that ran the one before, with no hand-off: waking the
    /// connection's thread for every group and being woken back on the shared pool, behind the writers filling
    /// the queue, can take longer on a busy machine than the group's work on the server.
    /// If no connection can be leased (the server is down, the pool shut), `body` runs without one: every
    /// group then leases its own and fails or retries as usual.
    /// `leased`: a connection ``PGConnectionPool/leaseIdleNow()`` leased for it (the drain started on its thread).
    package func withCommitConnection(leased: PGConnection? = nil, _ body: () async -> Void) async {
        var ran = false
        let run = { (connection: PGConnection) in
            ran = true
            await Self.$commitConnection.withValue(connection) { await body() }
        }
        do {
            if let leased {
                try await self.pool.withConnection(leased: leased, run)
            } else {
                try await self.pool.withConnection(run)
            }
        } catch {
            // Not leased, so `body` has not run.
        }
        if !ran { await body() }
    }

    /// Whether the drain holds a connection that another task is waiting for (every connection of the pool is
    /// leased): the drain then gives it back between two groups.
    package var commitConnectionIsWanted: Bool {
        Self.commitConnection != nil && self.pool.statistics.waiting > 0
    }

    /// Runs `body` on the drain's connection while it is open, else on one leased from the pool (the drain's
    /// connection was lost: a retry needs a new one; the dead one goes back to the pool, which discards it,
    /// when the drain ends).
    func withCommitLease<R>(_ body: (PGConnection) async throws -> R) async throws -> R {
        if let connection = Self.commitConnection, !(await connection.isClosed) {
            return try await connection.withOwnExecutor { try await body(connection) }
        }
        return try await self.pool.withConnection(body)
    }
}
