import Foundation
import Skyros
import Vapor

/// Someone who comments on tickets: a row of `people`, named by its key.
public struct Person: Entity, Equatable {
    /// The person's name, the table's key.
    public var id: String

    public var name: String { self.id }

    enum CodingKeys: String, CodingKey { case id = "name" }

    public static let tableName = "people"
    public static let columns: [EntityColumn<Person>] = [EntityColumn(\.id, "name")]

    public init(name: String) { self.id = name }
}

/// A comment on a ticket: a row of `comments`, referring to its ticket and its author (foreign keys).
public struct Comment: Entity, Equatable {
    public var id: UUID
    public var ticket: Reference<Ticket>
    public var author: Reference<Person>
    public var body: String
    public var createdAt: Date

    enum CodingKeys: String, CodingKey {
        case id, body
        case ticket = "ticket_id", author = "author_name", createdAt = "created_at"
    }

    public static let tableName = "comments"
    public static let columns: [EntityColumn<Comment>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.ticket, "ticket_id"), EntityColumn(\.author, "author_name"),
        EntityColumn(\.body, "body"), EntityColumn(\.createdAt, "created_at", generated: .onInsert),
    ]
    public static let defaultSort = [SortDescriptor(\Comment.createdAt)]   // then the id
    // A ticket's comments go with it; checked against the foreign key when the stack starts.
    public static let relationships: [Relationship<Comment>] = [.toOne(\.ticket, deleteRule: .cascade)]
}

extension Ticket {
    /// The ticket's comments (the inverse of `Comment.ticket`): prefetched, never held.
    public var comments: ToMany<Comment> { ToMany() }

    public static let relationships: [Relationship<Ticket>] = [.toMany(\.comments, inverse: \Comment.ticket)]

    /// A ticket, its comments and each comment's author, in three queries whatever the number of tickets.
    static func withComments(_ descriptor: FetchDescriptor<Ticket>) -> FetchDescriptor<Ticket> {
        var descriptor = descriptor
        descriptor.prefetchPaths = [PrefetchPath(\.comments, then: [PrefetchPath(\.author)])]
        return descriptor
    }
}

/// The body of `POST /tickets/:id/comments`.
struct NewComment: Content {
    var author: String
    var body: String
}

/// A ticket with its comments, as `GET /tickets/:id/comments` and `GET /tickets?include=comments` answer it.
public struct TicketThread: Content, Equatable {
    /// One comment, with its author's name.
    public struct Entry: Content, Equatable {
        public var id: UUID
        public var author: String
        public var body: String
        public var createdAt: Date
    }

    public var ticket: Ticket
    public var comments: [Entry]

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
