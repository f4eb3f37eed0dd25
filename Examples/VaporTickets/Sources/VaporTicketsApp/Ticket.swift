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

/// The body of `POST /tickets`.
struct NewTicket: Content {
    var title: String
    var priority: Int?
}
