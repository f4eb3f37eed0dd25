import Foundation
import Logging
import SkyrosTestSupport
import Skyros
import SkyrosPostgres
import Testing

enum CommitQueueTestServer {
    /// One query on a fresh connection.
    static func query(_ query: PGQuery) async throws -> PGRows {
        try await TestServer.withConnection { try await $0.query(query) }
    }
}

extension StackTestServer {
    /// ``withStack(_:cacheLimit:_:)`` on PostgreSQL (the test server, or `server`) with a configuration
    /// adjusted by `configure`: SkyrosTesting's `TestDatabase.withStack`, in a schema of its own.
    static func withQueueStack<R>(
        server: PGConfiguration? = nil, logger: Logger = Logger(label: "skyros.test", factory: { _ in SwiftLogNoOpLogHandler() }),
        _ configure: (inout DataStackConfiguration) -> Void, _ body: (DataStack) async throws -> R
    ) async throws -> R {
        let database = TestDatabase(configuration: try server ?? TestServer.configuration)
        return try await withMigrations(["1_stack.sql": migrationSQL]) { directory in
            var configuration = DataStackConfiguration(
                store: .inMemory, migrations: .directory(directory),
                entities: [StackNote.self, StackCounter.self], pool: .init(maximumConnections: 4, leaseTimeout: .seconds(120)))
            configure(&configuration)
            // A schema name that needs quoting everywhere (see `uniqueSchemaName()`), made and dropped by the kit.
            return try await database.withStack(configuration, prefix: "stack \"ctx\"", logger: logger, body)
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
