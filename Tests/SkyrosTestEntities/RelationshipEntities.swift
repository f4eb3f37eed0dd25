import Foundation
import SkyrosPostgres
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
    package var tags: ToMany<RelTag> { ToMany() }

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
        .manyToMany(\.tags, through: \RelBookTag.book, \RelBookTag.tag),
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

/// A tag of books (many-to-many through ``RelBookTag``), named to trip SQL that does not quote or qualify: its
/// table's name holds a quote, its key column is `n` (as the join table's book column is), its label `prefix`.
package struct RelTag: Entity, Equatable {
    package var id: Int64
    package var label: String
    package var books: ToMany<RelBook> { ToMany() }

    package init(id: Int64, label: String) { (self.id, self.label) = (id, label) }

    enum CodingKeys: String, CodingKey {
        case id = "n"
        case label = "prefix"
    }

    package static let tableName = "rel_tag\"s"
    package static let columns: [EntityColumn<RelTag>] = [EntityColumn(\.id, "n"), EntityColumn(\.label, "prefix")]
    /// By label, so that a many-to-many's order is not its key's.
    package static let defaultSort = [SortDescriptor(\RelTag.label)]
    package static let relationships: [Relationship<RelTag>] = [.manyToMany(\.books, through: \RelBookTag.tag, \RelBookTag.book)]
}

/// The join table of books and tags, keyed by both references, each `ON DELETE CASCADE`; named `o`, with columns
/// `n` (the book, as the tag's key column is named) and a 63-byte name holding `$1` and a keyword.
package struct RelBookTag: Entity, Equatable {
    package var book: Reference<RelBook>
    package var tag: Reference<RelTag>
    package var id: CompositeKey<Reference<RelBook>, Reference<RelTag>> { CompositeKey(self.book, self.tag) }

    package init(book: Int64, tag: Int64) { (self.book, self.tag) = (Reference(book), Reference(tag)) }

    enum CodingKeys: String, CodingKey {
        case book = "n"
        case tag = "$1 select_ttttttttttttttttttttttttttttttttttttttttttttttttttttt"
    }

    package static let tableName = "o"
    /// The tag's column: 63 bytes (the longest name PostgreSQL keeps), with `$1`, a space and a keyword.
    package static let tagColumn = CodingKeys.tag.rawValue
    package static let columns: [EntityColumn<RelBookTag>] = [EntityColumn(\.book, "n"), EntityColumn(\.tag, Self.tagColumn)]
    package static let primaryKey = PrimaryKey<RelBookTag>(\.book, \.tag)
    package static let relationships: [Relationship<RelBookTag>] = [
        .toOne(\.book, deleteRule: .cascade), .toOne(\.tag, deleteRule: .cascade),
    ]
}

package enum RelationshipSchema {
    /// The tables, named by `table` (which qualifies and quotes a name).
    package static func createTables(_ table: (String) -> String) -> String {
        // The tags' table name holds a quote: quoted even when `table` leaves names as they are.
        let tags = table("rel_tag\"s") == "rel_tag\"s" ? quoteIdentifier("rel_tag\"s") : table("rel_tag\"s")
        let tagColumn = quoteIdentifier(RelBookTag.tagColumn)
        return """
        CREATE TABLE \(table("rel_publishers")) (id bigint PRIMARY KEY, name text NOT NULL);
        CREATE TABLE \(table("rel_authors")) (id bigint PRIMARY KEY, name text NOT NULL,
            publisher_id bigint REFERENCES \(table("rel_publishers")) (id) ON DELETE SET NULL);
        CREATE TABLE \(table("rel_books")) (id bigint PRIMARY KEY, title text COLLATE "C" NOT NULL,
            author_id bigint NOT NULL REFERENCES \(table("rel_authors")) (id) ON DELETE CASCADE);
        CREATE TABLE \(table("rel_reviews")) (id bigint PRIMARY KEY,
            "select" bigint NOT NULL REFERENCES \(table("rel_books")) (id), stars int NOT NULL);
        CREATE TABLE \(tags) (n bigint PRIMARY KEY, prefix text COLLATE "C" NOT NULL);
        CREATE TABLE \(table("o")) (n bigint NOT NULL REFERENCES \(table("rel_books")) (id) ON DELETE CASCADE,
            \(tagColumn) bigint NOT NULL REFERENCES \(tags) (n) ON DELETE CASCADE, PRIMARY KEY (n, \(tagColumn)));
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

    /// `tags` tags (labels repeating, so that ties fall to the key) and join rows pairing book `b` with the
    /// tag `b % (tags - 1) + 1` and, for every third book, `(b / 3) % (tags - 1) + 1` too when it differs; the last
    /// tag has no book.
    package static func tagSample(books: Int = 100, tags: Int = 7) -> (tags: [RelTag], bookTags: [RelBookTag]) {
        let tagRows = (1...tags).map { RelTag(id: Int64($0), label: "tag \(($0 * 5) % 4)") }
        var pairs: [RelBookTag] = []
        for book in 1...books {
            let first = book % (tags - 1) + 1
            pairs.append(RelBookTag(book: Int64(book), tag: Int64(first)))
            let second = (book / 3) % (tags - 1) + 1
            if book % 3 == 0, second != first { pairs.append(RelBookTag(book: Int64(book), tag: Int64(second))) }
        }
        return (tagRows, pairs)
    }
}
