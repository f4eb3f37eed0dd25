import Foundation
import Skyros
import SkyrosTestFixtures
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Schemas, stacks and child processes for the many-processes tests.
enum ManyProcessHarness {
    /// Runs `body` with a fresh schema holding `mp_items` and `mp_done`; drops it afterwards.
    static func withSchema<R>(_ body: (String) async throws -> R) async throws -> R {
        try await TestServer.withSchema("mp") { schema in
            try await TestServer.withConnection { connection in
                _ = try await connection.execute(script: """
                    CREATE TABLE \(quoteIdentifier(schema)).mp_items (id bigint PRIMARY KEY, owner integer NOT NULL,
                                                                     value integer NOT NULL, title text NOT NULL);
                    CREATE TABLE \(quoteIdentifier(schema)).mp_done (id integer PRIMARY KEY);
                    """)
            }
            return try await body(schema)
        }
    }

    /// A stack in this process on `schema`.
    static func stack(
        schema: String, changeFeed: (inout ChangeFeedConfiguration) -> Void = { _ in }
    ) async throws -> DataStack {
        var configuration = DataStackConfiguration(
            store: .postgres(try TestServer.configuration, schema: schema), entities: [MPItem.self, MPDone.self])
        configuration.pool.leaseTimeout = .seconds(30)
        changeFeed(&configuration.changeFeed)
        let (logger, handler) = RecordingLogHandler.logger(label: "skyros.mp")
        var recorded = logger
        recorded.logLevel = .info
        let stack = try await DataStack.start(configuration, logger: recorded)
        self.logs.withLock { $0[ObjectIdentifier(stack)] = handler }
        return stack
    }

    /// What each stack made by ``stack(schema:changeFeed:)`` logged at `info` and above, for a test's
    /// diagnostics (its relay's and its feed's failures, which a failing wait needs to say where it stuck).
    private static let logs = Locked<[ObjectIdentifier: RecordingLogHandler]>([:])

    /// The last `count` records of `stack`'s log (see ``logs``).
    static func log(of stack: DataStack, last count: Int = 40) -> [String] {
        guard let handler = self.logs.withLock({ $0[ObjectIdentifier(stack)] }) else { return [] }
        return handler.entries.suffix(count).map { "\($0.level) \($0.text)" }
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

    /// Terminates the backend of the listener named `applicationName`; returns how many were terminated.
    static func terminateListener(applicationName: String) async throws -> Int {
        let connection = try await PGConnection.connect(to: try TestServer.configuration)
        return try await withCleanup {
            let rows = try await connection.query(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = \(applicationName)")
            return try rows.first?.decode(Int.self, at: 0) ?? 0
        } cleanup: {
            await connection.close()
        }
    }
}
