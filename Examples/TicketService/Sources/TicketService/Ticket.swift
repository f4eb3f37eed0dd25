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
    static let defaultSort = [SortDescriptor(\Ticket.priority, order: .reverse), SortDescriptor(\Ticket.id)]

    /// The open tickets, most urgent first: what the list and the live stream show.
    static let open = FetchDescriptor<Ticket>(
        predicate: #Predicate { $0.status == "open" },
        sortBy: [SortDescriptor(\.priority, order: .reverse), SortDescriptor(\.id)], fetchLimit: 100)
}

/// The body of `POST /tickets`.
struct NewTicket: Decodable {
    var title: String
    var priority: Int?
}
