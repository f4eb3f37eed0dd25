import Foundation
import Skyros
import SkyrosPostgres
import SkyrosStore
import SkyrosTestSupport
import Testing

/// `destroyAndRebuild` on a stack without a schema of its own empties its entities' tables and nothing else of
/// the schema it shares: another service's table, the migration history and the change log stay.
@Suite("Destroy without a schema", .timeLimit(.minutes(2)))
struct DestroyScopeTests {
    /// A stack on `current_schema()` (the connection's `search_path` names a fresh schema), beside a table of
    /// another service with a row in it.
    private func withSharedSchemaStack(_ body: (DataStack, String) async throws -> Void) async throws {
        let schema = "destroy_\(UUID().uuidString.prefix(8).lowercased())"
        try await TestServer.withConnection { connection in
            _ = try await connection.execute(script: """
                CREATE SCHEMA \(schema);
                CREATE TABLE \(schema).other_service (id bigint PRIMARY KEY, note text NOT NULL);
                INSERT INTO \(schema).other_service VALUES (1, 'not the stack''s');
                """)
        }
        try await withCleanup {
            var postgres = try TestServer.configuration
            postgres["options"] = "-c search_path=\(schema)"
            try await StackTestServer.withMigrations(["1_stack.sql": StackTestServer.migrationSQL]) { directory in
                let stack = try await DataStack.start(
                    DataStackConfiguration(store: .postgres(postgres), migrations: .directory(directory), entities: [StackNote.self, StackCounter.self]))
                try await withCleanup { try await body(stack, schema) } cleanup: { await stack.shutdown() }
            }
        } cleanup: {
            await TestServer.dropSchema(schema)
        }
    }

    private func count(_ table: String, in schema: String) async throws -> Int {
        try await TestServer.withConnection { connection in
            try await connection.query("SELECT count(*)::int FROM \(qualified: [schema, table])")[0].decode(Int.self, at: 0)
        }
    }

    @Test func itEmptiesTheEntitiesTablesAndLeavesEverythingElse() async throws {
        try await self.withSharedSchemaStack { stack, schema in
            try await stack.write(durability: .committed) { context in
                try context.insert(StackNote(id: 1, title: "one", rank: 1, tag: nil))
                try context.insert(StackCounter(id: "a", name: "a", note: ""))
            }
            let history = try await self.count("skyros_schema_migrations", in: schema)
            #expect(history == 1)

            try await stack.destroyAndRebuild(confirm: .iUnderstandThisDeletesData)

            #expect(try await self.count("stack_notes", in: schema) == 0)
            #expect(try await self.count("stack_counters", in: schema) == 0)
            #expect(try await self.count("other_service", in: schema) == 1, "another service's table lost its row")
            #expect(try await self.count("skyros_schema_migrations", in: schema) == history, "the migration history changed")
            // The stack works on: a write after the rebuild commits and is read back.
            try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 2, title: "two", rank: 2, tag: nil)) }
            #expect(try await stack.read { try await $0.fetch(FetchDescriptor<StackNote>()).map(\.id) } == [2])
        }
    }

    /// The `TRUNCATE` names the stack's tables as the server must read them: a table and columns with hostile
    /// names (`CaptureNamesTests`' drawn naming C) are emptied, and a table whose name differs only by a quote or
    /// by case is left alone.
    @Test func hostileTableNamesAreQuoted() async throws {
        typealias Names = NamingC
        typealias Row = HostileRow<Names>
        let context = "seed \(HostileNames.seed) (SKYROS_NAMES_SEED replays it), names \(Names.names)"
        let schema = "destroy_\(UUID().uuidString.prefix(8).lowercased())"
        let table = "\(schema).\(quoteIdentifier(Names.table))"
        let (key, count, label) = (quoteIdentifier(Names.key), quoteIdentifier(Names.count), quoteIdentifier(Names.label))
        // Cut to 63 bytes as PostgreSQL would (a longer name is truncated, and may become the table's own).
        let neighbours = Array(Set(["_" + Names.table.uppercased(), "\"" + Names.table, "x " + Names.table].map(truncatedIdentifier)))
            .filter { $0 != Names.table }
        try await TestServer.withConnection { connection in
            _ = try await connection.execute(script: """
                CREATE SCHEMA \(schema);
                CREATE TABLE \(table) (\(key) bigint PRIMARY KEY, \(count) bigint NOT NULL, \(label) text NOT NULL);
                INSERT INTO \(table) VALUES (1, 1, 'one');
                \(neighbours.map { "CREATE TABLE \(schema).\(quoteIdentifier($0)) (id int); INSERT INTO \(schema).\(quoteIdentifier($0)) VALUES (1);" }.joined(separator: "\n"))
                """)
        }
        try await withCleanup {
            var postgres = try TestServer.configuration
            postgres["options"] = "-c search_path=\(schema)"
            let stack = try await DataStack.start(DataStackConfiguration(store: .postgres(postgres), entities: [Row.self]))
            try await withCleanup {
                try await stack.write(durability: .committed) { try $0.insert(Row(id: 2, count: 2, label: "two")) }
                try await stack.destroyAndRebuild(confirm: .iUnderstandThisDeletesData)
                #expect(try await self.count(Names.table, in: schema) == 0, "\(context)")
                for neighbour in neighbours {
                    #expect(try await self.count(neighbour, in: schema) == 1, "\(neighbour) lost its row; \(context)")
                }
            } cleanup: {
                await stack.shutdown()
            }
        } cleanup: {
            await TestServer.dropSchema(schema)
        }
    }

    @Test func aForeignKeyFromAnotherTableMakesItFailWithNothingDeleted() async throws {
        try await self.withSharedSchemaStack { stack, schema in
            try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 1, title: "one", rank: 1, tag: nil)) }
            try await TestServer.withConnection { connection in
                _ = try await connection.execute(script: """
                    CREATE TABLE \(schema).other_refs (id bigint PRIMARY KEY, note_id bigint NOT NULL REFERENCES \(schema).stack_notes);
                    INSERT INTO \(schema).other_refs VALUES (1, 1);
                    """)
            }
            let error = await #expect(throws: PGError.self) { try await stack.destroyAndRebuild(confirm: .iUnderstandThisDeletesData) }
            #expect(error?.sqlState == SQLState("0A000"), "\(String(describing: error))")
            #expect(try await self.count("stack_notes", in: schema) == 1)
            #expect(try await self.count("other_refs", in: schema) == 1)
        }
    }
}
