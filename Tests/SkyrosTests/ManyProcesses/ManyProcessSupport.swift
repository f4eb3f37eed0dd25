import Foundation
import Skyros
import SkyrosTestFixtures
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Schemas, stacks and child processes for the many-processes tests.
enum ManyProcessHarness {
    static var databaseURL: String {
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"] else {
            fatalError("DATABASE_URL is not set: run the integration tests through scripts/test")
        }
        return url
    }

    static var configuration: PostgresConfiguration { get throws { try PostgresConfiguration(url: self.databaseURL) } }


    /// Runs `body` with a fresh schema holding `mp_items` and `mp_done`; drops it afterwards.
    static func withSchema<R>(_ body: (String) async throws -> R) async throws -> R {
        let schema = "mp_\(UUID().uuidString.prefix(8).lowercased())"
        let connection = try await Connection.connect(to: try self.configuration)
        _ = try await connection.execute(script: """
            CREATE SCHEMA \(quoteIdentifier(schema));
            CREATE TABLE \(quoteIdentifier(schema)).mp_items (id bigint PRIMARY KEY, owner integer NOT NULL,
                                                             value integer NOT NULL, title text NOT NULL);
            CREATE TABLE \(quoteIdentifier(schema)).mp_done (id integer PRIMARY KEY);
            """)
        do {
            let result = try await body(schema)
            _ = try await connection.execute(script: "DROP SCHEMA \(quoteIdentifier(schema)) CASCADE")
            await connection.close()
            return result
        } catch {
            _ = try? await connection.execute(script: "DROP SCHEMA \(quoteIdentifier(schema)) CASCADE")
            await connection.close()
            throw error
        }
    }

    /// A stack in this process on `schema`.
    static func stack(
        schema: String, changeFeed: (inout ChangeFeedConfiguration) -> Void = { _ in }
    ) async throws -> DataStack {
        var configuration = DataStackConfiguration(
            store: .postgres(try self.configuration, schema: schema), entities: [MPItem.self, MPDone.self])
        configuration.pool.leaseTimeout = .seconds(30)
        changeFeed(&configuration.changeFeed)
        return try await DataStack.start(configuration)
    }

    /// Starts `skyros-test-node <arguments>` with its stdout in a temporary file.
    static func spawn(_ arguments: [String]) throws -> NodeProcess { try NodeProcess.spawn(arguments) }

    /// Starts `nodes` `mp-writer` processes on `schema`, each writing `rows` rows (node `n` seeded `seed + n`).
    static func spawnWriters(schema: String, nodes: Int, rows: Int, seed: Int) throws -> [NodeProcess] {
        try (0..<nodes).map { node in
            try self.spawn([
                "mp-writer", "--schema", schema, "--node", String(node), "--nodes", String(nodes), "--rows", String(rows),
                "--seed", String(seed + node),
            ])
        }
    }

    /// Polls `condition` until it holds or `deadline` passes (see ``poll(within:every:_:)``).
    static func eventually(within deadline: Duration = .seconds(10), _ condition: () async throws -> Bool) async rethrows -> Bool {
        try await poll(within: deadline, every: .milliseconds(20), condition)
    }

    /// Terminates the backend of the listener named `applicationName`; returns how many were terminated.
    static func terminateListener(applicationName: String) async throws -> Int {
        let connection = try await Connection.connect(to: try self.configuration)
        return try await withCleanup {
            let rows = try await connection.query(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = \(applicationName)")
            return try rows.first?.decode(Int.self, at: 0) ?? 0
        } cleanup: {
            await connection.close()
        }
    }
}
