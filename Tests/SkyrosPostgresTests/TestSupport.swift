import Foundation
import Logging
import SkyrosPostgres
import Testing

/// The server under test: `DATABASE_URL`, set by `scripts/test` (or by you, e.g. for docker compose).
enum TestServer {
    static var url: String {
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"] else {
            fatalError("DATABASE_URL is not set: run the integration tests through scripts/test")
        }
        return url
    }

    static var configuration: PostgresConfiguration {
        get throws { try PostgresConfiguration(url: url) }
    }

    static func connect() async throws -> Connection {
        try await Connection.connect(to: configuration)
    }

    /// Creates a fresh schema for one test and returns its quoted name; dropped by `dropSchema`.
    static func makeSchema(_ prefix: String = "t") async throws -> String {
        let name = "\(prefix)_\(UUID().uuidString.prefix(8).lowercased())"
        let connection = try await connect()
        try await connection.execute(script: "CREATE SCHEMA \(quoteIdentifier(name))")
        await connection.close()
        return name
    }

    static func dropSchema(_ name: String) async {
        guard let connection = try? await connect() else { return }
        _ = try? await connection.execute(script: "DROP SCHEMA IF EXISTS \(quoteIdentifier(name)) CASCADE")
        await connection.close()
    }

    /// `pg_ctl -D <data>` for the throw-away cluster, when scripts/test started one.
    static var pgCtl: String? { ProcessInfo.processInfo.environment["SKYROS_TEST_PG_CTL"] }
    static var mayRestartServer: Bool {
        pgCtl != nil && ProcessInfo.processInfo.environment["SKYROS_ALLOW_SERVER_RESTART"] == "1"
    }

    /// Runs `pg_ctl <arguments>` on the test cluster and waits for it.
    static func pgCtl(_ arguments: String) throws {
        guard let pgCtl else { throw PostgresError(kind: .invalidConfiguration, message: "no pg_ctl") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "\(pgCtl) \(arguments) >/dev/null 2>&1"]
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "pg_ctl \(arguments) failed")
    }
}

/// Polls `condition` until it holds or `deadline` passes.
func eventually(
    within deadline: Duration = .seconds(10), _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let clock = ContinuousClock()
    let end = clock.now + deadline
    while clock.now < end {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}
