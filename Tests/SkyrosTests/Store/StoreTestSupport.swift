import Foundation
import Logging
import Skyros
import SkyrosPostgres
import Testing

/// A role stored as its raw value (text).
enum StoreRole: String, Codable, Sendable, Equatable {
    case admin, member
}

/// A nested value stored as jsonb.
struct StoreAddress: Codable, Sendable, Equatable {
    var street: String
    var city: String
    var movedIn: Date?
}

struct StorePet: Codable, Sendable, Equatable {
    var name: String
    var legs: Int
}

/// The conformance suite's main entity: every supported kind of property, snake_case keys.
struct StoreUser: Entity, Equatable, ColumnKeyStrategyProviding {
    var id: Int
    var name: String
    var age: Int?
    var email: String?
    var score: Double
    var balance: Decimal
    var createdAt: Date
    var avatar: Data?
    var tags: [String]
    var role: StoreRole
    var address: StoreAddress
    var pets: [StorePet]
    var attributes: [String: Int]
    var externalID: UUID

    static let tableName = "store_users"
    static let columnKeyStrategy = ColumnKeyStrategy.convertToSnakeCase
    static let columns: [EntityColumn<StoreUser>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.age, "age"),
        EntityColumn(\.email, "email"), EntityColumn(\.score, "score"), EntityColumn(\.balance, "balance"),
        EntityColumn(\.createdAt, "created_at"), EntityColumn(\.avatar, "avatar"), EntityColumn(\.tags, "tags"),
        EntityColumn(\.role, "role"), EntityColumn(\.address, "address"), EntityColumn(\.pets, "pets"),
        EntityColumn(\.attributes, "attributes"), EntityColumn(\.externalID, "external_id"),
    ]
    static let defaultSort = [SortDescriptor(\StoreUser.name)]

    static func make(_ id: Int, name: String? = nil, age: Int? = nil) -> StoreUser {
        StoreUser(
            id: id, name: name ?? "user \(id)", age: age, email: id % 2 == 0 ? "u\(id)@example.com" : nil,
            score: Double(id) + 0.5, balance: Decimal(string: "1234567890.123456789")! + Decimal(id),
            createdAt: Date(timeIntervalSince1970: 1_700_000_000.25 + Double(id)),
            avatar: id % 3 == 0 ? Data([0, 1, 2, 255, UInt8(id % 256)]) : nil,
            tags: ["t\(id)", "common"], role: id % 2 == 0 ? .admin : .member,
            address: StoreAddress(street: "\(id) Main St", city: "Skyros", movedIn: Date(timeIntervalSince1970: 1_600_000_000.5)),
            pets: id % 2 == 0 ? [StorePet(name: "Rex", legs: 4)] : [], attributes: ["level": id],
            externalID: UUID(uuidString: String(format: "00000000-0000-0000-0000-%012d", id))!)
    }

    static func createTable(_ table: String) -> String {
        """
        CREATE TABLE \(table) (
            id bigint PRIMARY KEY, name text NOT NULL, age integer, email text, score double precision NOT NULL,
            balance numeric NOT NULL, created_at timestamptz NOT NULL, avatar bytea, tags text[] NOT NULL,
            role text NOT NULL, address jsonb NOT NULL, pets jsonb NOT NULL, attributes jsonb NOT NULL,
            external_id uuid NOT NULL)
        """
    }
}

/// An entity with a version column: versions are 1, 2, 3… on both stores.
struct StoreCounter: Entity, Equatable {
    var id: String
    var value: Int

    static let tableName = "counters"
    static let columns: [EntityColumn<StoreCounter>] = [EntityColumn(\.id, "id"), EntityColumn(\.value, "value")]
    static let versionColumn: String? = "row_version"

    static func createTable(_ table: String) -> String {
        "CREATE TABLE \(table) (id text PRIMARY KEY, value bigint NOT NULL, row_version bigint NOT NULL DEFAULT 1)"
    }
}

/// Table and column names that need quoting.
struct StoreQuoted: Entity, Equatable {
    var id: UUID
    var order: Int
    var select: String
    var mixedCase: String?

    enum CodingKeys: String, CodingKey {
        case id, order, select
        case mixedCase = "Mixed \"Case\""
    }

    static let tableName = "user data"
    static let columns: [EntityColumn<StoreQuoted>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.order, "order"), EntityColumn(\.select, "select"),
        EntityColumn(\.mixedCase, "Mixed \"Case\""),
    ]
    static let defaultSort = [SortDescriptor(\StoreQuoted.order)]

    static func createTable(_ table: String) -> String {
        "CREATE TABLE \(table) (id uuid PRIMARY KEY, \"order\" integer NOT NULL, \"select\" text NOT NULL, \"Mixed \"\"Case\"\"\" text)"
    }
}

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
    let pool: ConnectionPool?

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
    static var configuration: PostgresConfiguration {
        get throws {
            guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"] else {
                fatalError("DATABASE_URL is not set: run the integration tests through scripts/test")
            }
            return try PostgresConfiguration(url: url)
        }
    }

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
            let pool = ConnectionPool(configuration: .init(maximumConnections: 4), postgres: try configuration)
            let schema = uniqueSchemaName()
            let store = PostgresStore(pool: pool, schema: schema, copyThreshold: copyThreshold)
            let harness = StoreHarness(store: store, schema: schema, pool: pool)
            do {
                try await store.createSchemaIfNeeded()
                try await harness.createTables()
                let result = try await body(harness)
                await self.drop(schema, pool)
                return result
            } catch {
                await self.drop(schema, pool)
                throw error
            }
        }
    }

    private static func drop(_ schema: String, _ pool: ConnectionPool) async {
        _ = try? await pool.withConnection { try await $0.execute(script: "DROP SCHEMA IF EXISTS \(quoteIdentifier(schema)) CASCADE") }
        await pool.shutdown()
    }
}

