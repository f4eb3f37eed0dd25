import Foundation
import Hummingbird
import Skyros

/// Someone who comments on tickets: a row of `people`, named by its key.
struct Person: Entity, Equatable {
    /// The person's name, the table's key.
    var id: String

    var name: String { self.id }

    enum CodingKeys: String, CodingKey { case id = "name" }

    init(name: String) { self.id = name }

    static let tableName = "people"
    static let columns: [EntityColumn<Person>] = [EntityColumn(\.id, "name")]
}

/// A comment on a ticket: a row of `comments`, referring to its ticket and its author (foreign keys).
struct Comment: Entity, Equatable {
    var id: UUID
    var ticket: Reference<Ticket>
    var author: Reference<Person>
    var body: String
    var createdAt: Date

    enum CodingKeys: String, CodingKey {
        case id, body
        case ticket = "ticket_id", author = "author_name", createdAt = "created_at"
    }

    static let tableName = "comments"
    static let columns: [EntityColumn<Comment>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.ticket, "ticket_id"), EntityColumn(\.author, "author_name"),
        EntityColumn(\.body, "body"), EntityColumn(\.createdAt, "created_at", generated: .onInsert),
    ]
    static let defaultSort = [SortDescriptor(\Comment.createdAt)]   // then the id
    // A ticket's comments go with it; checked against the foreign key when the stack starts.
    static let relationships: [Relationship<Comment>] = [.toOne(\.ticket, deleteRule: .cascade)]
}

extension Ticket {
    /// The ticket's comments (the inverse of `Comment.ticket`): prefetched, never held.
    var comments: ToMany<Comment> { ToMany() }

    static let relationships: [Relationship<Ticket>] = [.toMany(\.comments, inverse: \Comment.ticket)]

    /// A ticket, its comments and each comment's author, in three queries whatever the number of tickets.
    static func withComments(_ descriptor: FetchDescriptor<Ticket>) -> FetchDescriptor<Ticket> {
        var descriptor = descriptor
        descriptor.prefetchPaths = [PrefetchPath(\.comments, then: [PrefetchPath(\.author)])]
        return descriptor
    }
}

/// The body of `POST /tickets/:id/comments`.
struct NewComment: Decodable {
    var author: String
    var body: String
}

/// A ticket with its comments, as `GET /tickets/:id/comments` and `GET /tickets?include=comments` answer it.
struct TicketThread: ResponseCodable, Equatable {
    struct Entry: ResponseCodable, Equatable {
        var id: UUID
        var author: String
        var body: String
        var createdAt: Date
    }

    var ticket: Ticket
    var comments: [Entry]

    /// `ticket` and its comments from prefetched results (no query).
    init(_ ticket: Ticket, in results: PrefetchedResults<Ticket>) throws {
        self.ticket = ticket
        self.comments = try results.related(\.comments, of: ticket).map { comment in
            Entry(
                id: comment.id, author: try results.related(\.author, of: comment)?.name ?? comment.author.id,
                body: comment.body, createdAt: comment.createdAt)
        }
    }
}
