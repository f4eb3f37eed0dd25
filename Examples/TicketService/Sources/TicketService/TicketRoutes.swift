import Foundation
import HTTPTypes
import Hummingbird
import ServiceLifecycle
import Skyros

/// The HTTP API: health; list, create, read, update, delete and close tickets; a server-sent-events stream of
/// the open tickets that updates itself when any instance of the service (any process) commits a change.
///
/// A `201`, `200` or `204` after a write means PostgreSQL committed it; every write is bounded by the stack's
/// `writeTimeout` (503 past it). `POST /tickets` with `Prefer: respond-async` queues the insert instead and
/// answers `202` with a `Location`: `GET` it to learn the outcome (`pending: true` until it commits, then its
/// version; `404` once it failed and was reverted).
struct TicketRoutes: Sendable {
    let lifecycle: Lifecycle
    let feed: TicketFeed
    /// The interval of the `: heartbeat` comment on an idle event stream.
    let heartbeat: Duration

    func register(on router: Router<TicketsContext>) {
        // 200 `{"status":"ready"}` while serving; 503 with `starting` until the stack started and with
        // `draining` once SIGTERM arrived.
        router.get("/health") { _, _ -> Response in
            let status = self.lifecycle.status
            return ErrorResponses<TicketsContext>.json(
                status: status == "ready" ? .ok : .serviceUnavailable, ["status": status])
        }
        router.get("/tickets") { request, _ -> Response in
            let stack = try self.lifecycle.stack()
            // `?include=comments`: each ticket with its comments and their authors, in three queries.
            guard request.uri.queryParameters.get("include") == "comments" else {
                return try Self.json(try await stack.read { try await $0.fetch(Ticket.open) })
            }
            let threads = try await stack.read { context in
                let results = try await context.fetchWithRelationships(Ticket.withComments(Ticket.open))
                return try results.map { try TicketThread($0, in: results) }
            }
            return try Self.json(threads)
        }
        // A comment by `author` (a person, created on first use): 201 once committed; 404 for no such ticket.
        router.post("/tickets/:id/comments") { request, context -> EditedResponse<TicketThread.Entry> in
            let stack = try self.lifecycle.stack()
            let id = try context.parameters.require("id", as: UUID.self)
            let body = try await Self.decode(NewComment.self, request, context)
            guard !body.author.isEmpty, !body.body.isEmpty else { throw HTTPError(.badRequest, message: "author and body are required") }
            let comment = try await stack.write(durability: .committed, logger: context.logger) { context -> Comment in
                guard try await context.object(Ticket.self, id: id) != nil else { throw HTTPError(.notFound, message: "no such ticket") }
                let (author, _) = try await context.findOrCreate(Person(name: body.author))
                return try context.insert(
                    Comment(id: UUID(), ticket: Reference(id), author: Reference(to: author), body: body.body, createdAt: .now))
            }
            let stored = try await stack.read { try await $0.object(Comment.self, id: comment.id) } ?? comment
            return EditedResponse(
                status: .created, headers: [.location: "/tickets/\(id)/comments"],
                response: TicketThread.Entry(id: stored.id, author: body.author, body: stored.body, createdAt: stored.createdAt))
        }
        // The ticket with its comments and their authors (three queries); 404 for no such ticket.
        router.get("/tickets/:id/comments") { _, context -> TicketThread in
            let stack = try self.lifecycle.stack()
            let id = try context.parameters.require("id", as: UUID.self)
            return try await stack.read { context in
                let results = try await context.fetchWithRelationships(
                    Ticket.withComments(FetchDescriptor(predicate: #Predicate { $0.id == id })))
                guard let ticket = results.first else { throw HTTPError(.notFound, message: "no such ticket") }
                return try TicketThread(ticket, in: results)
            }
        }
        router.post("/tickets") { request, context -> EditedResponse<TicketRecord> in
            let stack = try self.lifecycle.stack()
            let body = try await Self.decode(NewTicket.self, request, context)
            guard !body.title.isEmpty else { throw HTTPError(.badRequest, message: "title is empty") }
            let ticket = Ticket(id: UUID(), title: body.title, status: "open", priority: body.priority ?? 0)
            var headers: HTTPFields = [.location: "/tickets/\(ticket.id)"]
            let respondAsync = request.headers[values: HTTPField.Name("Prefer")!].contains { header in
                header.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces).lowercased() == "respond-async" }
            }
            if respondAsync {
                // Queued: answers once every reader of this instance sees it; its Location tells the outcome.
                try await stack.write(durability: .visible, logger: context.logger) { try $0.insert(ticket) }
                context.logger.info("ticket queued", metadata: ["ticket.id": "\(ticket.id)"])
                headers[HTTPField.Name("Preference-Applied")!] = "respond-async"
                return EditedResponse(status: .accepted, headers: headers, response: TicketRecord(ticket, version: nil, pending: true))
            }
            // Durable: the response goes out after PostgreSQL committed, and a failure comes back here. The
            // request's logger makes the stack's own records of this write carry the request id too.
            try await stack.write(durability: .committed, logger: context.logger) { try $0.insert(ticket) }
            context.logger.info("ticket created", metadata: ["ticket.id": "\(ticket.id)"])
            headers[.eTag] = Self.eTag(1)
            return EditedResponse(status: .created, headers: headers, response: TicketRecord(ticket, version: 1))
        }
        // The ticket with its version (ETag) as PostgreSQL holds it; while a queued write of it has not
        // committed, as this instance sees it with `pending: true`. 404 when absent (or reverted).
        router.get("/tickets/:id") { _, context -> EditedResponse<TicketRecord> in
            let stack = try self.lifecycle.stack()
            let id = try context.parameters.require("id", as: UUID.self)
            let (found, version) = try await stack.read { context in
                (try await context.object(Ticket.self, id: id), try await context.version(of: Ticket.self, id: id))
            }
            guard let ticket = found else { throw HTTPError(.notFound, message: "no such ticket") }
            // No stored version while a queued write of it has not committed.
            guard let version else { return EditedResponse(response: TicketRecord(ticket, version: nil, pending: true)) }
            return EditedResponse(headers: [.eTag: Self.eTag(version)], response: TicketRecord(ticket, version: version))
        }
        // `If-Match: "<version>"` (a GET's ETag) and the new title, priority and status: 200 with the new
        // version once committed; 412 for a stale version, 428 without If-Match.
        router.put("/tickets/:id") { request, context -> EditedResponse<TicketRecord> in
            let stack = try self.lifecycle.stack()
            let id = try context.parameters.require("id", as: UUID.self)
            guard let ifMatch = request.headers[.ifMatch] else {
                throw HTTPError(.preconditionRequired, message: "send If-Match with the ticket's ETag (GET /tickets/:id)")
            }
            let change = try await Self.decode(TicketChange.self, request, context)
            guard !change.title.isEmpty else { throw HTTPError(.badRequest, message: "title is empty") }
            guard ["open", "closed"].contains(change.status) else { throw HTTPError(.badRequest, message: "status must be open or closed") }
            guard let expected = Int64(ifMatch.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))) else { throw Self.stale }
            let (ticket, changed): (Ticket, Bool)
            do {
                (ticket, changed) = try await stack.write(durability: .committed, logger: context.logger) { context in
                    guard let read = try await context.object(Ticket.self, id: id) else {
                        throw HTTPError(.notFound, message: "no such ticket")
                    }
                    var ticket = read
                    ticket.title = change.title
                    ticket.priority = change.priority
                    ticket.status = change.status
                    // Guarded by the client's version: a stale one fails here or at the commit (a version
                    // conflict: 412), never overwrites a change made since. Nothing is written when nothing changed.
                    try await context.update(ticket, ifVersion: expected)
                    return (ticket, ticket != read)
                }
            } catch where Self.isVersionConflict(error) {
                throw Self.stale
            }
            let version = changed ? expected + 1 : expected
            context.logger.info("ticket updated", metadata: ["ticket.id": "\(id)"])
            return EditedResponse(headers: [.eTag: Self.eTag(version)], response: TicketRecord(ticket, version: version))
        }
        // 204 once the delete committed; 404 when absent.
        router.delete("/tickets/:id") { _, context -> HTTPResponse.Status in
            let stack = try self.lifecycle.stack()
            let id = try context.parameters.require("id", as: UUID.self)
            try await stack.write(durability: .committed, logger: context.logger) { context in
                guard try await context.object(Ticket.self, id: id) != nil else { throw HTTPError(.notFound, message: "no such ticket") }
                try await context.delete(Ticket.self, id: id)
            }
            context.logger.info("ticket deleted", metadata: ["ticket.id": "\(id)"])
            return .noContent
        }
        router.post("/tickets/:id/close") { _, context -> Ticket in
            let stack = try self.lifecycle.stack()
            let id = try context.parameters.require("id", as: UUID.self)
            let closed = try await stack.write(durability: .committed, logger: context.logger) { context in
                guard var ticket = try await context.object(Ticket.self, id: id) else {
                    throw HTTPError(.notFound, message: "no such ticket")
                }
                ticket.status = "closed"
                try await context.update(ticket)        // guarded by the version it read: no lost update
                return ticket
            }
            context.logger.info("ticket closed", metadata: ["ticket.id": "\(id)"])
            return closed
        }
        // `curl -N localhost:8080/tickets/stream`: first `event: snapshot` (the open tickets), then one
        // `event: change` per change (the open tickets and the diff from the previous event), each with an
        // `id:`; `: heartbeat` when nothing changed for a while. A client that reconnects with
        // `Last-Event-ID` gets the changes it missed, or a snapshot when they are no longer known here.
        router.get("/tickets/stream") { request, context -> Response in
            _ = try self.lifecycle.stack()
            let feed = self.feed
            let heartbeat = self.heartbeat
            let resumeFrom = request.headers[HTTPField.Name("Last-Event-ID")!]
            let resumeAfter = feed.cursor(lastEventID: resumeFrom)
            if let resumeFrom {
                // A known id resumes with the changes after it; any other id gets a snapshot.
                context.logger.info(
                    "event stream resumed", metadata: ["sse.last_event_id": "\(resumeFrom)", "sse.known": "\(resumeAfter != nil)"])
            }
            let headers: HTTPFields = [.contentType: "text/event-stream", .cacheControl: "no-cache"]
            return Response(status: .ok, headers: headers, body: ResponseBody { writer in
                // Ends when the service shuts down gracefully (SIGTERM), so that the server can stop; or when
                // the client goes away (the write throws).
                var cursor = resumeAfter
                while !Task.isShuttingDownGracefully {
                    let step: TicketFeed.Step
                    do {
                        let from = cursor
                        let next = try await cancelWhenGracefulShutdown { try await feed.next(after: from, heartbeat: heartbeat) }
                        step = next.0
                        cursor = next.1
                    } catch {
                        break   // cancelled: graceful shutdown, or the connection closed
                    }
                    switch step {
                    case .frames(let frames):
                        var buffer = ByteBuffer()
                        for frame in frames {
                            buffer.writeString("id: \(frame.id)\nevent: \(frame.event)\ndata: ")
                            buffer.writeBytes(frame.data)
                            buffer.writeString("\n\n")
                        }
                        try await writer.write(buffer)
                    case .heartbeat:
                        try await writer.write(ByteBuffer(string: ": heartbeat\n\n"))
                    case .finished:
                        try await writer.finish(nil)
                        return
                    }
                }
                try await writer.finish(nil)
            })
        }
    }

    static var stale: HTTPError { HTTPError(.preconditionFailed, message: "the ticket changed since that version; read it again") }

    static func eTag(_ version: Int64) -> String { "\"\(version)\"" }

    /// The request body decoded as `type`; ``InvalidBody`` (400, a fixed reason) when it is not valid JSON for
    /// it, 413 over the context's upload limit.
    /// `value` as a JSON response (what a route returning `value` answers).
    static func json<T: Encodable>(_ value: T) throws -> Response {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: try encoder.encode(value))))
    }

    static func decode<T: Decodable>(_ type: T.Type, _ request: Request, _ context: TicketsContext) async throws -> T {
        do {
            return try await request.decode(as: type, context: context)
        } catch let error as HTTPError where error.status == .badRequest {
            throw InvalidBody()
        }
    }

    /// A version conflict, as the store raises it or wrapped by the stack.
    static func isVersionConflict(_ error: any Error) -> Bool {
        if case StoreError.versionConflict = error { return true }
        if let stack = error as? DataStackError, let underlying = stack.underlying { return self.isVersionConflict(underlying) }
        return false
    }
}
