// Prelude of the Relationships article's code blocks (scripts/check-snippets): publishers, authors and books
// joined by foreign keys, and tags of books through the join table book_tags. Not to be combined with `app`, whose Author and Book have no relationships. Use with
// `stack` (prelude=graph,stack).
import Foundation
import Logging
import Skyros

struct Publisher: Entity {
    var id: Int64
    var name: String
    var authors: ToMany<Author> { ToMany() }

    static let tableName = "publishers"
    static let columns: [EntityColumn<Publisher>] = [EntityColumn(\.id, "id"), EntityColumn(\.name, "name")]
    static let relationships: [Relationship<Publisher>] = [.toMany(\.authors, inverse: \Author.publisher)]
}

struct Author: Entity {
    var id: Int64
    var name: String
    var publisher: Reference<Publisher>?
    var books: ToMany<Book> { ToMany() }

    enum CodingKeys: String, CodingKey {
        case id, name
        case publisher = "publisher_id"
    }

    static let tableName = "authors"
    static let columns: [EntityColumn<Author>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.publisher, "publisher_id"),
    ]
    static let relationships: [Relationship<Author>] = [
        .toOne(\.publisher, deleteRule: .setNull), .toMany(\.books, inverse: \Book.author),
    ]
}

struct Book: Entity {
    var id: Int64
    var title: String
    var author: Reference<Author>
    var tags: ToMany<Tag> { ToMany() }

    enum CodingKeys: String, CodingKey {
        case id, title
        case author = "author_id"
    }

    static let tableName = "books"
    static let columns: [EntityColumn<Book>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.author, "author_id"),
    ]
    static let relationships: [Relationship<Book>] = [
        .toOne(\.author, deleteRule: .cascade), .manyToMany(\.tags, through: \BookTag.book, \BookTag.tag),
    ]
}

struct Tag: Entity {
    var id: Int64
    var label: String
    var books: ToMany<Book> { ToMany() }

    static let tableName = "tags"
    static let columns: [EntityColumn<Tag>] = [EntityColumn(\.id, "id"), EntityColumn(\.label, "label")]
    static let relationships: [Relationship<Tag>] = [.manyToMany(\.books, through: \BookTag.tag, \BookTag.book)]
}

struct BookTag: Entity {
    var book: Reference<Book>
    var tag: Reference<Tag>
    var id: CompositeKey<Reference<Book>, Reference<Tag>> { CompositeKey(self.book, self.tag) }

    enum CodingKeys: String, CodingKey {
        case book = "book_id"
        case tag = "tag_id"
    }

    static let tableName = "book_tags"
    static let columns: [EntityColumn<BookTag>] = [EntityColumn(\.book, "book_id"), EntityColumn(\.tag, "tag_id")]
    static let primaryKey = PrimaryKey<BookTag>(\.book, \.tag)
    static let relationships: [Relationship<BookTag>] = [.toOne(\.book, deleteRule: .cascade), .toOne(\.tag, deleteRule: .cascade)]
}

// Computed globals: they compile and are never evaluated (the blocks never run).
var store: any Store { fatalError() }
