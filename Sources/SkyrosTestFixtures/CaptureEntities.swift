// Entities shared by the capture tests (every committed change, by any writer, reaches every stack) and the
// `skyros-test-node capture-node` processes they start. Not a product.
import Skyros

/// An author (table `cap_authors`); deleting one cascades to its books in PostgreSQL.
public struct CaptureAuthor: Entity, Equatable {
    public var id: Int64
    public var name: String

    public init(id: Int64, name: String) {
        self.id = id
        self.name = name
    }

    public static let tableName = "cap_authors"
    public static let columns: [EntityColumn<CaptureAuthor>] = [EntityColumn(\.id, "id"), EntityColumn(\.name, "name")]
}

/// A book (table `cap_books`, `author_id` references `cap_authors` `ON DELETE CASCADE`).
public struct CaptureBook: Entity, Equatable {
    public var id: Int64
    public var authorID: Int64
    public var title: String

    public init(id: Int64, authorID: Int64, title: String) {
        self.id = id
        self.authorID = authorID
        self.title = title
    }

    enum CodingKeys: String, CodingKey {
        case id, title
        case authorID = "author_id"
    }

    public static let tableName = "cap_books"
    public static let columns: [EntityColumn<CaptureBook>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.authorID, "author_id"), EntityColumn(\.title, "title"),
    ]
}

/// A row a trigger on an unmapped table writes (table `cap_audit`).
public struct CaptureAudit: Entity, Equatable {
    public var id: Int64
    public var note: String

    public init(id: Int64, note: String) {
        self.id = id
        self.note = note
    }

    public static let tableName = "cap_audit"
    public static let columns: [EntityColumn<CaptureAudit>] = [EntityColumn(\.id, "id"), EntityColumn(\.note, "note")]
}
