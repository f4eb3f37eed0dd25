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

    /// Drops the schema, and the logical-decoding capture of its tables: the publication and the replication
    /// slot of the same name live outside the schema, and a slot left behind would keep WAL for ever (and take
    /// one of the server's slots).
    public static func dropSchema(_ name: String) async {
        guard let connection = try? await self.connect() else { return }
        await self.dropLogicalCapture(schema: name, on: connection)
        _ = try? await connection.execute(script: "DROP SCHEMA IF EXISTS \(quoteIdentifier(name)) CASCADE")
        await connection.close()
    }

    /// The publications of `schema`'s capture: by their comment, or because they publish its tables. Read from
    /// the catalogs, not `pg_publication_tables`, whose function fails on a publication dropped meanwhile.
    static func publicationsSQL(schema: String) -> PGQuery {
        """
        SELECT p.pubname::text FROM pg_publication AS p
        WHERE obj_description(p.oid, 'pg_publication') = \("skyros change capture of schema " + schema)
           OR EXISTS (SELECT FROM pg_publication_rel AS r JOIN pg_class AS c ON c.oid = r.prrelid
                      JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE r.prpubid = p.oid AND n.nspname = \(schema))
        """
    }

    /// Waits until the logical-decoding relay of `schema` (if it has one) has written every transaction committed
    /// before this call into the change log, as the trigger source does at commit: its slot's confirmed position
    /// reaches the current WAL position. Records an issue when that takes longer than the deadline.
    public static func settleCapture(schema: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await self.withConnection { connection in
            let names = try await connection.query(Self.publicationsSQL(schema: schema)).map { try $0.decode(String.self, at: 0) }
            guard !names.isEmpty else { return }
            let position = try await connection.query("SELECT pg_current_wal_lsn()::text")[0].decode(String.self, at: 0)
            let array = "{" + names.map { "\"" + $0 + "\"" }.joined(separator: ",") + "}"
            try await eventually("the relay of \(schema) did not reach \(position)", sourceLocation: sourceLocation) {
                try await connection.query("""
                    SELECT coalesce(bool_and(confirmed_flush_lsn >= \(position)::pg_lsn), false) FROM pg_replication_slots
                    WHERE slot_name = ANY(\(array)::text[])
                    """)[0].decode(Bool.self, at: 0)
            }
        }
    }

    /// Drops the publications of `schema`'s capture (their comment names it: `skyros change capture of schema
    /// <schema>`) or that publish its tables, and the replication slots named like them (a capture's slot and
    /// publication share their name). A stack still running (one a test shuts down in a
    /// task it does not wait for) may stream the slot again after its walsender is ended, so the slot is
    /// dropped in a loop: end the walsender, drop, for up to 10 s.
    public static func dropLogicalCapture(schema: String, on connection: PGConnection) async {
        let names = (try? await connection.query(Self.publicationsSQL(schema: schema)).map { try $0.decode(String.self, at: 0) }) ?? []
        for name in names {
            _ = try? await connection.execute(script: "DROP PUBLICATION IF EXISTS \(quoteIdentifier(name))")
            let dropped = await poll(within: .seconds(10), every: .milliseconds(20)) {
                _ = try? await connection.query(
                    "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = \(name) AND active_pid IS NOT NULL")
                _ = try? await connection.query(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = \(name) AND NOT active")
                return (try? await connection.query("SELECT count(*)::int FROM pg_replication_slots WHERE slot_name = \(name)")
                    .first?.decode(Int.self, at: 0)) == 0
            }
            if !dropped { Issue.record("the replication slot \(name) of schema \(schema) could not be dropped within 10 s") }
        }
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
