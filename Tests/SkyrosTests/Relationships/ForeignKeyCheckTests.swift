import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestEntities
import SkyrosTestSupport
import SkyrosTesting
import Testing

/// Start checks each to-one relationship against the live schema's foreign keys (`pg_constraint`).
@Suite("Relationships are checked against the foreign keys")
struct ForeignKeyCheckTests {
    static let entities: [any Entity.Type] = [RelPublisher.self, RelAuthor.self, RelBook.self, RelReview.self, RelTag.self, RelBookTag.self]

    /// Runs `body` in a fresh schema holding the relationship tables built by `sql` (unqualified names).
    func withTables(_ sql: String, _ body: (PGConnection, String) async throws -> Void) async throws {
        try await TestServer.withSchema("rel fk") { schema in
            try await TestServer.withConnection { connection in
                _ = try await connection.query("SELECT set_config('search_path', \(quoteIdentifier(schema)), false)")
                _ = try await connection.execute(script: sql)
                try await body(connection, schema)
            }
        }
    }

    func foreignKeyIssues(_ error: (any Error)?) -> [SchemaIssue] {
        ((error as? SchemaMismatchError)?.issues ?? []).filter { $0.foreignKey != nil }
    }

    @Test("Matching foreign keys, their delete rules included, pass")
    func matching() async throws {
        try await self.withTables(RelationshipSchema.createTables { $0 }) { connection, schema in
            try await EntitySchema.validate(Self.entities, on: connection, schema: schema)
            let live = try await ForeignKeyCheck.liveForeignKeys("rel_reviews", on: connection, schema: schema)
            #expect(live.map(\.columns) == [["select"]])
            #expect(live.first?.deleteRule == .noAction)
        }
    }

    @Test("A missing foreign key fails, naming both sides")
    func missing() async throws {
        let sql = RelationshipSchema.createTables { $0 }
            .replacingOccurrences(of: "NOT NULL REFERENCES rel_authors (id) ON DELETE CASCADE", with: "NOT NULL")
        try await self.withTables(sql) { connection, schema in
            let error = await #expect(throws: SchemaMismatchError.self) {
                try await EntitySchema.validate(Self.entities, on: connection, schema: schema)
            }
            let issues = self.foreignKeyIssues(error)
            #expect(issues.count == 1)
            #expect(issues.first?.foreignKey?.description == "rel_books.author_id → rel_authors.id")
            #expect(issues.first?.entity == "RelBook")
            #expect(issues.first?.message.contains("has no foreign key") == true)
        }
    }

    @Test("Another delete rule fails, naming the constraint and both rules")
    func otherRule() async throws {
        let sql = RelationshipSchema.createTables { $0 }
            .replacingOccurrences(of: "REFERENCES rel_authors (id) ON DELETE CASCADE", with: "REFERENCES rel_authors (id) ON DELETE RESTRICT")
        try await self.withTables(sql) { connection, schema in
            let error = await #expect(throws: SchemaMismatchError.self) {
                try await EntitySchema.validate(Self.entities, on: connection, schema: schema)
            }
            let issues = self.foreignKeyIssues(error)
            #expect(issues.count == 1)
            #expect(issues.first?.foreignKey?.deleteRule == .cascade)
            #expect(issues.first?.message.contains("declared ON DELETE CASCADE but the database's foreign key \"rel_books_author_id_fkey\" is ON DELETE RESTRICT") == true,
                    "\(issues)")
        }
    }

    @Test("A foreign key to another table fails, naming what it references")
    func otherTarget() async throws {
        let sql = RelationshipSchema.createTables { $0 }
            .replacingOccurrences(of: "REFERENCES rel_authors (id) ON DELETE CASCADE", with: "REFERENCES rel_publishers (id) ON DELETE CASCADE")
        try await self.withTables(sql) { connection, schema in
            let error = await #expect(throws: SchemaMismatchError.self) {
                try await EntitySchema.validate(Self.entities, on: connection, schema: schema)
            }
            let issues = self.foreignKeyIssues(error)
            #expect(issues.count == 1)
            #expect(issues.first?.message.contains("references rel_publishers.id") == true, "\(issues)")
        }
    }

    @Test("DataStack.start refuses a schema whose foreign key is missing")
    func startFails() async throws {
        let sql = "-- migrate:up\n" + RelationshipSchema.createTables { $0 }
            .replacingOccurrences(of: "REFERENCES rel_publishers (id) ON DELETE SET NULL", with: "")
        try await StackTestServer.withMigrations(["1_rel.sql": sql]) { directory in
            let configuration = DataStackConfiguration(store: .inMemory, migrations: .directory(directory), entities: Self.entities)
            let error = await #expect(throws: DataStackError.self) {
                try await TestServer.database.withStack(configuration, prefix: "rel start") { _ in }
            }
            #expect(error?.code == .schemaMismatch)
            #expect(self.foreignKeyIssues(error?.underlying).map { $0.foreignKey?.description } == ["rel_authors.publisher_id → rel_publishers.id"])
        }
    }

    @Test("A many-to-many's join table is checked: its missing foreign key fails, naming both sides")
    func joinTableForeignKey() async throws {
        let sql = RelationshipSchema.createTables { $0 }
            .replacingOccurrences(of: "n bigint NOT NULL REFERENCES rel_books (id) ON DELETE CASCADE", with: "n bigint NOT NULL")
        try await self.withTables(sql) { connection, schema in
            let error = await #expect(throws: SchemaMismatchError.self) {
                try await EntitySchema.validate(Self.entities, on: connection, schema: schema)
            }
            let issues = self.foreignKeyIssues(error)
            #expect(issues.count == 1, "\(issues)")
            #expect(issues.first?.entity == "RelBookTag")
            #expect(issues.first?.foreignKey?.description == "o.n → rel_books.id")
        }
    }

    @Test("A many-to-many whose join entity is not checked fails, naming the relationship and the join entity")
    func joinEntityMissing() async throws {
        try await self.withTables(RelationshipSchema.createTables { $0 }) { connection, schema in
            let entities = Self.entities.filter { $0 != RelBookTag.self }
            let error = await #expect(throws: SchemaMismatchError.self) {
                try await EntitySchema.validate(entities, on: connection, schema: schema)
            }
            let issues = error?.issues ?? []
            // Both sides declare it.
            #expect(Set(issues.map(\.entity)) == ["RelBook", "RelTag"], "\(issues)")
            #expect(issues.allSatisfy { $0.message.contains("goes through RelBookTag (table o)") }, "\(issues)")
            #expect(issues.first { $0.entity == "RelBook" }?.foreignKey?.description == "o.n → rel_books.id")
        }
    }

    @Test("An in-memory stack without a many-to-many's join entity fails start too")
    func inMemoryStartNeedsTheJoinEntity() async throws {
        let entities = Self.entities.filter { $0 != RelBookTag.self }
        let error = await #expect(throws: DataStackError.self) {
            _ = try await DataStack.start(DataStackConfiguration(store: .inMemory, entities: entities))
        }
        #expect(error?.code == .schemaMismatch)
        let issues = (error?.underlying as? SchemaMismatchError)?.issues ?? []
        #expect(issues.map(\.entity) == ["RelBook", "RelTag"], "\(issues)")
        // With it, the stack starts.
        let stack = try await DataStack.start(DataStackConfiguration(store: .inMemory, entities: Self.entities))
        await stack.shutdown()
    }
}
