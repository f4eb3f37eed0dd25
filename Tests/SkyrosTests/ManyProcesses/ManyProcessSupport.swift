import Foundation
import Skyros
import SkyrosPostgres
import Testing

/// The row the many-processes tests share with `skyros-test-node` (same table and columns as its `MPItem`).
struct MPItem: Entity, Equatable {
    var id: Int64
    var owner: Int
    var value: Int
    var title: String

    static let tableName = "mp_items"
    static let columns: [EntityColumn<MPItem>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.owner, "owner"), EntityColumn(\.value, "value"), EntityColumn(\.title, "title"),
    ]
}

/// A node that finished writing (the nodes' `MPDone`).
struct MPDone: Entity, Equatable {
    var id: Int
    static let tableName = "mp_done"
    static let columns: [EntityColumn<MPDone>] = [EntityColumn(\.id, "id")]
}

/// Schemas, stacks and child processes for the many-processes tests.
enum ManyProcessHarness {
    static var databaseURL: String {
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"] else {
            fatalError("DATABASE_URL is not set: run the integration tests through scripts/test")
        }
        return url
    }

    static var configuration: PostgresConfiguration { get throws { try PostgresConfiguration(url: self.databaseURL) } }

    /// `skyros-test-node`, built next to the test bundle (whatever the scratch path or sanitizer).
    static var nodePath: String { TestNode.executablePath }

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
    static func stack(schema: String) async throws -> DataStack {
        var configuration = DataStackConfiguration(
            store: .postgres(try self.configuration, schema: schema), entities: [MPItem.self, MPDone.self])
        configuration.pool.leaseTimeout = .seconds(30)
        return try await DataStack.start(configuration)
    }

    /// Starts `skyros-test-node <arguments>` with its stdout in a temporary file.
    static func spawn(_ arguments: [String]) throws -> ChildNode {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("skyros-mp-\(UUID().uuidString).out").path
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = ([self.nodePath] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let rc = posix_spawn(&pid, self.nodePath, &actions, nil, argv, environ)
        guard rc == 0 else { throw ChildNodeError(description: "posix_spawn \(self.nodePath) failed: \(rc)") }
        return ChildNode(pid: pid, outputPath: output)
    }

    /// Polls `condition` every 20 ms until it holds or `deadline` passes.
    static func eventually(within deadline: Duration = .seconds(10), _ condition: () async throws -> Bool) async rethrows -> Bool {
        let end = ContinuousClock.now + deadline
        while ContinuousClock.now < end {
            if try await condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return try await condition()
    }

    /// Terminates the backend of the listener named `applicationName`; returns how many were terminated.
    static func terminateListener(applicationName: String) async throws -> Int {
        let connection = try await Connection.connect(to: try self.configuration)
        defer { Task { await connection.close() } }
        let rows = try await connection.query(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = \(applicationName)")
        return try rows.first?.decode(Int.self, at: 0) ?? 0
    }
}

struct ChildNodeError: Error, CustomStringConvertible {
    let description: String
}

/// A running `skyros-test-node`.
struct ChildNode: Sendable {
    let pid: pid_t
    let outputPath: String

    /// Its stdout so far.
    var output: String { (try? String(contentsOfFile: self.outputPath, encoding: .utf8)) ?? "" }

    var lines: [String] { self.output.split(separator: "\n").map(String.init) }

    /// Waits for it to exit (on a thread: waitpid blocks) and returns its exit status (128+signal when killed).
    func exitStatus() async -> Int32 {
        let child = self.pid
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var status: Int32 = 0
                while waitpid(child, &status, 0) < 0 && errno == EINTR {}
                let exited = status & 0x7F == 0
                continuation.resume(returning: exited ? (status >> 8) & 0xFF : 128 + (status & 0x7F))
            }
        }
    }

    func kill() { _ = Foundation.kill(self.pid, SIGKILL) }

    func removeOutput() { try? FileManager.default.removeItem(atPath: self.outputPath) }
}
