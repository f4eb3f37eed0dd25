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

/// The body of `POST /tickets`.
struct NewTicket: Decodable {
    var title: String
    var priority: Int?
}
