import Foundation
import Skyros
import SkyrosVapor
import Vapor

/// The HTTP API: list, create and close tickets. Every handler uses `req.skyros`, the application's stack.
struct TicketController: RouteCollection {
    func boot(routes: any RoutesBuilder) throws {
        let tickets = routes.grouped("tickets")
        tickets.get(use: self.list)
        tickets.post(use: self.create)
        tickets.post(":id", "close", use: self.close)
    }

    /// `GET /tickets`: the open tickets, most urgent first, through the main context's cache.
    @Sendable func list(req: Request) async throws -> [Ticket] {
        try await req.skyros.read { try await $0.fetch(Ticket.open) }
    }

    /// `POST /tickets`: answers `201` once every reader of this instance sees the ticket; its commit is
    /// queued (the stack's default durability, `.visible`). On SIGTERM the queue is drained before the process
    /// exits. A value the column cannot hold is refused here, before anything is queued (`400`).
    @Sendable func create(req: Request) async throws -> Response {
        let body = try req.content.decode(NewTicket.self)
        guard !body.title.isEmpty else { throw Abort(.badRequest, reason: "title is empty") }
        let ticket = Ticket(id: UUID(), title: body.title, status: "open", priority: body.priority ?? 0)
        try await req.skyros.write { try $0.insert(ticket) }
        return try await ticket.encodeResponse(status: .created, for: req)
    }

    /// `POST /tickets/:id/close`: answers after PostgreSQL committed; the update is guarded by the version it
    /// read (a concurrent change answers `409`, never a lost update).
    @Sendable func close(req: Request) async throws -> Ticket {
        guard let id = req.parameters.get("id", as: UUID.self) else {
            throw Abort(.badRequest, reason: "the ticket id is not a UUID")
        }
        return try await req.skyros.write(durability: .committed) { context in
            guard var ticket = try await context.object(Ticket.self, id: id) else {
                throw Abort(.notFound, reason: "no ticket \(id)")
            }
            ticket.status = "closed"
            try await context.update(ticket)
            return ticket
        }
    }
}
