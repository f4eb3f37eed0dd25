import Foundation
import Skyros
import SkyrosPostgres
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A child process of the test-only executable `skyros-test-node`, its stdout captured in a file.
///
/// Spawned with `posix_spawn` and reaped with `waitpid` on a thread of its own (Foundation's `Process`
/// termination monitoring never fires in the test process here).
struct NodeProcess: Sendable {
    let pid: pid_t
    let output: URL

    /// `<package root>/.build/debug/skyros-test-node` (built by scripts/test's `swift build --build-tests`).
    static var executable: String {
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { root.deleteLastPathComponent() }
        return root.appendingPathComponent(".build/debug/skyros-test-node").path
    }

    static func spawn(_ arguments: [String]) throws -> NodeProcess {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("skyros-node-\(UUID().uuidString).out")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, output.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let path = self.executable
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &actions, nil, argv, environ)
        guard rc == 0 else {
            throw PostgresError(kind: .invalidConfiguration, message: "posix_spawn \(path) failed: \(rc)")
        }
        return NodeProcess(pid: pid, output: output)
    }

    /// The lines written so far.
    var lines: [String] {
        guard let data = try? Data(contentsOf: self.output) else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    func signal(_ number: Int32) { _ = kill(self.pid, number) }

    /// The exit status (128 + signal number when killed by a signal).
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

    func removeOutput() { try? FileManager.default.removeItem(at: self.output) }
}

enum CommitQueueTestServer {
    static var mayRestartServer: Bool {
        let environment = ProcessInfo.processInfo.environment
        return environment["SKYROS_TEST_PG_CTL"] != nil && environment["SKYROS_ALLOW_SERVER_RESTART"] == "1"
    }

    /// Runs `pg_ctl <arguments>` on scripts/test's cluster; returns its exit status.
    static func pgCtl(_ arguments: String) async throws -> Int32 {
        let pgCtl = try #require(ProcessInfo.processInfo.environment["SKYROS_TEST_PG_CTL"])
        let words: [String] = ["/bin/sh", "-c", "\(pgCtl) \(arguments) >/dev/null 2>&1"]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, "/bin/sh", nil, nil, argv, environ) == 0 else { return -1 }
        return await NodeProcess(pid: pid, output: URL(fileURLWithPath: "/dev/null")).exitStatus()
    }

    /// One query on a fresh connection.
    static func query(_ query: PostgresQuery) async throws -> PostgresRows {
        let connection = try await Connection.connect(to: try StackTestServer.configuration)
        do {
            let rows = try await connection.query(query)
            await connection.close()
            return rows
        } catch {
            await connection.close()
            throw error
        }
    }
}

extension StackTestServer {
    /// ``withStack(_:cacheLimit:_:)`` on PostgreSQL with a configuration adjusted by `configure`.
    static func withQueueStack<R>(
        _ configure: (inout DataStackConfiguration) -> Void, _ body: (DataStack) async throws -> R
    ) async throws -> R {
        let schema = uniqueSchemaName()
        let postgres = try configuration
        return try await withMigrations(["1_stack.sql": migrationSQL]) { directory in
            var configuration = DataStackConfiguration(
                store: .postgres(postgres, schema: schema), migrations: .directory(directory),
                entities: [StackNote.self, StackCounter.self], pool: .init(maximumConnections: 4, leaseTimeout: .seconds(120)))
            configure(&configuration)
            let stack = try await DataStack.start(configuration)
            do {
                let result = try await body(stack)
                await stack.shutdown()
                try await dropSchema(schema)
                return result
            } catch {
                await stack.shutdown()
                try? await dropSchema(schema)
                throw error
            }
        }
    }
}

/// The resident set size of this process, in bytes (Linux `/proc/self/status` VmRSS).
func residentBytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return 0 }
    let kilobytes = line.split(separator: " ").compactMap { Int($0) }.first ?? 0
    return kilobytes * 1024
}
