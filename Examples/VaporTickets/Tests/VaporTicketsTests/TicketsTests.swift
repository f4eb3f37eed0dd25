import Foundation
import Skyros
import SkyrosPostgres
import Testing
import VaporTesting
import VaporTicketsApp

/// The ticket API against a real PostgreSQL (`DATABASE_URL`; `./smoke` starts a throw-away one). Each test
/// runs in a schema of its own, dropped at the end.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["DATABASE_URL"] != nil, "needs DATABASE_URL"))
struct TicketsTests {
    static var databaseURL: String { ProcessInfo.processInfo.environment["DATABASE_URL"] ?? "" }

    /// The migrations directory of this package, wherever the tests run from.
    static let migrations = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("migrations").path

    /// Boots the application on a fresh schema, runs `test`, shuts it down (draining the queue) and drops the schema.
    func withTickets(_ test: (Application, String) async throws -> Void) async throws {
        let schema = Self.newSchema()
        do {
            try await withApp(configure: { app in
                app.logger.logLevel = .warning   // Vapor logs every request at info
                try configure(app, TicketsSettings(databaseURL: Self.databaseURL, schema: schema, migrations: Self.migrations))
                try await app.asyncBoot()   // app.testing() boots synchronously, which cannot start the stack
            }, { app in try await test(app, schema) })
        } catch {
            try? await Self.dropSchema(schema)
            throw error
        }
        try await Self.dropSchema(schema)
    }

    static func newSchema() -> String { "vapor_tickets_\(UInt32.random(in: 0 ... .max))" }

    static func dropSchema(_ schema: String) async throws {
        try await Self.execute("DROP SCHEMA IF EXISTS \(identifier: schema) CASCADE")
    }

    static let jsonHeaders: HTTPHeaders = ["content-type": "application/json"]

    static let asyncHeaders: HTTPHeaders = ["content-type": "application/json", "prefer": "respond-async"]

    /// Checks that `res` is an error in Vapor's shape, `{"error": true, "reason": "…"}`, and returns the reason.
    @discardableResult
    static func errorReason(_ res: TestingHTTPResponse, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        #expect(res.headers.contentType == .json, sourceLocation: sourceLocation)
        let body = try res.content.decode(ErrorBody.self)
        #expect(body.error, sourceLocation: sourceLocation)
        return body.reason
    }

    /// Polls `condition` every 50 ms until it holds or 30 s passed.
    static func eventually(_ what: String, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("timed out waiting for \(what)")
    }

