// A service moving from Fluent to Skyros step by step imports all of these in one file. Every name below is
// used unqualified and in a type position (an annotation, a parameter, a generic argument), where a name that two
// of these modules declare is an error ("'X' is ambiguous for type lookup"); in a call alone the arguments could
// pick one of two types silently. `./smoke` builds this target, and CI runs `./smoke`. Nothing here is called:
// the file only has to compile.
import Crypto
import FluentKit
import Foundation
import PostgresNIO
import Skyros
import SkyrosMigrations

// MARK: Skyros

struct Author: Entity {
    var id: UUID
    var name: String
    var email: String?

    static let tableName = "authors"
    static let columns: [EntityColumn<Author>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.email, "email"),
    ]
    static let defaultSort = [SortDescriptor(\Author.name)]
}

/// `DataStack`, `DataStackConfiguration`, `PGConfiguration`, `MigrationSource`, `DataContext`,
/// `FetchDescriptor`, `PGError`.
func skyrosStack(databaseURL: String) async throws -> [Author] {
    let configuration: DataStackConfiguration = DataStackConfiguration(
        store: .postgres(try PGConfiguration(url: databaseURL), schema: "app"),
        migrations: MigrationSource.directory(path: "migrations") as MigrationSource,
        entities: [Author.self])
    let pg: PGConfiguration = try PGConfiguration(url: databaseURL)
    _ = pg
    let stack: DataStack = try await DataStack.start(configuration)
    do {
        try await stack.write(durability: .committed) { (context: DataContext) in
            let ada: FetchDescriptor<Author> = FetchDescriptor<Author>(predicate: #Predicate { $0.name == "Ada Lovelace" })
            if try await context.first(ada) == nil {
                try context.insert(Author(id: UUID(), name: "Ada Lovelace"))
            }
        }
    } catch let error as PGError {
        await stack.shutdown()
        throw error
    }
    let authors = try await stack.read { try await $0.fetch(FetchDescriptor<Author>(fetchLimit: 20)) }
    await stack.shutdown()
    return authors
}

/// SkyrosMigrations: `SchemaMigrator`, `SchemaMigration`, `MigrationSource`.
func skyrosMigrations(databaseURL: String) async throws -> Int {
    let create: SchemaMigration = try SchemaMigration(fileName: "1_create_authors.sql", contents: "CREATE TABLE authors (id uuid);")
    let source: MigrationSource = MigrationSource.migrations([create])
    let migrator: SchemaMigrator = SchemaMigrator(
        source: source,
        configuration: SchemaMigrator.Configuration(schema: "app"))
    return try await migrator.migrate(database: try PGConfiguration(url: databaseURL)).completed.count
}

// MARK: FluentKit

final class LegacyAuthor: Model, @unchecked Sendable {
    static let schema = "legacy_authors"
    @ID(key: .id) var id: UUID?
    @Field(key: "name") var name: String
    init() {}
}

/// FluentKit's `Migration` (as `AsyncMigration`).
struct CreateLegacyAuthor: AsyncMigration {
    func prepare(on database: any Database) async throws {
        try await database.schema(LegacyAuthor.schema).id().field("name", .string, .required).create()
    }

    func revert(on database: any Database) async throws {
        try await database.schema(LegacyAuthor.schema).delete()
    }
}

/// FluentKit's `Migrator` over `Migration`s, and a `QueryBuilder` on a `Database`.
func fluent(on database: any Database) async throws -> [LegacyAuthor] {
    let migrations = Migrations()
    let all: [any Migration] = [CreateLegacyAuthor()]
    migrations.add(all)
    let migrator: Migrator = Migrator(databaseFactory: { _ in database }, migrations: migrations, on: database.eventLoop)
    try await migrator.setupIfNeeded().get()
    try await migrator.prepareBatch().get()
    let query: QueryBuilder<LegacyAuthor> = LegacyAuthor.query(on: database).filter(\.$name == "Ada Lovelace")
    return try await query.all()
}

// MARK: PostgresNIO

/// `PostgresClient`, `PostgresConnection`, `PostgresQuery`, `PSQLError`, `PostgresError`.
func postgresNIO(logger: Logger) async throws -> Int? {
    let client: PostgresClient = PostgresClient(
        configuration: PostgresClient.Configuration(
            host: "localhost", username: "skyros", password: nil, database: "skyros", tls: .disable))
    return try await withThrowingTaskGroup(of: Int?.self) { group in
        group.addTask {
            await client.run()
            return nil
        }
        defer { group.cancelAll() }
        return try await client.withConnection { (connection: PostgresConnection) in
            let query: PostgresQuery = "SELECT \(42)::int8"
            do {
                for try await value in try await connection.query(query, logger: logger).decode(Int.self) {
                    return value
                }
                return nil
            } catch let error as PSQLError {
                logger.error("query failed: \(String(reflecting: error))")
                throw error
            } catch let error as PostgresError {
                logger.error("legacy error: \(error)")
                throw error
            }
        }
    }
}

// MARK: Crypto

/// `SHA256`, `HMAC`, `SymmetricKey`.
func crypto(_ text: String) -> (digest: String, tag: Data) {
    let digest = SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
    var hasher: SHA256 = SHA256()
    hasher.update(data: Data(text.utf8))
    _ = hasher.finalize()
    let key: SymmetricKey = SymmetricKey(size: .bits256)
    let code: HMAC<SHA256>.MAC = HMAC<SHA256>.authenticationCode(for: Data(text.utf8), using: key)
    let tag = Data(code)
    return (digest, tag)
}
