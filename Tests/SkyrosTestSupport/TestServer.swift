import Foundation
import SkyrosPostgres
import Testing

/// The server under test: `DATABASE_URL`, set by `scripts/test` (or by you, e.g. for docker compose). Shared by
/// the test targets; each adds what only it needs in an extension.
public enum TestServer {
    public static var url: String {
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"] else {
            fatalError("DATABASE_URL is not set: run the integration tests through scripts/test")
        }
        return url
    }

    public static var configuration: PGConfiguration {
        get throws { try PGConfiguration(url: self.url) }
    }

    public static func connect() async throws -> PGConnection {
        try await PGConnection.connect(to: self.configuration)
    }

    /// Runs `body` on a new connection to the server under test and closes it in line, whatever `body` does
    /// (not from a detached task the test does not wait for).
    public static func withConnection<R>(_ body: (PGConnection) async throws -> R) async throws -> R {
        let connection = try await self.connect()
        return try await withCleanup { try await body(connection) } cleanup: { await connection.close() }
    }

    /// A unique schema name (not created).
    public static func uniqueSchemaName(_ prefix: String) -> String {
        "\(prefix)_\(UUID().uuidString.prefix(8).lowercased())"
    }

    /// Creates a fresh schema for one test and returns its name; dropped by `dropSchema`.
    public static func makeSchema(_ prefix: String = "t") async throws -> String {
        let name = self.uniqueSchemaName(prefix)
        let connection = try await self.connect()
        try await connection.execute(script: "CREATE SCHEMA \(quoteIdentifier(name))")
        await connection.close()
        return name
    }

    /// Runs `body` with a fresh schema (see ``makeSchema(_:)``) and drops it in line afterwards, whatever `body`
    /// does (not from a detached task the test does not wait for).
    public static func withSchema<R>(_ prefix: String = "t", _ body: (String) async throws -> R) async throws -> R {
        let name = try await self.makeSchema(prefix)
        return try await withCleanup { try await body(name) } cleanup: { await self.dropSchema(name) }
    }

    public static func dropSchema(_ name: String) async {
        guard let connection = try? await self.connect() else { return }
        _ = try? await connection.execute(script: "DROP SCHEMA IF EXISTS \(quoteIdentifier(name)) CASCADE")
        await connection.close()
    }

    /// `pg_ctl -D <data>` for the throw-away cluster, when scripts/test started one.
    public static var pgCtlCommand: String? { ProcessInfo.processInfo.environment["SKYROS_TEST_PG_CTL"] }

    /// Whether a test may restart the server (scripts/test allows it for the suites it runs alone).
    public static var mayRestartServer: Bool {
        self.pgCtlCommand != nil && ProcessInfo.processInfo.environment["SKYROS_ALLOW_SERVER_RESTART"] == "1"
    }

    /// Runs `pg_ctl <arguments>` on the throw-away cluster and waits for it; records an issue when it fails.
    /// Throws when scripts/test started no cluster (guard with ``mayRestartServer``).
    public static func pgCtl(_ arguments: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        guard let pgCtl = self.pgCtlCommand else { throw PGError(kind: .invalidConfiguration, message: "no pg_ctl") }
        let status = try await runProcess("/bin/sh", ["-c", "\(pgCtl) \(arguments) >/dev/null 2>&1"])
        #expect(status == 0, "pg_ctl \(arguments) failed", sourceLocation: sourceLocation)
    }
}

/// Runs `body`, then `cleanup` in line, whether `body` returned or threw (an `async` `defer`: a `defer` can only
/// start a task the test does not wait for).
public func withCleanup<R>(_ body: () async throws -> R, cleanup: () async -> Void) async throws -> R {
    do {
        let result = try await body()
        await cleanup()
        return result
    } catch {
        await cleanup()
        throw error
    }
}
