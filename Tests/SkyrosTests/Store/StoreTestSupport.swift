import Foundation
import Logging
import Skyros
import SkyrosPostgres
import SkyrosTestEntities
import SkyrosTestSupport
import Testing

/// The stores the conformance suite runs on.
enum StoreKind: String, Sendable, CaseIterable, CustomTestStringConvertible {
    case inMemory, postgres
    var testDescription: String { self.rawValue }
}

/// One store under test, with its cleanup.
struct StoreHarness: Sendable {
    let store: any Store
    /// The sandbox schema (PostgreSQL only).
    let schema: String?
    let pool: PGConnectionPool?

    /// Runs SQL on the test database (PostgreSQL only).
    func execute(_ sql: String) async throws {
        guard let pool else { return }
        try await pool.withConnection { _ = try await $0.execute(script: sql) }
    }

    /// `"schema"."table"`.
    func table(_ name: String) -> String {
        [self.schema, name].compactMap { $0 }.map(quoteIdentifier).joined(separator: ".")
    }

    /// Creates the test tables (PostgreSQL only; the in-memory store needs none).
    func createTables() async throws {
        try await self.execute(
            [StoreUser.createTable(self.table(StoreUser.tableName)), StoreCounter.createTable(self.table(StoreCounter.tableName)),
             StoreQuoted.createTable(self.table(StoreQuoted.tableName))].joined(separator: ";\n"))
    }
}

enum StoreTestServer {
    /// A sandbox schema name that needs quoting everywhere: a space, a double quote and a single quote.
    static func uniqueSchemaName() -> String {
        "store \"sandbox\" o'neil \(UUID().uuidString.prefix(8).lowercased())"
    }

    /// Runs `body` with a fresh store of `kind` (PostgreSQL: its own schema and tables, dropped afterwards).
    static func withStore<R>(
        _ kind: StoreKind, copyThreshold: Int = 500, _ body: (StoreHarness) async throws -> R
    ) async throws -> R {
        switch kind {
        case .inMemory:
            return try await body(StoreHarness(store: InMemoryStore(), schema: nil, pool: nil))
        case .postgres:
            let pool = PGConnectionPool(configuration: .init(maximumConnections: 4), postgres: try TestServer.configuration)
            let schema = uniqueSchemaName()
            let store = PostgresStore(pool: pool, schema: schema, copyThreshold: copyThreshold)
            let harness = StoreHarness(store: store, schema: schema, pool: pool)
            return try await withCleanup {
                try await store.createSchemaIfNeeded()
                try await harness.createTables()
                return try await body(harness)
            } cleanup: {
                await pool.shutdown()
                await TestServer.dropSchema(schema)
            }
        }
    }
}

