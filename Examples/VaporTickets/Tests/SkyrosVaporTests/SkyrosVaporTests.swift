import Foundation
import Skyros
import SkyrosVapor
import Testing
import VaporTesting

/// A note: the entity of these tests (in memory, no server).
struct Note: Entity, Content, Equatable {
    var id: Int
    var text: String

    static let tableName = "notes"
    static let columns: [EntityColumn<Note>] = [EntityColumn(\.id, "id"), EntityColumn(\.text, "text")]
    static let defaultSort = [SortDescriptor(\Note.id)]
}

@Suite struct SkyrosVaporTests {
    /// Registers the integration on an in-memory stack and two routes that use `req.skyros`.
    static func configure(_ app: Application) {
        app.skyros.configure(DataStackConfiguration(store: .inMemory))
        app.post("notes") { req -> Note in
            let note = try req.content.decode(Note.self)
            try await req.skyros.write(durability: .committed) { try $0.insert(note) }
            return note
        }
        app.get("notes") { req -> [Note] in
            try await req.skyros.read { try await $0.fetch(FetchDescriptor<Note>()) }
        }
    }

    @Test func bootStartsTheStackAndRoutesUseIt() async throws {
        try await withApp(configure: { app in Self.configure(app) }) { app in
            #expect(app.skyros.runningStack == nil)
            try await app.asyncBoot()
            #expect(app.skyros.runningStack != nil)
            try await app.testing().test(.POST, "notes", beforeRequest: { req in
                try req.content.encode(Note(id: 1, text: "first"))
            }, afterResponse: { res in
                #expect(res.status == .ok)
            })
            try await app.testing().test(.GET, "notes") { res in
                #expect(res.status == .ok)
                let decoded = try res.content.decode([Note].self)
                #expect(decoded == [Note(id: 1, text: "first")])
            }
            // The same stack outside a request.
            let stored = try await app.skyros.stack.read { try await $0.object(Note.self, id: 1) }
            #expect(stored?.text == "first")
        }
    }

    @Test func shutdownStopsTheStack() async throws {
        let app = try await Application.make(.testing)
        Self.configure(app)
        try await app.asyncBoot()
        let stack = try #require(app.skyros.runningStack)
        try await stack.write { try $0.insert(Note(id: 2, text: "queued")) }   // not awaited to commit
        try await app.asyncShutdown()
        #expect(app.skyros.runningStack == nil)
        // After the drain the stack refuses writes: it shut down.
        await #expect(throws: DataStackError.self) {
            try await stack.write { try $0.insert(Note(id: 3, text: "late")) }
        }
    }

    @Test func synchronousBootIsRefusedWithAClearError() async throws {
        try await withApp(configure: { app in Self.configure(app) }) { app in
            #expect(throws: SkyrosVaporError.synchronousBoot) { _ = try app.testing() }
            #expect(app.skyros.runningStack == nil)
        }
    }

    @Test func aStackThatCannotStartFailsTheBoot() async throws {
        // Nothing listens on port 1 of the loopback: refused at once; `.zero` makes a single attempt.
        var configuration = DataStackConfiguration(
            store: .postgres(try PGConfiguration(url: "postgres://skyros:secret-pw@127.0.0.1:1/skyros")))
        configuration.waitForDatabase = .zero
        let app = try await Application.make(.testing)
        app.logger.logLevel = .critical
        app.skyros.configure(configuration)
        await #expect {
            try await app.asyncBoot()
        } throws: { error in
            guard let error = error as? DataStackError else { return false }
            return error.code == .storeUnreachable && !"\(error)".contains("secret-pw")
        }
        #expect(app.skyros.runningStack == nil)
        try await app.asyncShutdown()   // nothing to drain; returns
    }
}
