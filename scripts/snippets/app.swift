// Prelude of the docs' code blocks (scripts/check-snippets): the entities the docs use (Author, Book, User,
// Ticket, Order, OrderLine) and values of them. Use with `values` (prelude=app,values).
import Foundation
import Logging
import Skyros

struct Author: Entity {
    var id: UUID
    var name: String
    var email: String?

    static let tableName = "authors"
    static let columns: [EntityColumn<Author>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.email, "email"),
    ]
    static let defaultSort = [SortDescriptor(\Author.name)]
}

struct Book: Entity {
    var id: UUID
    var title: String
    var authorID: UUID

    static let tableName = "books"
    static let columns: [EntityColumn<Book>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.authorID, "author_id"),
    ]
}

struct User: Entity {
    var id: Int
    var name: String
    var age: Int?

    static let tableName = "users"
    static let columns: [EntityColumn<User>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.age, "age"),
    ]
}

struct Ticket: Entity {
    var id: UUID
    var title: String
    var priority: Int
    var status: String = "open"
    var price: Decimal? = nil

    static let tableName = "tickets"
    static let columns: [EntityColumn<Ticket>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.priority, "priority"),
        EntityColumn(\.status, "status"), EntityColumn(\.price, "price"),
    ]
}

struct Order: Entity {
    var id: UUID
    var status: String

    static let tableName = "orders"
    static let columns: [EntityColumn<Order>] = [EntityColumn(\.id, "id"), EntityColumn(\.status, "status")]
}

struct OrderLine: Entity {
    var id: UUID
    var orderID: UUID
    var quantity: Int

    static let tableName = "order_lines"
    static let columns: [EntityColumn<OrderLine>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.orderID, "order_id"), EntityColumn(\.quantity, "quantity"),
    ]
}

// Computed globals: they compile and are never evaluated (the blocks never run).
var author: Author { fatalError() }
var book: Book { fatalError() }
var bob: User { fatalError() }
