import Foundation
import Hummingbird
import Skyros

/// A support ticket: a row of `tickets`, and a JSON body of the HTTP API.
struct Ticket: Entity, ResponseCodable, Equatable {
    var id: UUID
    var title: String
    var status: String
    var priority: Int

    static let tableName = "tickets"
    static let columns: [EntityColumn<Ticket>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.status, "status"),
        EntityColumn(\.priority, "priority"),
    ]
    static let versionColumn: String? = "row_version"
    static let defaultSort = [SortDescriptor(\Ticket.priority, order: .reverse)]   // then the id, always

    /// The open tickets, most urgent first: what the list and the live stream show.
    static let open = FetchDescriptor<Ticket>(
        predicate: #Predicate { $0.status == "open" }, fetchLimit: 100)   // in the default order
}

/// A ticket as `GET /tickets/:id`, `POST /tickets` and `PUT /tickets/:id` answer it: the row, its version
/// (also the response's `ETag`; send it back in `If-Match` to update) and whether a queued write of it has not
/// committed yet.
struct TicketRecord: ResponseCodable, Equatable {
    var id: UUID
    var title: String
    var status: String
    var priority: Int
    /// The row version (`row_version`: 1 on insert, +1 on every write); `nil` while `pending`.
    var version: Int64?
    /// `true` while a queued write of the ticket (`Prefer: respond-async`) has not committed: if that write
    /// fails it is reverted and the ticket answers 404.
    var pending: Bool

    init(_ ticket: Ticket, version: Int64?, pending: Bool = false) {
        self.id = ticket.id
        self.title = ticket.title
        self.status = ticket.status
        self.priority = ticket.priority
        self.version = version
        self.pending = pending
    }
}

/// The body of `POST /tickets`.
struct NewTicket: Decodable {
    var title: String
    var priority: Int?
}

/// The body of `PUT /tickets/:id`: the ticket's new title, priority and status (`open` or `closed`).
struct TicketChange: Decodable {
    var title: String
    var priority: Int
    var status: String
}

/// The request context of every route: Hummingbird's basic one with a 16 KiB limit on a body it decodes
/// (a larger one answers 413).
struct TicketsContext: RequestContext {
    var coreContext: CoreRequestContextStorage

    init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
    }

    var maxUploadSize: Int { 16 * 1024 }
}
