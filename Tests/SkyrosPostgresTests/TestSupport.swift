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
