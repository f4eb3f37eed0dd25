import Foundation
import SkyrosPostgres
import SkyrosStore

// Entities of the suites on predicates across to-one relationships: books → authors → publishers, authors
// referring to another author (a table referring to itself), and tables and columns named to collide with the
// SQL the translator writes.

package struct PredPublisher: Entity, Equatable {
    package var id: Int
    package var name: String
    package var country: String?

    package init(id: Int, name: String, country: String?) { (self.id, self.name, self.country) = (id, name, country) }

    package static let tableName = "pred_publishers"
    package static let columns: [EntityColumn<PredPublisher>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.country, "country"),
    ]
}

package struct PredAuthor: Entity, Equatable {
    package var id: Int
    package var name: String
    package var nick: String?
    package var born: Int
    package var rank: Int?
    package var publisher: Reference<PredPublisher>?
    package var mentor: Reference<PredAuthor>?
    /// Not a column: a predicate cannot read it through a reference.
    package var initials: String { String(self.name.prefix(1)) }

    package init(id: Int, name: String, nick: String?, born: Int, rank: Int?, publisher: Int?, mentor: Int?) {
        (self.id, self.name, self.nick, self.born, self.rank) = (id, name, nick, born, rank)
        (self.publisher, self.mentor) = (publisher.map { Reference($0) }, mentor.map { Reference($0) })
    }

    enum CodingKeys: String, CodingKey {
        case id, name, nick, born, rank
        case publisher = "publisher_id"
        case mentor = "mentor_id"
    }

    package static let tableName = "pred_authors"
    package static let columns: [EntityColumn<PredAuthor>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.nick, "nick"), EntityColumn(\.born, "born"),
        EntityColumn(\.rank, "rank"), EntityColumn(\.publisher, "publisher_id"), EntityColumn(\.mentor, "mentor_id"),
    ]
}

package struct PredBook: Entity, Equatable {
    package var id: Int
    package var title: String
    package var pages: Int
    package var author: Reference<PredAuthor>
    package var coAuthor: Reference<PredAuthor>?

    package init(id: Int, title: String, pages: Int, author: Int, coAuthor: Int?) {
        (self.id, self.title, self.pages, self.author, self.coAuthor) = (id, title, pages, Reference(author), coAuthor.map { Reference($0) })
    }

    enum CodingKeys: String, CodingKey {
        case id, title, pages
        case author = "author_id"
        case coAuthor = "co_author_id"
    }

    package static let tableName = "pred_books"
    package static let columns: [EntityColumn<PredBook>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.pages, "pages"),
        EntityColumn(\.author, "author_id"), EntityColumn(\.coAuthor, "co_author_id"),
    ]
}

package enum PredicateReferenceSchema {
    /// The tables, named by `table` (which qualifies and quotes a name); strings compare in code-point order.
    package static func createTables(_ table: (String) -> String) -> String {
        """
        CREATE TABLE \(table("pred_publishers")) (id bigint PRIMARY KEY, name text COLLATE "C" NOT NULL,
            country text COLLATE "C");
        CREATE TABLE \(table("pred_authors")) (id bigint PRIMARY KEY, name text COLLATE "C" NOT NULL,
            nick text COLLATE "C", born bigint NOT NULL, rank bigint,
            publisher_id bigint REFERENCES \(table("pred_publishers")) (id),
            mentor_id bigint REFERENCES \(table("pred_authors")) (id));
        CREATE TABLE \(table("pred_books")) (id bigint PRIMARY KEY, title text COLLATE "C" NOT NULL, pages bigint NOT NULL,
            author_id bigint NOT NULL REFERENCES \(table("pred_authors")) (id),
            co_author_id bigint REFERENCES \(table("pred_authors")) (id));
        """
    }
}

// MARK: - Hostile names

/// The referenced table: named `o`, its key `n`, a column named as the referring table's own and as a variable of
/// the old capture function (`prefix`), one named with a keyword (`select`) and one with a quote and `$1`.
package struct HostileTarget: Entity, Equatable {
    package var id: Int
    package var title: String
    package var rank: Int
    package var quoted: String?

    package init(id: Int, title: String, rank: Int, quoted: String?) { (self.id, self.title, self.rank, self.quoted) = (id, title, rank, quoted) }

    enum CodingKeys: String, CodingKey {
        case id = "n"
        case title = "prefix"
        case rank = "select"
        case quoted = "we\"ird$1"
    }

    package static let tableName = "o"
    package static let columns: [EntityColumn<HostileTarget>] = [
        EntityColumn(\.id, "n"), EntityColumn(\.title, "prefix"), EntityColumn(\.rank, "select"), EntityColumn(\.quoted, "we\"ird$1"),
    ]
}

/// The referring table: named `n` (the target's key's name), with columns named as the target's (`n`, `prefix`),
/// its rank in a 63-byte column, its reference in a column named `o` (the target table's name), and a reference to
/// its own table in a column named `__skyros_ref1` (the translator's first alias).
package struct HostileSource: Entity, Equatable {
    package var id: Int
    package var title: String
    package var rank: Int
    package var target: Reference<HostileTarget>
    package var parent: Reference<HostileSource>?

    package init(id: Int, title: String, rank: Int, target: Int, parent: Int?) {
        (self.id, self.title, self.rank, self.target, self.parent) = (id, title, rank, Reference(target), parent.map { Reference($0) })
    }

    enum CodingKeys: String, CodingKey {
        case id = "n"
        case title = "prefix"
        case rank = "rank_üüüüüüüüüüüüüüüüüüüüüüüüüüüüü"
        case target = "o"
        case parent = "__skyros_ref1"
    }

    package static let tableName = "n"
    /// The rank's column: 63 bytes (the longest name PostgreSQL keeps), not ASCII.
    package static let rankColumn = CodingKeys.rank.rawValue
    package static let columns: [EntityColumn<HostileSource>] = [
        EntityColumn(\.id, "n"), EntityColumn(\.title, "prefix"), EntityColumn(\.rank, Self.rankColumn), EntityColumn(\.target, "o"),
        EntityColumn(\.parent, "__skyros_ref1"),
    ]

    /// The tables, named by `table` (which qualifies and quotes a name).
    package static func createTables(_ table: (String) -> String) -> String {
        """
        CREATE TABLE \(table("o")) (n bigint PRIMARY KEY, prefix text COLLATE "C" NOT NULL, "select" bigint NOT NULL,
            "we""ird$1" text COLLATE "C");
        CREATE TABLE \(table("n")) (n bigint PRIMARY KEY, prefix text COLLATE "C" NOT NULL, \(quoteIdentifier(Self.rankColumn)) bigint NOT NULL,
            o bigint NOT NULL REFERENCES \(table("o")) (n), "__skyros_ref1" bigint REFERENCES \(table("n")) (n));
        """
    }
}
