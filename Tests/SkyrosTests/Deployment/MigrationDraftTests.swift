import Foundation
import Skyros
import SkyrosMigrations
import SkyrosPostgres
import SkyrosTestSupport
import Testing

// The demo's entities (Sources/skyros-demo/main.swift), and the versions a later release of the app has.
private struct DraftAuthor: Entity, ColumnKeyStrategyProviding {
    var id: UUID
    var name: String
    var email: String?

    static let tableName = "authors"
    static let columnKeyStrategy = ColumnKeyStrategy.convertToSnakeCase
    static let columns: [EntityColumn<DraftAuthor>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.email, "email"),
    ]
}

private struct DraftBook: Entity {
    var id: UUID
    var title: String
    var authorID: UUID
    var year: Int32?
    var tags: [String]

    enum CodingKeys: String, CodingKey {
        case id, title, year, tags
        case authorID = "author_id"
    }

    static let tableName = "books"
    static let columns: [EntityColumn<DraftBook>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.authorID, "author_id"),
        EntityColumn(\.year, "year"), EntityColumn(\.tags, "tags"),
    ]
}

/// Columns the database sets, a version column, JSON: what validation checks beyond plain columns.
private struct DraftTicket: Entity {
    struct Details: Codable, Sendable { var priority: Int }

    var id: Int64
    var title: String
    var createdAt: Date
    var details: Details

    enum CodingKeys: String, CodingKey {
        case id, title, details
        case createdAt = "created_at"
    }

    static let tableName = "tickets"
    static let versionColumn: String? = "version"
    static let columns: [EntityColumn<DraftTicket>] = [
        EntityColumn(\.id, "id", generated: .identity), EntityColumn(\.title, "title"),
        EntityColumn(\.createdAt, "created_at", generated: .onInsert), EntityColumn(\.details, "details"),
    ]
}

/// The next release: Author gains `bio`.
private struct DraftAuthorWithBio: Entity {
    var id: UUID
    var name: String
    var email: String?
    var bio: String?

    static let tableName = "authors"
    static let columns: [EntityColumn<DraftAuthorWithBio>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.email, "email"), EntityColumn(\.bio, "bio"),
    ]
}

/// A release that no longer maps `email`.
private struct DraftAuthorWithoutEmail: Entity {
    var id: UUID
    var name: String

    static let tableName = "authors"
    static let columns: [EntityColumn<DraftAuthorWithoutEmail>] = [EntityColumn(\.id, "id"), EntityColumn(\.name, "name")]
}

@Suite("Migration draft (PostgreSQL)", .timeLimit(.minutes(5)))
struct MigrationDraftTests {
    static let demoEntities: [any Entity.Type] = [DraftAuthor.self, DraftBook.self, DraftTicket.self]

