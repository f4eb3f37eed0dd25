import Foundation
import Logging
import SkyrosPostgres
import SkyrosTestSupport
import Testing

extension TestServer {
    /// Runs `pg_ctl <arguments>` on the test cluster and waits for it.
    static func pgCtl(_ arguments: String) async throws {
        guard let pgCtl = self.pgCtlCommand else { throw PostgresError(kind: .invalidConfiguration, message: "no pg_ctl") }
        let status = try await runProcess("/bin/sh", ["-c", "\(pgCtl) \(arguments) >/dev/null 2>&1"])
        #expect(status == 0, "pg_ctl \(arguments) failed")
    }
}

/// Polls `condition` until it holds or `deadline` passes (``poll(within:every:_:)``).
func eventually(
    within deadline: Duration = .seconds(10), _ condition: () async throws -> Bool
) async rethrows -> Bool {
    try await poll(within: deadline, every: .milliseconds(20), condition)
}

/// Leases `count` connections of `pool` at once: each lease runs a query, then waits until all `count` are held,
/// so the pool must open that many whatever the scheduling.
func holdAtOnce(_ count: Int, connectionsOf pool: ConnectionPool) async throws {
    let holding = Locked(0)
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<count {
            group.addTask {
                try await pool.withConnection { connection in
                    _ = try await connection.query("SELECT 1")
                    holding.withLock { $0 += 1 }
                    #expect(await eventually(within: .seconds(30)) { holding.withLock { $0 } == count })
                }
            }
        }
        try await group.waitForAll()
    }
}
