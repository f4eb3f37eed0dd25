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

    /// The server under test, as SkyrosTesting's `TestDatabase` (which creates and drops the tests' schemas).
    public static var database: TestDatabase {
        get throws { TestDatabase(configuration: try self.configuration) }
    }

    /// A unique schema name (not created).
    public static func uniqueSchemaName(_ prefix: String) -> String {
        TestDatabase.uniqueSchemaName(prefix)
    }

    /// Creates a fresh schema for one test and returns its name; dropped by `dropSchema`.
    public static func makeSchema(_ prefix: String = "t") async throws -> String {
        try await self.database.createSchema(prefix: prefix).name
    }

    /// Runs `body` with a fresh schema (see ``makeSchema(_:)``) and drops it in line afterwards, whatever `body`
    /// does (SkyrosTesting's `TestDatabase.withSchema`).
    public static func withSchema<R>(_ prefix: String = "t", _ body: (String) async throws -> R) async throws -> R {
        try await self.database.withSchema(prefix: prefix) { try await body($0.name) }
    }

    /// Drops the schema and its logical-decoding capture (SkyrosTesting's `TestDatabase.dropSchema`). Records an
    /// issue when a replication slot of it could not be dropped; other failures (the server is down) are ignored,
    /// as a cleanup must not hide the test's own outcome.
    public static func dropSchema(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) async {
        do {
            try await self.database.dropSchema(name)
        } catch let error as TestSchemaError {
            Issue.record("\(error)", sourceLocation: sourceLocation)
        } catch {}
    }

    /// Waits until the logical-decoding relay of `schema` (if it has one) has written every transaction committed
    /// before this call into the change log, as the trigger source does at commit: its slot's confirmed position
    /// reaches the current WAL position. Records an issue when that takes longer than the deadline.
    public static func settleCapture(schema: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await self.withConnection { connection in
            let names = try await connection.query(TestDatabase.capturePublicationsSQL(schema: schema)).map { try $0.decode(String.self, at: 0) }
            guard !names.isEmpty else { return }
            let position = try await connection.query("SELECT pg_current_wal_lsn()::text")[0].decode(String.self, at: 0)
            let array = "{" + names.map { "\"" + $0 + "\"" }.joined(separator: ",") + "}"
            try await expectEventually("the relay of \(schema) did not reach \(position)", sourceLocation: sourceLocation) {
                try await connection.query("""
                    SELECT coalesce(bool_and(confirmed_flush_lsn >= \(position)::pg_lsn), false) FROM pg_replication_slots
                    WHERE slot_name = ANY(\(array)::text[])
                    """)[0].decode(Bool.self, at: 0)
            }
        }
    }

    /// Drops the publications of `schema`'s capture and their replication slots (SkyrosTesting's
    /// `TestDatabase.dropSchema` does this before it drops a schema), for a schema a test does not drop, such as
    /// `public`. Records an issue when a slot could not be dropped within 10 s.
    public static func dropLogicalCapture(
        schema: String, on connection: PGConnection, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        do {
            try await TestDatabase.dropLogicalCapture(schema: schema, on: connection)
        } catch let error as TestSchemaError {
            Issue.record("\(error)", sourceLocation: sourceLocation)
        } catch {}
    }

    /// Whether the tests may use logical decoding: scripts/test starts the server with `wal_level=logical` unless
    /// `SKYROS_TEST_WAL_LEVEL=replica` (CI's ThreadSanitizer pass, which runs every stack on the trigger source),
    /// and runs the suites that create replication slots in a pass of their own, after a parallel pass with
    /// `SKYROS_TEST_LOGICAL=off` (see scripts/test for why). Suites about logical replication itself are enabled
    /// only when this is true; suites that take a capture source run on both sources then, on triggers otherwise.
    public static var allowsLogicalDecoding: Bool {
        let environment = ProcessInfo.processInfo.environment
        return environment["SKYROS_TEST_WAL_LEVEL"] != "replica" && environment["SKYROS_TEST_LOGICAL"] != "off"
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

extension TestServer {
    /// Starts the throw-away cluster after a test stopped it (`pgCtl("stop …")`), with the options it was
    /// started with (port, socket, settings): `pg_ctl start` alone would read only `postgresql.conf`, while
    /// `pg_ctl restart` reuses `postmaster.opts` by itself.
    public static func startStoppedServer(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        guard let pgCtl = self.pgCtlCommand, let data = pgCtl.components(separatedBy: " -D ").last else {
            throw PGError(kind: .invalidConfiguration, message: "no pg_ctl")
        }
        // postmaster.opts holds the server binary, then each option double-quoted, as `pg_ctl -o` takes them.
        try await self.pgCtl(
            "start -w -t 60 -o \"$(cut -d' ' -f2- \(data)/postmaster.opts)\"", sourceLocation: sourceLocation)
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
