import Foundation
import SkyrosMacros

/// The README's `Author`, declared with the macro.
@Entity(table: "authors")
struct Author {
    var id: UUID
    var name: String
    var email: String?

    static let defaultSort = [SortDescriptor(\Author.name)]
}

/// The README's `Author` as written by hand (scripts/snippets/app.swift).
struct HandWrittenAuthor: Entity {
    var id: UUID
    var name: String
    var email: String?

    static let tableName = "authors"
    static let columns: [EntityColumn<HandWrittenAuthor>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.email, "email"),
    ]
    static let defaultSort = [SortDescriptor(\HandWrittenAuthor.name)]
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
