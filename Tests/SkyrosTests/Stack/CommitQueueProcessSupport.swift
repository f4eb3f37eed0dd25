import Foundation
import SkyrosTestSupport
import Skyros
import SkyrosPostgres
import Testing

enum CommitQueueTestServer {
    static var mayRestartServer: Bool {
        let environment = ProcessInfo.processInfo.environment
        return environment["SKYROS_TEST_PG_CTL"] != nil && environment["SKYROS_ALLOW_SERVER_RESTART"] == "1"
    }

    /// Runs `pg_ctl <arguments>` on scripts/test's cluster; returns its exit status.
    static func pgCtl(_ arguments: String) async throws -> Int32 {
        let pgCtl = try #require(ProcessInfo.processInfo.environment["SKYROS_TEST_PG_CTL"])
        let process = try NodeProcess.spawn("/bin/sh", ["-c", "\(pgCtl) \(arguments) >/dev/null 2>&1"])
        defer { process.removeOutput() }
        return await process.exitStatus()
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
    /// ``withStack(_:cacheLimit:_:)`` on PostgreSQL (the test server, or `server`) with a configuration
    /// adjusted by `configure`.
    static func withQueueStack<R>(
        server: PostgresConfiguration? = nil,
        _ configure: (inout DataStackConfiguration) -> Void, _ body: (DataStack) async throws -> R
    ) async throws -> R {
        let schema = uniqueSchemaName()
        let postgres = try server ?? configuration
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