    @Test func createListAndClose() async throws {
        try await withTickets { app, schema in
            #expect(app.skyros.runningStack != nil)
            try await app.testing().test(.GET, "health") { res in #expect(res.status == .ok) }

            var created: Ticket?
            try await app.testing().test(
                .POST, "tickets", headers: Self.jsonHeaders,
                body: ByteBuffer(string: #"{"title": "printer on fire", "priority": "5"}"#)
            ) { res in
                // A priority given as a string does not decode: 400 with a JSON body.
                #expect(res.status == .badRequest)
                try Self.errorReason(res)
            }
            try await app.testing().test(
                .POST, "tickets", headers: Self.jsonHeaders, body: ByteBuffer(string: #"{"title": "printer on fire", "prio"#)
            ) { res in
                // Not JSON at all: 400, and the reason does not echo the body.
                #expect(res.status == .badRequest)
                let reason = try Self.errorReason(res)
                #expect(!reason.contains("prio"))
            }
            try await app.testing().test(
                .POST, "tickets", headers: Self.jsonHeaders,
                body: ByteBuffer(string: #"{"title": "printer on fire", "priority": 5}"#)
            ) { res in
                #expect(res.status == .created)
                created = try res.content.decode(Ticket.self)
                #expect(res.headers.first(name: .location) == "/tickets/\(created?.id.uuidString ?? "")")
            }
            let ticket = try #require(created)
            #expect(ticket.title == "printer on fire" && ticket.priority == 5 && ticket.status == "open")
            // 201 means committed: PostgreSQL holds it now.
            let stored = try await Self.status(of: ticket.id, in: schema)
            #expect(stored == "open")

            try await app.testing().test(.GET, "tickets") { res in
                #expect(res.status == .ok)
                let decoded = try res.content.decode([Ticket].self)
                #expect(decoded == [ticket])
            }
            try await app.testing().test(.POST, "tickets/\(ticket.id)/close") { res in
                #expect(res.status == .ok)
                let decoded = try res.content.decode(Ticket.self)
                #expect(decoded.status == "closed")
            }
            try await app.testing().test(.GET, "tickets") { res in
                let decoded = try res.content.decode([Ticket].self)
                #expect(decoded.isEmpty)
            }
            // Committed: a fresh read from PostgreSQL sees it closed.
            let status = try await Self.status(of: ticket.id, in: schema)
            #expect(status == "closed")

            try await app.testing().test(.POST, "tickets/\(UUID())/close") { res in
                #expect(res.status == .notFound)
                try Self.errorReason(res)
            }
        }
    }

    @Test func aDuplicateTitleIs409AndOneRow() async throws {
        try await withTickets { app, schema in
            try await app.testing().test(
                .POST, "tickets", headers: Self.jsonHeaders, body: ByteBuffer(string: #"{"title": "printer on fire"}"#)
            ) { res in #expect(res.status == .created) }
            try await app.testing().test(
                .POST, "tickets", headers: Self.jsonHeaders, body: ByteBuffer(string: #"{"title": "printer on fire"}"#)
            ) { res in
                #expect(res.status == .conflict)
                let reason = try Self.errorReason(res)
                #expect(reason == "a ticket with this title exists")
            }
            let count = try await Self.count(in: schema)
            #expect(count == 1)
            // The list shows the one ticket (the failed insert was reverted from the cache too).
            try await app.testing().test(.GET, "tickets") { res in
                let titles = try res.content.decode([Ticket].self).map(\.title)
                #expect(titles == ["printer on fire"])
            }
        }
    }

    @Test func readUpdateWithTheVersionAndDelete() async throws {
        try await withTickets { app, schema in
            var created: TicketRecord?
            try await app.testing().test(
                .POST, "tickets", headers: Self.jsonHeaders, body: ByteBuffer(string: #"{"title": "paper jam", "priority": 2}"#)
            ) { res in
                #expect(res.status == .created)
                created = try res.content.decode(TicketRecord.self)
                #expect(res.headers.first(name: .eTag) == "\"1\"")
            }
            let ticket = try #require(created)
            #expect(ticket.version == 1 && !ticket.pending)
            try await app.testing().test(.GET, "tickets/\(ticket.id)") { res in
                #expect(res.status == .ok)
                let read = try res.content.decode(TicketRecord.self)
                #expect(read == ticket)
                #expect(res.headers.first(name: .eTag) == "\"1\"")
            }
            let change = ByteBuffer(string: #"{"title": "paper jam, tray 2", "priority": 4, "status": "open"}"#)
            try await app.testing().test(.PUT, "tickets/\(ticket.id)", headers: Self.jsonHeaders, body: change) { res in
                #expect(res.status == .preconditionRequired)   // no If-Match
                try Self.errorReason(res)
            }
            var withVersion = Self.jsonHeaders
            withVersion.replaceOrAdd(name: .ifMatch, value: "\"1\"")
            try await app.testing().test(.PUT, "tickets/\(ticket.id)", headers: withVersion, body: change) { res in
                #expect(res.status == .ok)
                let updated = try res.content.decode(TicketRecord.self)
                #expect(updated.title == "paper jam, tray 2" && updated.priority == 4 && updated.version == 2)
                #expect(res.headers.first(name: .eTag) == "\"2\"")
            }
            // The same version again is stale now: 412, and nothing written.
            let lost = ByteBuffer(string: #"{"title": "lost update", "priority": 1, "status": "closed"}"#)
            try await app.testing().test(.PUT, "tickets/\(ticket.id)", headers: withVersion, body: lost) { res in
                #expect(res.status == .preconditionFailed)
                try Self.errorReason(res)
            }
            let rows = try await Self.query(
                "SELECT title, priority::int8, row_version FROM \(qualified: [schema, "tickets"]) WHERE id = \(ticket.id)")
            let title = try rows[0].decode(String.self, at: 0)
            #expect(title == "paper jam, tray 2")
            let priority = try rows[0].decode(Int64.self, at: 1)
            #expect(priority == 4)
            let version = try rows[0].decode(Int64.self, at: 2)
            #expect(version == 2)
            try await app.testing().test(.GET, "tickets/\(ticket.id)") { res in
                let version = try res.content.decode(TicketRecord.self).version
                #expect(version == 2)
            }
            try await app.testing().test(.PUT, "tickets/\(UUID())", headers: withVersion, body: change) { res in
                #expect(res.status == .notFound)
            }
            let badStatus = ByteBuffer(string: #"{"title": "x", "priority": 1, "status": "gone"}"#)
            try await app.testing().test(.PUT, "tickets/\(ticket.id)", headers: withVersion, body: badStatus) { res in
                #expect(res.status == .badRequest)
            }

            try await app.testing().test(.DELETE, "tickets/\(ticket.id)") { res in #expect(res.status == .noContent) }
            let remaining = try await Self.count(in: schema)
            #expect(remaining == 0)
            try await app.testing().test(.GET, "tickets/\(ticket.id)") { res in
                #expect(res.status == .notFound)
                try Self.errorReason(res)
            }
            try await app.testing().test(.DELETE, "tickets/\(ticket.id)") { res in #expect(res.status == .notFound) }
        }
    }

    /// Comments by people created on first use; the ticket with its comments and their authors (prefetched);
    /// a comment another writer inserts; `?include=comments`; the ticket's delete cascading to its comments.
    @Test func aTicketsCommentsComeWithTheirAuthors() async throws {
        try await withTickets { app, schema in
            var created: TicketRecord?
            try await app.testing().test(.POST, "tickets", headers: Self.jsonHeaders, body: ByteBuffer(string: #"{"title": "threaded"}"#)) { res in
                #expect(res.status == .created)
                created = try res.content.decode(TicketRecord.self)
            }
            let ticket = try #require(created)
            for who in ["ada", "grace", "ada"] {
                try await app.testing().test(
                    .POST, "tickets/\(ticket.id)/comments", headers: Self.jsonHeaders,
                    body: ByteBuffer(string: #"{"author": "\#(who)", "body": "from \#(who)"}"#)
                ) { res in
                    #expect(res.status == .created)
                    let entry = try res.content.decode(TicketThread.Entry.self)
                    #expect(entry.author == who)
                }
            }
            try await app.testing().test(
                .POST, "tickets/\(UUID())/comments", headers: Self.jsonHeaders, body: ByteBuffer(string: #"{"author": "ada", "body": "x"}"#)
            ) { res in #expect(res.status == .notFound) }
            let people = try await Self.query("SELECT count(*)::int8 FROM \(qualified: [schema, "people"])")[0].decode(Int64.self, at: 0)
            #expect(people == 2)
            func thread() async throws -> [String] {
                var lines: [String] = []
                try await app.testing().test(.GET, "tickets/\(ticket.id)/comments") { res in
                    #expect(res.status == .ok)
                    let thread = try res.content.decode(TicketThread.self)
                    #expect(thread.ticket.id == ticket.id)
                    lines = thread.comments.map { "\($0.author): \($0.body)" }
                }
                return lines
            }
            #expect(try await thread() == ["ada: from ada", "grace: from grace", "ada: from ada"])
            // Another writer's comment reaches the stack's cache and the thread.
            try await Self.execute("INSERT INTO \(qualified: [schema, "people"]) VALUES ('sql')")
            try await Self.execute(
                "INSERT INTO \(qualified: [schema, "comments"]) (id, ticket_id, author_name, body) VALUES (\(UUID()), \(ticket.id), 'sql', 'from sql')")
            try await Self.eventually("the other writer's comment in the thread") { try await thread().count == 4 }
            #expect(try await thread().last == "sql: from sql")
            try await app.testing().test(.GET, "tickets?include=comments") { res in
                let threads = try res.content.decode([TicketThread].self)
                #expect(threads.first { $0.ticket.id == ticket.id }?.comments.count == 4)
            }
            try await app.testing().test(.DELETE, "tickets/\(ticket.id)") { res in #expect(res.status == .noContent) }
            let left = try await Self.query("SELECT count(*)::int8 FROM \(qualified: [schema, "comments"])")[0].decode(Int64.self, at: 0)
            #expect(left == 0)
            try await app.testing().test(.GET, "tickets/\(ticket.id)/comments") { res in #expect(res.status == .notFound) }
        }
    }

    @Test func aQueuedCreateIs202AndItsOutcomeIsReadable() async throws {
        try await withTickets { app, schema in
            // Accepted: its Location reports pending until it commits, then its version.
            var location: String?
            try await app.testing().test(
                .POST, "tickets", headers: Self.asyncHeaders, body: ByteBuffer(string: #"{"title": "queued"}"#)
            ) { res in
                #expect(res.status == .accepted)
                let pending = try res.content.decode(TicketRecord.self).pending
                #expect(pending)
                location = res.headers.first(name: .location)
            }
            let accepted = try #require(location)
            try await Self.eventually("the queued ticket to commit") {
                var committed = false
                try await app.testing().test(.GET, accepted) { res in
                    #expect(res.status == .ok)
                    let record = try res.content.decode(TicketRecord.self)
                    committed = !record.pending && record.version == 1
                }
                return committed
            }
            let count = try await Self.count(in: schema)
            #expect(count == 1)

            // A queued duplicate is accepted (202), fails at its commit, is reverted: its Location answers 404.
            try await app.testing().test(
                .POST, "tickets", headers: Self.asyncHeaders, body: ByteBuffer(string: #"{"title": "queued"}"#)
            ) { res in
                #expect(res.status == .accepted)
                location = res.headers.first(name: .location)
            }
            let failed = try #require(location)
            try await Self.eventually("the queued duplicate to be reverted") {
                var status: HTTPResponseStatus = .ok
                try await app.testing().test(.GET, failed) { res in status = res.status }
                return status == .notFound
            }
            let afterFailure = try await Self.count(in: schema)
            #expect(afterFailure == 1)
        }
    }

    @Test func aValueRefusedAtTheDoorIs400WithJSON() async throws {
        try await withTickets { app, schema in
            try await app.testing().test(
                .POST, "tickets", headers: Self.jsonHeaders,
                body: ByteBuffer(string: #"{"title": "too urgent", "priority": 9999999999}"#)
            ) { res in
                #expect(res.status == .badRequest)
                #expect(res.headers.contentType == .json)
                let reason = try Self.errorReason(res)
                #expect(reason.contains("priority"))
                #expect(!reason.contains("9999999999"))
            }
            let stored = try await Self.count(in: schema)
            #expect(stored == 0)
        }
    }

    @Test func aConcurrentChangeIsNeverLost() async throws {
        try await withTickets { app, schema in
            let ticket = Ticket(id: UUID(), title: "flaky", status: "open", priority: 1)
            let stack = app.skyros.stack
            try await stack.write(durability: .committed) { try $0.insert(ticket) }
            // Another writer (psql, another instance) changes the row behind this stack's cache.
            try await Self.execute(
                "UPDATE \(qualified: [schema, "tickets"]) SET title = 'edited', row_version = row_version + 1 WHERE id = \(ticket.id)")
            try await app.testing().test(.POST, "tickets/\(ticket.id)/close") { res in
                // Either the feed already evicted the stale row (the close then succeeds on the new version),
                // or the close was guarded by the old version: 409 with a JSON body, never a lost update.
                if res.status == .conflict {
                    try Self.errorReason(res)
                } else {
                    #expect(res.status == .ok)
                    let decoded = try res.content.decode(Ticket.self)
                    #expect(decoded.title == "edited")
                }
            }
        }
    }

    @Test func shutdownDrainsQueuedWrites() async throws {
        let schema = Self.newSchema()
        let app = try await Application.make(.testing)
        app.logger.logLevel = .warning
        do {
            try configure(app, TicketsSettings(databaseURL: Self.databaseURL, schema: schema, migrations: Self.migrations))
            try await app.asyncBoot()
            // Each POST returns once the ticket is visible (202); its commit is queued.
            for index in 0..<50 {
                try await app.testing().test(
                    .POST, "tickets", headers: Self.asyncHeaders, body: ByteBuffer(string: #"{"title": "queued \#(index)"}"#)
                ) { res in #expect(res.status == .accepted) }
            }
            try await app.asyncShutdown()
        } catch {
            try? await app.asyncShutdown()
            try? await Self.dropSchema(schema)
            throw error
        }
        #expect(app.skyros.runningStack == nil)
        let count = try await Self.count(in: schema)
        #expect(count == 50)
        try await Self.dropSchema(schema)
    }

    // MARK: Reading PostgreSQL directly (not through the stack)

    /// Runs `query` on a connection of its own (closed after it), outside the stack.
    static func query(_ query: PGQuery) async throws -> PGRows {
        let connection = try await PGConnection.connect(to: try PGConfiguration(url: Self.databaseURL))
        do {
            let rows = try await connection.query(query)
            await connection.close()
            return rows
        } catch {
            await connection.close()
            throw error
        }
    }

    static func execute(_ query: PGQuery) async throws {
        _ = try await Self.query(query)
    }

    static func count(in schema: String) async throws -> Int {
        let rows = try await Self.query("SELECT count(*)::int8 FROM \(qualified: [schema, "tickets"])")
        return Int(try rows[0].decode(Int64.self, at: 0))
    }

    static func status(of id: UUID, in schema: String) async throws -> String? {
        let rows = try await Self.query("SELECT status FROM \(qualified: [schema, "tickets"]) WHERE id = \(id)")
        return rows.isEmpty ? nil : try rows[0].decode(String.self, at: 0)
    }
}
