import SkyrosMacrosPlugin
import SwiftSyntax
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacrosGenericTestSupport
import SwiftSyntaxMacrosTestSupport
import XCTest

/// The macros as the compiler sees them: `@Entity` adds the `Entity` conformance the compiler asks for.
let macros: [String: MacroSpec] = [
    "Entity": MacroSpec(type: EntityMacro.self, conformances: ["Entity"]),
    "Column": MacroSpec(type: ColumnMacro.self),
    "Transient": MacroSpec(type: TransientMacro.self),
    "Related": MacroSpec(type: RelatedMacro.self),
]

/// What `@Entity`, `@Column` and `@Transient` expand to, and what they refuse (`@Related`: RelationshipExpansionTests).
final class EntityExpansionTests: XCTestCase {
    /// The README's `Author` (scripts/snippets/app.swift): the expansion is the hand-written declaration, the
    /// conformance in an extension and the derived members after the ones written.
    func testTheReadmeAuthorExpandsToItsHandWrittenDeclaration() {
        assertMacroExpansion(
            #"""
            @Entity(table: "authors")
            struct Author {
                var id: UUID
                var name: String
                var email: String?

                static let defaultSort = [SortDescriptor(\Author.name)]
            }
            """#,
            expandedSource: #"""
                struct Author {
                    var id: UUID
                    var name: String
                    var email: String?

                    static let defaultSort = [SortDescriptor(\Author.name)]

                    static let tableName = "authors"

                    static let columns: [EntityColumn<Author>] = [
                        EntityColumn(\.id, "id"),
                        EntityColumn(\.name, "name"),
                        EntityColumn(\.email, "email"),
                    ]
                }

                extension Author: Entity {
                }
                """#,
            macroSpecs: macros)
    }

    /// Snake case by default for the table and the columns; `@Column` names and database-set columns; computed,
    /// static and `@Transient` properties are not columns; `CodingKeys` maps the properties to the columns.
    func testNamesGeneratedColumnsAndPropertiesThatAreNotColumns() {
        assertMacroExpansion(
            #"""
            @Entity
            public struct SupportTicket {
                @Column(generated: .identity(blockSize: 10)) public var id: Int64
                public var title: String
                @Column("opened_at", generated: .onInsert) public var createdAt: Date
                @Column(generated: .onInsertAndUpdate) var updatedAt: Date
                @Column(generated: .computed) var titleLength: Int
                var authorID: UUID?, `default`: Bool
                var userURL: String { didSet { print(oldValue) } }
                @Transient var isSelected = false
                var summary: String { "\(id): \(title)" }
                static let limit = 10
            }
            """#,
            expandedSource: #"""
                public struct SupportTicket {
                    public var id: Int64
                    public var title: String
                    public var createdAt: Date
                    var updatedAt: Date
                    var titleLength: Int
                    var authorID: UUID?, `default`: Bool
                    var userURL: String { didSet { print(oldValue) } }
                    var isSelected = false
                    var summary: String { "\(id): \(title)" }
                    static let limit = 10

                    public static let tableName = "support_ticket"

                    public static let columns: [EntityColumn<SupportTicket>] = [
                        EntityColumn(\.id, "id", generated: .identity(blockSize: 10)),
                        EntityColumn(\.title, "title"),
                        EntityColumn(\.createdAt, "opened_at", generated: .onInsert),
                        EntityColumn(\.updatedAt, "updated_at", generated: .onInsertAndUpdate),
                        EntityColumn(\.titleLength, "title_length", generated: .computed),
                        EntityColumn(\.authorID, "author_id"),
                        EntityColumn(\.`default`, "default"),
                        EntityColumn(\.userURL, "user_url"),
                    ]

                    enum CodingKeys: String, CodingKey {
                        case id
                        case title
                        case createdAt = "opened_at"
                        case updatedAt = "updated_at"
                        case titleLength = "title_length"
                        case authorID = "author_id"
                        case `default`
                        case userURL = "user_url"
                    }
                }

                extension SupportTicket: Entity {
                }
                """#,
            macroSpecs: macros)
    }

    /// A key of several columns: `primaryKey` in the order given; members written by hand are kept, and a declared
    /// conformance is not repeated.
    func testCompositeKeyAndMembersWrittenByHand() {
        assertMacroExpansion(
            #"""
            @Entity(primaryKey: "courseID", "studentID")
            struct Enrollment: Entity {
                var courseID: Int64
                var studentID: UUID
                var grade: String?
                var id: CompositeKey<Int64, UUID> { CompositeKey(self.courseID, self.studentID) }
                static let tableName = "enrollments"
            }
            """#,
            expandedSource: #"""
                struct Enrollment: Entity {
                    var courseID: Int64
                    var studentID: UUID
                    var grade: String?
                    var id: CompositeKey<Int64, UUID> { CompositeKey(self.courseID, self.studentID) }
                    static let tableName = "enrollments"

                    static let columns: [EntityColumn<Enrollment>] = [
                        EntityColumn(\.courseID, "course_id"),
                        EntityColumn(\.studentID, "student_id"),
                        EntityColumn(\.grade, "grade"),
                    ]

                    enum CodingKeys: String, CodingKey {
                        case courseID = "course_id"
                        case studentID = "student_id"
                        case grade
                    }

                    static let primaryKey = PrimaryKey<Enrollment>(\.courseID, \.studentID)
                }
                """#,
            macroSpecs: [
                "Entity": MacroSpec(type: EntityMacro.self, conformances: []),
                "Column": MacroSpec(type: ColumnMacro.self),
            ])
    }
}

extension EntityExpansionTests {
    /// Column and table names with quotes, backslashes and keywords are written back as Swift literals of the same
    /// value (swift-syntax writes a raw literal where the value has quotes or backslashes).
    func testHostileNamesKeepTheirValue() {
        assertMacroExpansion(
            #"""
            @Entity(table: "order")
            struct Row {
                var id: Int
                @Column("say \"hi\"") var quote: String
                @Column(#"back\slash"#) var path: String
                @Column("$1") var n: Int
            }
            """#,
            expandedSource: #"""
                struct Row {
                    var id: Int
                    var quote: String
                    var path: String
                    var n: Int

                    static let tableName = "order"

                    static let columns: [EntityColumn<Row>] = [
                        EntityColumn(\.id, "id"),
                        EntityColumn(\.quote, #"say "hi""#),
                        EntityColumn(\.path, #"back\slash"#),
                        EntityColumn(\.n, "$1"),
                    ]

                    enum CodingKeys: String, CodingKey {
                        case id
                        case quote = #"say "hi""#
                        case path = #"back\slash"#
                        case n = "$1"
                    }
                }

                extension Row: Entity {
                }
                """#,
            macroSpecs: macros)
    }
}
