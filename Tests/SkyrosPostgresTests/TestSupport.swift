import Foundation
import Logging
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Leases `count` connections of `pool` at once: each lease runs a query, then waits until all `count` are held,
/// so the pool must open that many whatever the scheduling.
func holdAtOnce(_ count: Int, connectionsOf pool: PGConnectionPool) async throws {
    let holding = Locked(0)
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<count {
            group.addTask {
                try await pool.withConnection { connection in
                    _ = try await connection.query("SELECT 1")
                    holding.withLock { $0 += 1 }
                    await expectEventually(within: .seconds(30)) { holding.withLock { $0 } == count }
                }
            }
        }
        try await group.waitForAll()
    }
}
