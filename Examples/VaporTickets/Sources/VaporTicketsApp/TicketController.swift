import Foundation
import Skyros
import SkyrosVapor
import Vapor

/// The HTTP API: list, create, read, update, delete and close tickets. Every handler uses `req.skyros`, the
/// application's stack; every write is bounded by the stack's `writeTimeout` (503 past it).
///
/// A `201`, `200` or `204` after a write means PostgreSQL committed it. `POST /tickets` with
/// `Prefer: respond-async` queues the insert instead and answers `202` with a `Location`: `GET` it to learn
/// the outcome (`pending: true` until it commits, then its version; `404` once it failed and was reverted).
struct TicketController: RouteCollection {
    func boot(routes: any RoutesBuilder) throws {
        let tickets = routes.grouped("tickets")
        tickets.get(use: self.list)
        tickets.post(use: self.create)
        tickets.get(":id", use: self.show)
        tickets.put(":id", use: self.replace)
        tickets.delete(":id", use: self.remove)
        tickets.post(":id", "close", use: self.close)
        tickets.get(":id", "comments", use: self.thread)
        tickets.post(":id", "comments", use: self.comment)
    }

    /// `GET /tickets`: the open tickets, most urgent first, through the main context's cache. With
    /// `?include=comments`, each with its comments and their authors (three queries for all of them).
    @Sendable func list(req: Request) async throws -> Response {
        guard req.query[String.self, at: "include"] == "comments" else {
            return try await req.skyros.read { try await $0.fetch(Ticket.open) }.encodeResponse(for: req)
        }
        let threads = try await req.skyros.read { context in
            let results = try await context.fetchWithRelationships(Ticket.withComments(Ticket.open))
            return try results.map { try TicketThread($0, in: results) }
        }
        return try await threads.encodeResponse(for: req)
    }

