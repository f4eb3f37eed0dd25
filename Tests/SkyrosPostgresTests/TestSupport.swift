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
    static func pgCtl(_ arguments: String) async throws {
        guard let pgCtl else { throw PostgresError(kind: .invalidConfiguration, message: "no pg_ctl") }
        let status = try await runProcess("/bin/sh", ["-c", "\(pgCtl) \(arguments) >/dev/null 2>&1"])
        #expect(status == 0, "pg_ctl \(arguments) failed")
    }
}

/// Runs a process and awaits its exit status.
///
/// Uses `posix_spawn` + `waitpid` on a dedicated thread: Foundation's `Process` termination monitoring
/// never fired in the test process here (neither `waitUntilExit()` nor `terminationHandler`).
func runProcess(_ path: String, _ arguments: [String]) async throws -> Int32 {
    var pid: pid_t = 0
    let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    let rc = posix_spawn(&pid, path, nil, nil, argv, environ)
    guard rc == 0 else { throw PostgresError(kind: .invalidConfiguration, message: "posix_spawn \(path) failed: \(rc)") }
    let child = pid
    return await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            var status: Int32 = 0
            while waitpid(child, &status, 0) < 0 && errno == EINTR {}
            // WIFEXITED/WEXITSTATUS are macros: decode by hand.
            let exited = status & 0x7F == 0
            continuation.resume(returning: exited ? (status >> 8) & 0xFF : 128 + (status & 0x7F))
        }
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
