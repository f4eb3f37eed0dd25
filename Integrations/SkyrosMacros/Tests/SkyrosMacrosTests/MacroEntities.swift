import Foundation
import SkyrosMacros

/// The README's `Author`, declared with the macro, with its books (README.md, "Declaring an entity once").
@Entity(table: "authors")
struct Author {
    var id: UUID
    var name: String
    var email: String?
    @Related(inverse: \Book.author) var books: ToMany<Book> { ToMany() }

    static let defaultSort = [SortDescriptor(\Author.name)]
}

/// The README's `Book`, declared with the macro: `author` is the foreign key `author_id`, `ON DELETE CASCADE`.
@Entity(table: "books")
struct Book {
    var id: Int64
    var title: String
    @Related(deleteRule: .cascade) var author: Reference<Author>
}

/// A review of a book, and a reply to another review: a nullable foreign key `ON DELETE SET NULL` to its own
/// table, the to-many over it (an optional inverse), and a column named by `@Column`.
@Entity(table: "reviews")
struct Review {
    var id: Int64
    var text: String
    @Related(deleteRule: .cascade) @Column("reviewed_book") var book: Reference<Book>
    @Related(deleteRule: .setNull) var replyTo: Reference<Review>?              // reply_to_id
    @Related(inverse: \Review.replyTo) var replies: ToMany<Review> { ToMany() }
}

/// The README's `Author` as written by hand (scripts/snippets/app.swift), with its books.
struct HandWrittenAuthor: Entity {
    var id: UUID
    var name: String
    var email: String?
    var books: ToMany<HandWrittenBook> { ToMany() }

    static let tableName = "authors"
    static let columns: [EntityColumn<HandWrittenAuthor>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.email, "email"),
    ]
    static let defaultSort = [SortDescriptor(\HandWrittenAuthor.name)]
    static let relationships: [Relationship<HandWrittenAuthor>] = [.toMany(\.books, inverse: \HandWrittenBook.author)]
}

/// The README's `Book` as written by hand (README.md, "Relationships and prefetching").
struct HandWrittenBook: Entity {
    var id: Int64
    var title: String
    var author: Reference<HandWrittenAuthor>

    enum CodingKeys: String, CodingKey { case id, title, author = "author_id" }

    static let tableName = "books"
    static let columns: [EntityColumn<HandWrittenBook>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.author, "author_id"),
    ]
    static let relationships: [Relationship<HandWrittenBook>] = [.toOne(\.author, deleteRule: .cascade)]
}

/// Every kind of column the database sets, a renamed column and a transient property.
@Entity(table: "tickets")
struct Ticket {
    @Column(generated: .identity) var id: Int64     // bigint GENERATED ALWAYS AS IDENTITY
    var title: String
    var authorID: UUID?                               // author_id
    @Column("assignee") var assigneeName: String?
    @Column(generated: .onInsert) var createdAt: Date                 // DEFAULT now()
    @Column(generated: .onInsertAndUpdate) var updatedAt: Date        // BEFORE INSERT OR UPDATE trigger
    @Column(generated: .computed) var titleLength: Int                // GENERATED ALWAYS AS (length(title)) STORED
    @Transient var isSelected = false

    var summary: String { "\(self.id) \(self.title)" }

    init(title: String, authorID: UUID? = nil, assigneeName: String? = nil) {
        self.id = 0
        self.title = title
        self.authorID = authorID
        self.assigneeName = assigneeName
        self.createdAt = .distantPast
        self.updatedAt = .distantPast
        self.titleLength = 0
    }
}

/// A key of two columns; the table is the type's name in snake case.
@Entity(primaryKey: "courseID", "studentID")
struct CourseEnrollment {
    var courseID: Int64
    var studentID: UUID
    var grade: String?

    var id: CompositeKey<Int64, UUID> { CompositeKey(self.courseID, self.studentID) }
}

/// Names that need quoting in SQL and escaping in Swift.
@Entity(table: "order")
struct HostileNames {
    var id: Int
    @Column("say \"hi\"") var quote: String
    @Column(#"back\slash"#) var path: String
    @Column("$1") var n: Int
}
