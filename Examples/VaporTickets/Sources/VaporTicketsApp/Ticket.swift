import Foundation
import Skyros
import Vapor

/// A support ticket: a row of `tickets`, and a JSON body of the HTTP API.
public struct Ticket: Entity, Content, Equatable {
    public var id: UUID
    public var title: String
    public var status: String
    public var priority: Int

    public static let tableName = "tickets"
    public static let columns: [EntityColumn<Ticket>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.status, "status"),
        EntityColumn(\.priority, "priority"),
    ]
    public static let versionColumn: String? = "row_version"
    public static let defaultSort = [SortDescriptor(\Ticket.priority, order: .reverse)]   // then the id, always

    /// The open tickets, most urgent first: what the list shows.
    public static let open = FetchDescriptor<Ticket>(
        predicate: #Predicate { $0.status == "open" }, fetchLimit: 100)   // in the default order

    public init(id: UUID, title: String, status: String, priority: Int) {
        self.id = id
        self.title = title
        self.status = status
        self.priority = priority
    }
}

/// A ticket as `GET /tickets/:id`, `POST /tickets` and `PUT /tickets/:id` answer it: the row, its version
/// (also the response's `ETag`; send it back in `If-Match` to update) and whether a queued write of it has not
/// committed yet.
public struct TicketRecord: Content, Equatable {
    public var id: UUID
    public var title: String
    public var status: String
    public var priority: Int
    /// The row version (`row_version`: 1 on insert, +1 on every write); `nil` while `pending`.
    public var version: Int64?
    /// `true` while a queued write of the ticket (`Prefer: respond-async`) has not committed: if that write
    /// fails it is reverted and the ticket answers 404.
    public var pending: Bool

    public init(_ ticket: Ticket, version: Int64?, pending: Bool = false) {
        self.id = ticket.id
        self.title = ticket.title
        self.status = ticket.status
        self.priority = ticket.priority
        self.version = version
        self.pending = pending
    }
}

/// The body of `POST /tickets`.
struct NewTicket: Content {
    var title: String
    var priority: Int?
}

/// The body of `PUT /tickets/:id`: the ticket's new title, priority and status (`open` or `closed`).
struct TicketChange: Content {
    var title: String
    var priority: Int
    var status: String
}