    /// `GET /tickets/:id/comments`: the ticket with its comments and their authors (three queries); `404` when
    /// absent.
    @Sendable func thread(req: Request) async throws -> TicketThread {
        let id = try Self.id(req)
        return try await req.skyros.read { context in
            let results = try await context.fetchWithRelationships(Ticket.withComments(FetchDescriptor(predicate: #Predicate { $0.id == id })))
            guard let ticket = results.first else { throw Abort(.notFound, reason: "no such ticket") }
            return try TicketThread(ticket, in: results)
        }
    }

    /// `POST /tickets/:id/comments` with `{"author", "body"}`: `201` once committed, the author created on first
    /// use (`findOrCreate`, in the same transaction); `404` for no such ticket.
    @Sendable func comment(req: Request) async throws -> Response {
        let id = try Self.id(req)
        let body = try req.content.decode(NewComment.self)
        guard !body.author.isEmpty, !body.body.isEmpty else { throw Abort(.badRequest, reason: "author and body are required") }
        let comment = try await req.skyros.write(durability: .committed) { context -> Comment in
            guard try await context.object(Ticket.self, id: id) != nil else { throw Abort(.notFound, reason: "no such ticket") }
            let (author, _) = try await context.findOrCreate(Person(name: body.author))
            return try context.insert(
                Comment(id: UUID(), ticket: Reference(id), author: Reference(to: author), body: body.body, createdAt: .now))
        }
        let stored = try await req.skyros.read { try await $0.object(Comment.self, id: comment.id) } ?? comment
        let entry = TicketThread.Entry(id: stored.id, author: body.author, body: stored.body, createdAt: stored.createdAt)
        return try await entry.encodeResponse(status: .created, for: req)
    }

    /// `POST /tickets`: `201` once PostgreSQL committed the ticket (a duplicate title: `409`, nothing stored).
    /// With `Prefer: respond-async`: `202` once every reader of this instance sees it, its commit queued (on
    /// SIGTERM the queue is drained before the process exits). A value the column cannot hold is refused
    /// before anything is queued (`400`).
    @Sendable func create(req: Request) async throws -> Response {
        let body = try req.content.decode(NewTicket.self)
        guard !body.title.isEmpty else { throw Abort(.badRequest, reason: "title is empty") }
        let ticket = Ticket(id: UUID(), title: body.title, status: "open", priority: body.priority ?? 0)
        let respondAsync = req.headers["Prefer"].contains { header in
            header.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces).lowercased() == "respond-async" }
        }
        let response: Response
        if respondAsync {
            try await req.skyros.write(durability: .visible) { try $0.insert(ticket) }
            response = try await TicketRecord(ticket, version: nil, pending: true).encodeResponse(status: .accepted, for: req)
            response.headers.replaceOrAdd(name: "Preference-Applied", value: "respond-async")
        } else {
            try await req.skyros.write(durability: .committed) { try $0.insert(ticket) }
            response = try await TicketRecord(ticket, version: 1).encodeResponse(status: .created, for: req)
            response.headers.replaceOrAdd(name: .eTag, value: Self.eTag(1))
        }
        response.headers.replaceOrAdd(name: .location, value: "/tickets/\(ticket.id)")
        return response
    }

    /// `GET /tickets/:id`: the ticket with its version (`ETag`) as PostgreSQL holds it; while a queued write of
    /// it has not committed, as this instance sees it with `pending: true` (no version yet). `404` when absent,
    /// including a queued insert that failed (it was reverted).
    @Sendable func show(req: Request) async throws -> Response {
        let id = try Self.id(req)
        let (found, version) = try await req.skyros.read { context in
            (try await context.object(Ticket.self, id: id), try await context.version(of: Ticket.self, id: id))
        }
        guard let ticket = found else { throw Abort(.notFound, reason: "no such ticket") }
        // No stored version while a queued write of it has not committed.
        guard let version else { return try await TicketRecord(ticket, version: nil, pending: true).encodeResponse(for: req) }
        let response = try await TicketRecord(ticket, version: version).encodeResponse(for: req)
        response.headers.replaceOrAdd(name: .eTag, value: Self.eTag(version))
        return response
    }

    /// `PUT /tickets/:id` with `If-Match: "<version>"` (the `ETag` of a `GET`) and `{"title", "priority",
    /// "status"}`: answers `200` with the new version once PostgreSQL committed. A stale version answers `412`
    /// (read it again), a missing `If-Match` `428`, an unknown ticket `404`.
    @Sendable func replace(req: Request) async throws -> Response {
        let id = try Self.id(req)
        guard let ifMatch = req.headers.first(name: .ifMatch) else {
            throw Abort(.preconditionRequired, reason: "send If-Match with the ticket's ETag (GET /tickets/:id)")
        }
        let change = try req.content.decode(TicketChange.self)
        guard !change.title.isEmpty else { throw Abort(.badRequest, reason: "title is empty") }
        guard ["open", "closed"].contains(change.status) else { throw Abort(.badRequest, reason: "status must be open or closed") }
        guard let expected = Int64(ifMatch.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))) else {
            throw Self.stale
        }
        let (ticket, changed): (Ticket, Bool)
        do {
            (ticket, changed) = try await req.skyros.write(durability: .committed) { context in
                guard let read = try await context.object(Ticket.self, id: id) else {
                    throw Abort(.notFound, reason: "no such ticket")
                }
                var ticket = read
                ticket.title = change.title
                ticket.priority = change.priority
                ticket.status = change.status
                // Guarded by the client's version: a stale one fails here or at the commit (a version conflict:
                // 412), never overwrites a change made since. Nothing is written when nothing changed.
                try await context.update(ticket, ifVersion: expected)
                return (ticket, ticket != read)
            }
        } catch where Self.isVersionConflict(error) {
            throw Self.stale
        }
        let version = changed ? expected + 1 : expected
        let response = try await TicketRecord(ticket, version: version).encodeResponse(for: req)
        response.headers.replaceOrAdd(name: .eTag, value: Self.eTag(version))
        return response
    }

    /// `DELETE /tickets/:id`: `204` once PostgreSQL committed the delete; `404` when absent.
    @Sendable func remove(req: Request) async throws -> HTTPStatus {
        let id = try Self.id(req)
        try await req.skyros.write(durability: .committed) { context in
            guard try await context.object(Ticket.self, id: id) != nil else { throw Abort(.notFound, reason: "no such ticket") }
            try await context.delete(Ticket.self, id: id)
        }
        return .noContent
    }

    /// `POST /tickets/:id/close`: answers after PostgreSQL committed; the update is guarded by the version it
    /// read (a concurrent change answers `409`, never a lost update).
    @Sendable func close(req: Request) async throws -> Ticket {
        let id = try Self.id(req)
        return try await req.skyros.write(durability: .committed) { context in
            guard var ticket = try await context.object(Ticket.self, id: id) else {
                throw Abort(.notFound, reason: "no such ticket")
            }
            ticket.status = "closed"
            try await context.update(ticket)
            return ticket
        }
    }

    static let stale = Abort(.preconditionFailed, reason: "the ticket changed since that version; read it again")

    static func id(_ req: Request) throws -> UUID {
        guard let id = req.parameters.get("id", as: UUID.self) else { throw Abort(.badRequest, reason: "the ticket id is not a UUID") }
        return id
    }

    static func eTag(_ version: Int64) -> String { "\"\(version)\"" }

    /// A version conflict, as the store raises it or wrapped by the stack.
    static func isVersionConflict(_ error: any Error) -> Bool {
        if case StoreError.versionConflict = error { return true }
        if let stack = error as? DataStackError, let underlying = stack.underlying { return self.isVersionConflict(underlying) }
        return false
    }
}
