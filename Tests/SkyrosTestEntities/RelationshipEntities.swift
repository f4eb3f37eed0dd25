import Foundation
import SkyrosStore

// The relationship suites' entities: publishers ← authors ← books ← reviews, each foreign key with another
// delete rule, and a review's foreign-key column named with an SQL keyword.

package struct RelPublisher: Entity, Equatable {
    package var id: Int64
    package var name: String
    package var authors: ToMany<RelAuthor> { ToMany() }

    package init(id: Int64, name: String) { (self.id, self.name) = (id, name) }

    package static let tableName = "rel_publishers"
    package static let columns: [EntityColumn<RelPublisher>] = [EntityColumn(\.id, "id"), EntityColumn(\.name, "name")]
    package static let relationships: [Relationship<RelPublisher>] = [.toMany(\.authors, inverse: \RelAuthor.publisher)]
}

package struct RelAuthor: Entity, Equatable {
    package var id: Int64
    package var name: String
    package var publisher: Reference<RelPublisher>?
    package var books: ToMany<RelBook> { ToMany() }

    package init(id: Int64, name: String, publisher: Int64?) {
        (self.id, self.name, self.publisher) = (id, name, publisher.map { Reference($0) })
    }

    enum CodingKeys: String, CodingKey {
        case id, name
        case publisher = "publisher_id"
    }

    package static let tableName = "rel_authors"
    package static let columns: [EntityColumn<RelAuthor>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.publisher, "publisher_id"),
    ]
    package static let relationships: [Relationship<RelAuthor>] = [
        .toOne(\.publisher, deleteRule: .setNull), .toMany(\.books, inverse: \RelBook.author),
    ]
}

package struct RelBook: Entity, Equatable {
    package var id: Int64
    package var title: String
    package var author: Reference<RelAuthor>
    package var reviews: ToMany<RelReview> { ToMany() }

    package init(id: Int64, title: String, author: Int64) {
        (self.id, self.title, self.author) = (id, title, Reference(author))
    }

    enum CodingKeys: String, CodingKey {
        case id, title
        case author = "author_id"
    }

    package static let tableName = "rel_books"
    package static let columns: [EntityColumn<RelBook>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.author, "author_id"),
    ]
    package static let relationships: [Relationship<RelBook>] = [
        .toOne(\.author, deleteRule: .cascade), .toMany(\.reviews, inverse: \RelReview.book),
    ]
}

/// Its foreign key is left undeclared in `relationships` (so: `NO ACTION`), in a column named `select`.
package struct RelReview: Entity, Equatable {
    package var id: Int64
    package var book: Reference<RelBook>
    package var stars: Int

    package init(id: Int64, book: Int64, stars: Int) { (self.id, self.book, self.stars) = (id, Reference(book), stars) }

    enum CodingKeys: String, CodingKey {
        case id, stars
        case book = "select"
    }

    package static let tableName = "rel_reviews"
    package static let columns: [EntityColumn<RelReview>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.book, "select"), EntityColumn(\.stars, "stars"),
    ]
}

package enum RelationshipSchema {
    /// The tables, named by `table` (which qualifies and quotes a name).
    package static func createTables(_ table: (String) -> String) -> String {
        """
        CREATE TABLE \(table("rel_publishers")) (id bigint PRIMARY KEY, name text NOT NULL);
        CREATE TABLE \(table("rel_authors")) (id bigint PRIMARY KEY, name text NOT NULL,
            publisher_id bigint REFERENCES \(table("rel_publishers")) (id) ON DELETE SET NULL);
        CREATE TABLE \(table("rel_books")) (id bigint PRIMARY KEY, title text COLLATE "C" NOT NULL,
            author_id bigint NOT NULL REFERENCES \(table("rel_authors")) (id) ON DELETE CASCADE);
        CREATE TABLE \(table("rel_reviews")) (id bigint PRIMARY KEY,
            "select" bigint NOT NULL REFERENCES \(table("rel_books")) (id), stars int NOT NULL);
        """
    }

    /// `publishers` publishers, `authors` authors (every third without a publisher), `books` books spread over
    /// the authors, and a review of every other book.
    package static func sample(publishers: Int = 3, authors: Int = 10, books: Int = 100)
        -> (publishers: [RelPublisher], authors: [RelAuthor], books: [RelBook], reviews: [RelReview])
    {
        let publisherRows = (1...publishers).map { RelPublisher(id: Int64($0), name: "publisher \($0)") }
        let authorRows = (1...authors).map { index in
            RelAuthor(id: Int64(index), name: "author \(index)", publisher: index % 3 == 0 ? nil : Int64(index % publishers + 1))
        }
        let bookRows = (1...books).map { RelBook(id: Int64($0), title: "book \($0)", author: Int64($0 % authors + 1)) }
        let reviewRows = stride(from: 1, through: books, by: 2).map { RelReview(id: Int64($0), book: Int64($0), stars: $0 % 5 + 1) }
        return (publisherRows, authorRows, bookRows, reviewRows)
    }
}
