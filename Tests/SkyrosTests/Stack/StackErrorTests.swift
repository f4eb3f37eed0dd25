import Foundation
import Skyros
import SkyrosMigrations
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Start-up and lifecycle failures each give their specific error.
@Suite("Stack errors")
struct StackErrorTests {
    @Test("An unreachable server fails start with storeUnreachable, without the password")
    func unreachable() async throws {
        let configuration = try PGConfiguration(url: "postgresql://skyros:s3cret-pw@127.0.0.1:1/nowhere?connect_timeout=2")
        var stackConfiguration = DataStackConfiguration(store: .postgres(configuration))
        stackConfiguration.waitForDatabase = .zero   // refused: one attempt, no waiting
        let error = await thrownError { _ = try await DataStack.start(stackConfiguration) }
        let thrownError = try #require(error as? DataStackError)
        #expect(thrownError.code == .storeUnreachable)
        #expect(thrownError.underlying is PGError)
        #expect(!"\(thrownError)".contains("s3cret-pw"))
        #expect("\(thrownError)".contains("127.0.0.1:1"))
    }

    @Test("A failing migration fails start with migrationFailed naming the file; earlier migrations stay")
    func failingMigration() async throws {
        let schema = StackTestServer.uniqueSchemaName()
        let files = [
            "1_stack.sql": StackTestServer.migrationSQL,
            "2_broken.sql": "-- migrate:up\nALTER TABLE stack_notes ADD COLUMN broken no_such_type;\n",
        ]
        try await StackTestServer.withMigrations(files) { directory in
            let error = await thrownError {
                _ = try await DataStack.start(DataStackConfiguration(
                    store: .postgres(try TestServer.configuration, schema: schema), migrations: .directory(directory)))
            }
            let thrownError = try #require(error as? DataStackError)
            #expect(thrownError.code == .migrationFailed)
            #expect(thrownError.underlying is MigrationError)
            #expect("\(thrownError)".contains("2_broken.sql"))
            // Nothing was deleted: the first migration's table is still there.
            let connection = try await PGConnection.connect(to: try TestServer.configuration)
            let rows = try await connection.query(
                "SELECT count(*)::int8 FROM pg_tables WHERE schemaname = \(schema) AND tablename = 'stack_notes'")
            #expect(try rows.first?.decode(Int.self, at: 0) == 1)
            await connection.close()
        }
        await TestServer.dropSchema(schema)
    }

    @Test("A schema-mismatched entity fails start with schemaMismatch naming entity, column and types")
    func schemaMismatch() async throws {
        struct WrongNote: Entity {
            var id: Int
            var title: Int  // text in the table
            static let tableName = "stack_notes"
            static let columns: [EntityColumn<WrongNote>] = [EntityColumn(\.id, "id"), EntityColumn(\.title, "title")]
        }
        let schema = StackTestServer.uniqueSchemaName()
        try await StackTestServer.withMigrations(["1_stack.sql": StackTestServer.migrationSQL]) { directory in
            let error = await thrownError {
                _ = try await DataStack.start(DataStackConfiguration(
                    store: .postgres(try TestServer.configuration, schema: schema), migrations: .directory(directory),
                    entities: [StackNote.self, WrongNote.self]))
            }
            let thrownError = try #require(error as? DataStackError)
            #expect(thrownError.code == .schemaMismatch)
            let mismatch = try #require(thrownError.underlying as? SchemaMismatchError)
            let title = try #require(mismatch.issues.first { $0.column == "title" })
            #expect(title.entity == "WrongNote" && title.swiftType == "Int" && title.postgresType == "text")
            #expect("\(thrownError)".contains("WrongNote"))
            #expect("\(thrownError)".contains("text"))
        }
        await TestServer.dropSchema(schema)
    }

    @Test("Contexts created before a destructive rebuild throw contextInvalidated", arguments: StackKind.allCases)
    func destroyed(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { try $0.insert(note(1)) }
            let oldMain = stack.mainContext
            let background = stack.newBackgroundContext()
            try await stack.destroyAndRebuild(confirm: .iUnderstandThisDeletesData)
            for context in [oldMain, background] {
                let error = await thrownError { _ = try await context.fetch(StackNote.self) }
                #expect((error as? DataStackError)?.code == .contextInvalidated)
                let saveError = await thrownError { try context.insert(note(2)) }
                #expect((saveError as? DataStackError)?.code == .contextInvalidated)
            }
            // The rebuilt stack works, empty.
            #expect(try await stack.read { try await $0.fetch(StackNote.self) }.isEmpty)
            try await stack.write(durability: .committed) { try $0.insert(note(3)) }
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 3) } == note(3))
        }
    }

    @Test("Writes after shutdown throw stackShutDown", arguments: StackKind.allCases)
    func shutDown(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write { try $0.insert(note(1)) }
            await stack.shutdown()
            let error = await thrownError { try await stack.write { try $0.insert(note(2)) } }
            #expect((error as? DataStackError)?.code == .stackShutDown)
        }
    }
}
