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

    struct ErrorBody: Decodable {
        var error: String
        var message: String
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
                let decoded = try res.content.decode(ErrorBody.self)
                #expect(decoded.error == "invalid_body")
            }
            try await app.testing().test(
                .POST, "tickets", headers: Self.jsonHeaders,
                body: ByteBuffer(string: #"{"title": "printer on fire", "priority": 5}"#)
            ) { res in
                #expect(res.status == .created)
                created = try res.content.decode(Ticket.self)
            }
            let ticket = try #require(created)
            #expect(ticket.title == "printer on fire" && ticket.priority == 5 && ticket.status == "open")

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
                let decoded = try res.content.decode(ErrorBody.self)
                #expect(decoded.error == "http_404")
            }
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
                let body = try res.content.decode(ErrorBody.self)
                #expect(body.error == "invalid_value")
                #expect(body.message.contains("priority"))
                #expect(!body.message.contains("9999999999"))
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
                    let decoded = try res.content.decode(ErrorBody.self)
                    #expect(decoded.error == "version_conflict")
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
            // Each POST returns once the ticket is visible; its commit is queued.
            for index in 0..<50 {
                try await app.testing().test(
                    .POST, "tickets", headers: Self.jsonHeaders, body: ByteBuffer(string: #"{"title": "queued \#(index)"}"#)
                ) { res in #expect(res.status == .created) }
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
