import Foundation
import HTTPTypes
import Hummingbird
import ServiceLifecycle
import Skyros

/// The HTTP API: health, list, create and close tickets, and a server-sent-events stream of the open tickets
/// that updates itself when any instance of the service (any process) commits a change.
struct TicketRoutes: Sendable {
    let lifecycle: Lifecycle
    let feed: TicketFeed
    /// The interval of the `: heartbeat` comment on an idle event stream.
    let heartbeat: Duration

    func register(on router: Router<BasicRequestContext>) {
        // 200 `{"status":"ready"}` while serving; 503 with `starting` until the stack started and with
        // `draining` once SIGTERM arrived.
        router.get("/health") { _, _ -> Response in
            let status = self.lifecycle.status
            return ErrorResponses<BasicRequestContext>.json(
                status: status == "ready" ? .ok : .serviceUnavailable, ["status": status])
        }
        router.get("/tickets") { _, _ -> [Ticket] in
            try await self.lifecycle.stack().read { try await $0.fetch(Ticket.open) }
        }
        router.post("/tickets") { request, context -> EditedResponse<Ticket> in
            let stack = try self.lifecycle.stack()
            let body = try await request.decode(as: NewTicket.self, context: context)
            guard !body.title.isEmpty else { throw HTTPError(.badRequest, message: "title is empty") }
            let ticket = Ticket(id: UUID(), title: body.title, status: "open", priority: body.priority ?? 0)
            // Durable: the response goes out after PostgreSQL committed, and a failure comes back here. The
            // request's logger makes the stack's own records of this write carry the request id too.
            try await stack.write(durability: .committed, logger: context.logger) { try $0.insert(ticket) }
            context.logger.info("ticket created", metadata: ["ticket.id": "\(ticket.id)"])
            return EditedResponse(status: .created, response: ticket)
        }
        router.post("/tickets/:id/close") { _, context -> Ticket in
            let stack = try self.lifecycle.stack()
            let id = try context.parameters.require("id", as: UUID.self)
            let closed = try await stack.write(durability: .committed, logger: context.logger) { context in
                guard var ticket = try await context.object(Ticket.self, id: id) else {
                    throw HTTPError(.notFound, message: "no ticket \(id)")
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
}
