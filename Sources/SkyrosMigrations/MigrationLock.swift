internal import Crypto
import Logging
import SkyrosPostgres

/// The session-level advisory lock that serialises migrators working on the same history table.
///
/// The key is the first 8 bytes of SHA-256("<database>/<schema>/<table>"). It is acquired by polling
/// `pg_try_advisory_lock` rather than blocking in `pg_advisory_lock`: a blocked waiter sits in a statement
/// whose snapshot a peer's `CREATE INDEX CONCURRENTLY` must wait for (an undetected deadlock), and a blocking
/// call cannot honour a deadline. Between polls the waiting connection is idle, outside any transaction.
struct MigrationLock: Sendable {
    let key: Int64
    let name: String

    init(database: String, schema: String, table: String) {
        self.name = "\(database)/\(schema)/\(table)"
        let digest = SHA256.hash(data: Array(self.name.utf8))
        var key: UInt64 = 0
        for byte in digest.prefix(8) { key = key << 8 | UInt64(byte) }
        self.key = Int64(bitPattern: key)
    }

    /// Polls until the lock is held or `timeout` passes; returns how long it waited.
    /// - Throws: ``MigrationError`` of kind ``MigrationError/Kind/lockTimeout`` naming the holder when known.
    func acquire(
        on connection: PGConnection, timeout: Duration, logger: Logger, waiting: () -> Void
    ) async throws -> Duration {
        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start + timeout
        var interval = Duration.milliseconds(25)
        var logged = false
        while true {
            let rows = try await self.run(on: connection, "SELECT pg_try_advisory_lock(\(self.key))")
            if try rows.first?.decode(Bool.self, at: 0) == true {
                let waited = clock.now - start
                logger.debug("migration lock acquired", metadata: ["skyros.migrations.lock": "\(self.name)"])
                return waited
            }
            waiting()
            if !logged {
                logger.info(
                    "waiting for the migration lock held by another migrator",
                    metadata: ["skyros.migrations.lock": "\(self.name)"])
                logged = true
            }
            let now = clock.now
            if now >= deadline {
                let holder = (try? await self.holder(on: connection)) ?? nil
                var message = "timed out after \(timeout) waiting for the migration lock on \(self.name)"
                if let holder { message += "; it is held by \(holder)" }
                message += " (raise the wait with --lock-wait-timeout / Configuration.lockWaitTimeout)"
                throw MigrationError(kind: .lockTimeout, message: message)
            }
            // Short, growing waits with jitter so that many runners do not poll in lockstep.
            let jitter = Duration.milliseconds(Int64.random(in: 0...20))
            try await Task.sleep(for: min(interval + jitter, deadline - now))
            interval = min(interval * 2, .milliseconds(500))
        }
    }

    /// Releases the lock; errors are ignored (a closed session has released it already).
    func release(on connection: PGConnection) async {
        _ = try? await connection.cleanUp("SELECT pg_advisory_unlock(\(self.key))")
    }

    /// A description of the session holding the lock, from `pg_locks` and `pg_stat_activity`.
    private func holder(on connection: PGConnection) async throws -> String? {
        let bits = UInt64(bitPattern: self.key)
        let high = Int64(bits >> 32)
        let low = Int64(bits & 0xffff_ffff)
        let rows = try await connection.query(
            """
            SELECT l.pid, coalesce(a.application_name, ''), coalesce(host(a.client_addr), 'local'),
                   coalesce(a.usename::text, ''), coalesce(a.state, '')
            FROM pg_catalog.pg_locks l LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
              AND l.classid::bigint = \(high) AND l.objid::bigint = \(low)
              AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
            LIMIT 1
            """)
        guard let row = rows.first else { return nil }
        let pid = try row.decode(Int32.self, at: 0)
        let application = try row.decode(String.self, at: 1)
        let client = try row.decode(String.self, at: 2)
        let user = try row.decode(String.self, at: 3)
        let state = try row.decode(String.self, at: 4)
        return "backend pid \(pid) (user \(user), application \"\(application)\", client \(client), state \(state))"
    }

    private func run(on connection: PGConnection, _ query: PGQuery) async throws -> PGRows {
        do {
            return try await connection.query(query)
        } catch let error as PGError {
            throw MigrationError(
                kind: .history, message: "cannot take the migration lock: \(error.message)", underlying: error)
        }
    }
}
