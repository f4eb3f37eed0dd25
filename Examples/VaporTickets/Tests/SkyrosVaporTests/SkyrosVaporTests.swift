import Foundation
import Logging
import Synchronization
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
        app.post("notes", "queued") { req -> HTTPStatus in
            let note = try req.content.decode(Note.self)
            try await req.skyros.write(durability: .visible) { try $0.insert(note) }   // returns before the commit
            return .accepted
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
        // The queued write was drained into the store, and the stack refuses writes: it shut down.
        #expect(try await stack.store.object(Note.self, id: 2)?.value.text == "queued")
        let refused = await #expect(throws: DataStackError.self) {
            try await stack.write { try $0.insert(Note(id: 3, text: "late")) }
        }
        #expect(refused?.code == .stackShutDown)
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

    @Test func aQueuedWritesFailureIsLoggedWithTheRequestsId() async throws {
        let records = RecordedLogs()
        try await withApp(configure: { app in
            app.logger = Logger(label: "vapor-test", factory: { _ in RecordingLogHandler(records: records) })
            Self.configure(app)
        }) { app in
            try await app.asyncBoot()
            let stack = try #require(app.skyros.runningStack)
            try await stack.write(durability: .committed) { try $0.insert(Note(id: 9, text: "there first")) }
            var errors = stack.errors.makeAsyncIterator()
            try await app.testing().test(.POST, "notes/queued", beforeRequest: { req in
                req.headers.replaceOrAdd(name: "X-Request-Id", value: "req-vapor-77")
                try req.content.encode(Note(id: 9, text: "again"))
            }, afterResponse: { res in
                #expect(res.status == .accepted)
            })
            #expect(await errors.next()?.code == .commitFailed)
            // The commit failed after the handler returned: its one `error` record carries the request's id.
            let failures = records.entries.filter { $0.level == .error }
            #expect(failures.count == 1)
            #expect(failures.first?.metadata["request-id"]?.description == "req-vapor-77")
            #expect(failures.first?.metadata["skyros.entity"]?.description == "Note")
        }
    }
}

/// What a ``RecordingLogHandler`` saw, shared by every copy of it.
final class RecordedLogs: Sendable {
    struct Entry: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: Logger.Metadata
    }
    private let lock = Mutex<[Entry]>([])
    var entries: [Entry] { self.lock.withLock { $0.map { $0 } } }   // a new array: no storage shared with writers
    func append(_ entry: Entry) { self.lock.withLock { $0.append(entry) } }
}

/// A log handler that records every record with its merged metadata.
struct RecordingLogHandler: LogHandler {
    let records: RecordedLogs
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        self.records.append(
            RecordedLogs.Entry(
                level: event.level, message: "\(event.message)", metadata: self.metadata.merging(event.metadata ?? [:]) { $1 }))
    }
}
