import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

struct PublicNote: Entity, Equatable {
    var id: Int64
    var text: String
    static let tableName = "public_notes"
    static let columns: [EntityColumn<PublicNote>] = [EntityColumn(\.id, "id"), EntityColumn(\.text, "text")]
}

/// A stack configured without a schema (the connection's `search_path`, `public` here) captures every
/// writer's inserts, updates and deletes like one with a schema: the capture's functions, which run with a
/// fixed `search_path`, must name the log in the schema resolved at install. Its own database, since every
/// other suite works in a schema of its own.
@Suite("Capture on the default schema", .timeLimit(.minutes(2)))
struct CaptureDefaultSchemaTests {
    @Test func anotherWritersChangesOnPublicReachTheStack() async throws {
        let database = "capture_public_\(UUID().uuidString.prefix(8).lowercased())"
        let admin = try await TestServer.connect()
        try await admin.execute(script: "CREATE DATABASE \(quoteIdentifier(database))")
        var postgres = try TestServer.configuration
        postgres["dbname"] = database
        try await withCleanup {
            let setup = try await PGConnection.connect(to: postgres)
            try await setup.execute(script: "CREATE TABLE public_notes (id bigint PRIMARY KEY, text text NOT NULL)")
            await setup.close()
            let stack = try await DataStack.start(DataStackConfiguration(store: .postgres(postgres), entities: [PublicNote.self]))
            try await withCleanup {
                try await stack.write(durability: .committed) { try $0.insert(PublicNote(id: 1, text: "own")) }
                try await stack.write(durability: .committed) {
                    try await $0.update(PublicNote(id: 1, text: "own update"))
                }
                let other = try await PGConnection.connect(to: postgres)
                try await other.query("INSERT INTO public_notes VALUES (2, 'psql')")
                try await other.query("UPDATE public_notes SET text = 'psql update' WHERE id = 1")
                // One log row per transaction, two of the stack's and two of psql's: at commit with triggers, once
                // the relay wrote them with logical decoding.
                await expectEventually("one log row per transaction: two of the stack's, two of psql's") {
                    (try? await other.query("SELECT count(*) FROM public.skyros_change_log WHERE changes <> ''")[0]
                        .decode(Int.self, at: 0)) == 4
                }
                await other.close()
                await expectEventually("the stack's cache follows psql's insert and update") {
                    let one = try? await stack.mainContext.object(PublicNote.self, id: 1)
                    let two = try? await stack.mainContext.object(PublicNote.self, id: 2)
                    return one?.text == "psql update" && two?.text == "psql"
                }
            } cleanup: {
                await stack.shutdown()
            }
        } cleanup: {
            // A replication slot of the database (the logical source's) would refuse its drop.
            if let connection = try? await PGConnection.connect(to: postgres) {
                await TestServer.dropLogicalCapture(schema: "public", on: connection)
                await connection.close()
            }
            _ = try? await admin.execute(script: "DROP DATABASE IF EXISTS \(quoteIdentifier(database)) WITH (FORCE)")
            await admin.close()
        }
    }
}
