import Foundation
import SkyrosPostgres

/// A throw-away deployment started by `scripts/pg-fixture` for one test — a TLS-only server with a test CA, a
/// primary with a streaming standby, PgBouncer in transaction mode — and the values it printed (`URL`, `CA`,
/// `FAILOVER_URL`, `BOUNCER_URL`, …).
///
/// ```swift
/// try await PostgresFixture.with("tls") { fixture in
///     let connection = try await PGConnection.connect(to: fixture.configuration("URL"))
///     …
/// }
/// ```
public struct PostgresFixture: Sendable {
    /// The directory holding the deployment's clusters, certificates and logs.
    public let root: String
    private let values: [String: String]

    /// Whether this test run may start deployments: `scripts/with-postgres` started the test server itself
    /// (so PostgreSQL's server binaries are here). Against an external `DATABASE_URL` these tests are disabled.
    public static var isAvailable: Bool { ProcessInfo.processInfo.environment["SKYROS_TEST_PG_BIN"] != nil }

    /// Whether `pgbouncer` is installed (`scripts/test` installs it when it can).
    public static var hasPgBouncer: Bool {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        return (path.split(separator: ":").map(String.init) + ["/usr/sbin", "/usr/local/sbin"]).contains {
            FileManager.default.isExecutableFile(atPath: "\($0)/pgbouncer")
        }
    }

    /// `scripts/pg-fixture` in this package.
    static var scriptPath: String {
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { root.deleteLastPathComponent() }
        return root.appendingPathComponent("scripts/pg-fixture").path
    }

    /// Starts a deployment: `scripts/pg-fixture <kind> <new root> <arguments>`.
    public static func start(_ kind: String, _ arguments: [String] = []) async throws -> PostgresFixture {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("skyros-fixture-\(kind)-\(UUID().uuidString.prefix(8))").path
        let output = try await self.run([kind, root] + arguments)
        var values: [String: String] = [:]
        for line in output.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return PostgresFixture(root: root, values: values)
    }

    /// Starts a deployment, runs `body` with it, and stops it whatever `body` does.
    public static func with<R>(
        _ kind: String, _ arguments: [String] = [], _ body: (PostgresFixture) async throws -> R
    ) async throws -> R {
        let fixture = try await self.start(kind, arguments)
        return try await withCleanup { try await body(fixture) } cleanup: { await fixture.stop() }
    }

    /// A value the fixture printed; fails the test (by throwing) when it printed no such key.
    public func value(_ key: String) throws -> String {
        guard let value = self.values[key] else {
            throw PGError(kind: .invalidConfiguration, message: "pg-fixture printed no \(key) (printed: \(self.values.keys.sorted()))")
        }
        return value
    }

    /// A URL the fixture printed, as a configuration.
    public func configuration(_ key: String) throws -> PGConfiguration {
        try PGConfiguration(url: self.value(key))
    }

    /// Runs another step on this deployment (`promote`).
    public func run(_ command: String) async throws {
        _ = try await Self.run([command, self.root])
    }

    /// Stops every server of the deployment and deletes its directory.
    public func stop() async {
        _ = try? await Self.run(["stop", self.root])
    }

    /// Runs the script; its stdout, or an error holding its output when it fails.
    private static func run(_ arguments: [String]) async throws -> String {
        let process = try NodeProcess.spawn(self.scriptPath, arguments)
        defer { process.removeOutput() }
        let status = await process.exitStatus()
        guard status == 0 else {
            throw PGError(kind: .invalidConfiguration, message: "pg-fixture \(arguments.joined(separator: " ")) exited \(status)\n\(process.report)")
        }
        return process.output
    }
}