    /// A fresh schema and an empty migrations directory, both removed afterwards.
    static func withProject(_ body: (String, URL) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("skyros-draft-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await TestServer.withSchema("draft") { schema in try await body(schema, directory) }
    }

    /// Drafts, writes the file (if any) and applies it with the migrator.
    static func draftAndApply(
        _ name: String, _ entities: [any Entity.Type], schema: String, directory: URL
    ) async throws -> (draft: MigrationDraft, file: URL?) {
        let draft = try await MigrationDraft.make(
            name: name, entities: entities, database: try TestServer.configuration, schema: schema,
            directory: directory.path)
        let file = try draft.write()
        if file != nil {
            try await SchemaMigrator(source: .directory(directory), configuration: .init(schema: schema))
                .migrate(database: try TestServer.configuration)
        }
        return (draft, file)
    }

    /// Starts a stack with `entities` (start validates them) and shuts it down.
    static func start(_ entities: [any Entity.Type], schema: String) async throws {
        let stack = try await DataStack.start(
            DataStackConfiguration(store: .postgres(try TestServer.configuration, schema: schema), entities: entities))
        await stack.shutdown()
    }

    @Test("a fresh schema: the draft creates every table, applied it lets start validate, a second draft is empty")
    func freshSchema() async throws {
        try await Self.withProject { schema, directory in
            let (draft, file) = try await Self.draftAndApply("create tables", Self.demoEntities, schema: schema, directory: directory)
            #expect(file?.lastPathComponent == "1_create_tables.sql")
            #expect(draft.warnings.isEmpty, "\(draft.warnings)")
            #expect(draft.up.components(separatedBy: "CREATE TABLE").count == 4, "\(draft.up)")
            #expect(draft.contents.hasPrefix("-- migrate:up\n"))
            #expect(draft.down.contains(#"DROP TABLE "authors";"#))

            let stack = try await DataStack.start(
                DataStackConfiguration(store: .postgres(try TestServer.configuration, schema: schema), entities: Self.demoEntities))
            let ticket = try await stack.write(durability: .committed) { context in
                try context.insert(DraftTicket(id: 0, title: "Printer", createdAt: .now, details: .init(priority: 2)))
            }
            #expect(ticket.id > 0)
            await stack.shutdown()

            let again = try await MigrationDraft.make(
                name: "nothing", entities: Self.demoEntities, database: try TestServer.configuration, schema: schema,
                directory: directory.path)
            #expect(!again.hasChanges, "\(again.contents)")
            #expect(try again.write() == nil)
            #expect(again.fileName == "2_nothing.sql")
        }
    }

    @Test("a new property: the second draft adds exactly that column, and start validates")
    func addedProperty() async throws {
        try await Self.withProject { schema, directory in
            _ = try await Self.draftAndApply("create", Self.demoEntities, schema: schema, directory: directory)
            try await TestServer.withConnection { connection in
                _ = try await connection.query(PGQuery(
                    unsafeSQL: "INSERT INTO \(quoteIdentifier(schema)).authors (id, name) VALUES (gen_random_uuid(), 'Ada')"))
            }
            let entities: [any Entity.Type] = [DraftAuthorWithBio.self, DraftBook.self, DraftTicket.self]
            let (draft, file) = try await Self.draftAndApply("add bio", entities, schema: schema, directory: directory)
            #expect(file?.lastPathComponent == "2_add_bio.sql")
            #expect(draft.up == #"ALTER TABLE "authors" ADD COLUMN "bio" text;"#)
            #expect(draft.down == #"ALTER TABLE "authors" DROP COLUMN "bio";"#)
            #expect(draft.warnings.isEmpty)
            try await Self.start(entities, schema: schema)
        }
    }

    @Test("a removed property: a commented-out DROP COLUMN and a warning; applying it drops nothing")
    func removedProperty() async throws {
        try await Self.withProject { schema, directory in
            _ = try await Self.draftAndApply("create", Self.demoEntities, schema: schema, directory: directory)
            try await TestServer.withConnection { connection in
                _ = try await connection.query(PGQuery(
                    unsafeSQL: "INSERT INTO \(quoteIdentifier(schema)).authors (id, name, email) VALUES (gen_random_uuid(), 'Ada', 'ada@example.com')"))
            }
            let entities: [any Entity.Type] = [DraftAuthorWithoutEmail.self, DraftBook.self, DraftTicket.self]
            let (draft, file) = try await Self.draftAndApply("drop email", entities, schema: schema, directory: directory)
            #expect(file != nil)
            #expect(draft.warnings.count == 1)
            #expect(draft.warnings.first?.contains("column email") == true)
            #expect(draft.up.contains(#"-- ALTER TABLE "authors" DROP COLUMN "email";"#))
            #expect(draft.up.contains("-- WARNING: column email (text)"))
            #expect(draft.up.split(separator: "\n").filter { !$0.hasPrefix("--") } == ["SELECT 1;"], "\(draft.up)")
            let email = try await TestServer.withConnection { connection in
                try await connection.query(PGQuery(unsafeSQL: "SELECT email FROM \(quoteIdentifier(schema)).authors"))[0]
                    .decode(String?.self, at: 0)
            }
            #expect(email == "ada@example.com")
            try await Self.start(entities, schema: schema)
        }
    }

    @Test("another service's table in the schema is left alone")
    func otherServicesTable() async throws {
        try await Self.withProject { schema, directory in
            try await TestServer.withConnection { connection in
                _ = try await connection.query(PGQuery(
                    unsafeSQL: "CREATE TABLE \(quoteIdentifier(schema)).invoices (id int PRIMARY KEY, total numeric NOT NULL)"))
                _ = try await connection.query(PGQuery(unsafeSQL: "INSERT INTO \(quoteIdentifier(schema)).invoices VALUES (1, 9.5)"))
            }
            let (draft, _) = try await Self.draftAndApply("create", Self.demoEntities, schema: schema, directory: directory)
            #expect(!draft.contents.contains("invoices"))
            #expect(!draft.contents.contains("skyros_"))
            let total = try await TestServer.withConnection { connection in
                try await connection.query(PGQuery(unsafeSQL: "SELECT total::text FROM \(quoteIdentifier(schema)).invoices"))[0]
                    .decode(String.self, at: 0)
            }
            #expect(total == "9.5")
            let second = try await MigrationDraft.make(
                name: "again", entities: Self.demoEntities, database: try TestServer.configuration, schema: schema,
                directory: directory.path)
            #expect(!second.hasChanges, "\(second.contents)")
        }
    }

    @Test("a schema whose name has a quote")
    func quotedSchema() async throws {
        let schema = "dr\"aft_\(UUID().uuidString.prefix(8).lowercased())"
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("skyros-draft-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            _ = try await Self.draftAndApply("create", [DraftAuthor.self], schema: schema, directory: directory)
            try await Self.start([DraftAuthor.self], schema: schema)
            let again = try await MigrationDraft.make(
                name: "again", entities: [DraftAuthor.self], database: try TestServer.configuration, schema: schema,
                directory: directory.path)
            #expect(!again.hasChanges)
        } catch {
            await TestServer.dropSchema(schema)
            throw error
        }
        await TestServer.dropSchema(schema)
    }

    @Test("skyros-demo draft writes the demo's tables; migrate draft says how an app drafts (exit 2)")
    func executables() async throws {
        try await Self.withProject { schema, directory in
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let demo = try await QuickstartTests.run(
                try QuickstartTests.executable("skyros-demo"), ["draft", "first tables", "--schema", schema],
                in: directory, databaseURL: TestServer.url)
            #expect(demo.status == 0, "\(demo.report)")
            let file = directory.appendingPathComponent("migrations/1_first_tables.sql")
            let contents = try String(contentsOf: file, encoding: .utf8)
            #expect(contents.contains(#"CREATE TABLE "authors""#))
            #expect(contents.contains(#"CREATE TABLE "books""#))
            #expect(demo.stderr.contains("Wrote"), "\(demo.report)")

            let migrate = try await QuickstartTests.run(
                try QuickstartTests.executable("migrate"), ["draft", "x"], in: directory, databaseURL: TestServer.url)
            #expect(migrate.status == 2, "\(migrate.report)")
            #expect(migrate.stderr.contains("MigrationDraft.command"), "\(migrate.report)")
        }
    }
}
