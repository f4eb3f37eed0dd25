import Foundation
import Hummingbird
import Skyros

/// The HTTP API: list, create and close tickets, and a server-sent-events stream of the open tickets that
/// updates itself when any instance of the service (any process) commits a change.
struct TicketRoutes: Sendable {
    let stack: DataStack

    func register(on router: Router<BasicRequestContext>) {
        router.get("/tickets") { _, _ -> [Ticket] in
            try await self.stack.read { try await $0.fetch(Ticket.open) }
        }
        router.post("/tickets") { request, context -> EditedResponse<Ticket> in
            let body = try await request.decode(as: NewTicket.self, context: context)
            guard !body.title.isEmpty else { throw HTTPError(.badRequest, message: "title is empty") }
            let ticket = Ticket(id: UUID(), title: body.title, status: "open", priority: body.priority ?? 0)
            // Durable: the response goes out after PostgreSQL committed.
            try await self.stack.write(durability: .committed) { try $0.insert(ticket) }
            return EditedResponse(status: .created, response: ticket)
        }
        router.post("/tickets/:id/close") { _, context -> Ticket in
            let id = try context.parameters.require("id", as: UUID.self)
            return try await self.stack.write(durability: .committed) { context in
                guard var ticket = try await context.object(Ticket.self, id: id) else {
                    throw HTTPError(.notFound, message: "no ticket \(id)")
                }
                ticket.status = "closed"
                try await context.update(ticket)        // guarded by the version it read: no lost update
                return ticket
            }
        }
        // `curl -N localhost:8080/tickets/stream`: one `event: tickets` per change, its data the open tickets
        // and the diff from the previous event (the first event: every row inserted).
        router.get("/tickets/stream") { _, _ -> Response in
            let results = self.stack.observe(Ticket.open)
            let headers: HTTPFields = [.contentType: "text/event-stream", .cacheControl: "no-cache"]
            return Response(status: .ok, headers: headers, body: ResponseBody { writer in
                let encoder = JSONEncoder()
                // Ends by itself when the service shuts down gracefully (SIGTERM): the server can stop.
                for try await result in results {
                    var event = ByteBuffer(string: "event: tickets\ndata: ")
                    event.writeBytes(try encoder.encode(result))
                    event.writeString("\n\n")
                    try await writer.write(event)
                }
                try await writer.finish(nil)
            })
        }
    }
}
