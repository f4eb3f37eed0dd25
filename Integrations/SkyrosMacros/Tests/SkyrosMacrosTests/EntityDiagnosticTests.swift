import SkyrosMacrosPlugin
import SwiftSyntax
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacrosGenericTestSupport
import SwiftSyntaxMacrosTestSupport
import XCTest

/// What the macros refuse at compile time, and where they point.
final class EntityDiagnosticTests: XCTestCase {
    func testOnAClass() {
        assertMacroExpansion(
            """
            @Entity
            final class Author {
                var id: UUID
            }
            """,
            expandedSource: """
                final class Author {
                    var id: UUID
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: "@Entity applies to a struct; this is a class (an entity is a value: a row)", line: 1,
                    column: 1)
            ],
            macroSpecs: macros)
    }

    /// A mistyped override: `@Column(columnName)` where a literal was meant.
    func testAColumnNameThatIsNotAStringLiteral() {
        assertMacroExpansion(
            """
            @Entity
            struct Author {
                var id: UUID
                @Column(nameColumn) var name: String
            }
            """,
            expandedSource: """
                struct Author {
                    var id: UUID
                    var name: String

                    static let tableName = "author"

                    static let columns: [EntityColumn<Author>] = [
                        EntityColumn(\\.id, "id"),
                        EntityColumn(\\.name, "name"),
                    ]
                }

                extension Author: Entity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: #"the column name of 'name' must be a string literal, such as @Column("name")"#, line: 4,
                    column: 13)
            ],
            macroSpecs: macros)
    }

    /// A mistyped override: two properties on one column, with a note at the first.
    func testTwoPropertiesOnOneColumn() {
        assertMacroExpansion(
            """
            @Entity
            struct Author {
                var id: UUID
                var createdAt: Date
                @Column("created_at") var created: Date
            }
            """,
            expandedSource: """
                struct Author {
                    var id: UUID
                    var createdAt: Date
                    var created: Date

                    static let tableName = "author"

                    static let columns: [EntityColumn<Author>] = [
                        EntityColumn(\\.id, "id"),
                        EntityColumn(\\.createdAt, "created_at"),
                        EntityColumn(\\.created, "created_at"),
                    ]
                }

                extension Author: Entity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: #"'created' and 'createdAt' are both mapped to column "created_at": name one of them with @Column("…")"#,
                    line: 5, column: 31,
                    notes: [NoteSpec(message: #"'createdAt' is mapped to "created_at" here"#, line: 4, column: 9)])
            ],
            macroSpecs: macros)
    }

    /// A mistyped primary key property: the error suggests the property and a fix-it puts it in.
    func testAMistypedPrimaryKeyProperty() {
        assertMacroExpansion(
            """
            @Entity(primaryKey: "courseId", "studentID")
            struct Enrollment {
                var courseID: Int64
                var studentID: UUID
                var id: CompositeKey<Int64, UUID> { CompositeKey(courseID, studentID) }
            }
            """,
            expandedSource: """
                struct Enrollment {
                    var courseID: Int64
                    var studentID: UUID
                    var id: CompositeKey<Int64, UUID> { CompositeKey(courseID, studentID) }

                    static let tableName = "enrollment"

                    static let columns: [EntityColumn<Enrollment>] = [
                        EntityColumn(\\.courseID, "course_id"),
                        EntityColumn(\\.studentID, "student_id"),
                    ]

                    enum CodingKeys: String, CodingKey {
                        case courseID = "course_id"
                        case studentID = "student_id"
                    }

                    static let primaryKey = PrimaryKey<Enrollment>(\\.studentID)
                }

                extension Enrollment: Entity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: "the primary key names 'courseId', which is not a stored property of this entity; did you mean 'courseID'?",
                    line: 1, column: 21, fixIts: [FixItSpec(message: "Replace with 'courseID'")])
            ],
            macroSpecs: macros,
            applyFixIts: ["Replace with 'courseID'"],
            fixedSource: """
                @Entity(primaryKey: "courseID", "studentID")
                struct Enrollment {
                    var courseID: Int64
                    var studentID: UUID
                    var id: CompositeKey<Int64, UUID> { CompositeKey(courseID, studentID) }
                }
                """)
    }

    func testATableNameThatIsNotAStringLiteral() {
        assertMacroExpansion(
            """
            @Entity(table: Names.authors)
            struct Author {
                var id: UUID
            }
            """,
            expandedSource: """
                struct Author {
                    var id: UUID

                    static let tableName = "author"

                    static let columns: [EntityColumn<Author>] = [
                        EntityColumn(\\.id, "id"),
                    ]
                }

                extension Author: Entity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: #"the table name of @Entity must be a string literal, such as @Entity(table: "books")"#,
                    line: 1, column: 16)
            ],
            macroSpecs: macros)
    }

    /// `@Column` on a computed property, with a fix-it that removes it.
    func testAColumnOnAComputedProperty() {
        assertMacroExpansion(
            """
            @Entity
            struct Author {
                var id: UUID
                var name: String
                @Column("display_name") var displayName: String { name.capitalized }
            }
            """,
            expandedSource: """
                struct Author {
                    var id: UUID
                    var name: String
                    var displayName: String { name.capitalized }

                    static let tableName = "author"

                    static let columns: [EntityColumn<Author>] = [
                        EntityColumn(\\.id, "id"),
                        EntityColumn(\\.name, "name"),
                    ]
                }

                extension Author: Entity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: "@Column applies to a stored property; 'displayName' is computed, so it has no column",
                    line: 5, column: 5, fixIts: [FixItSpec(message: "Remove '@Column'")])
            ],
            macroSpecs: macros,
            applyFixIts: ["Remove '@Column'"],
            fixedSource: """
                @Entity
                struct Author {
                    var id: UUID
                    var name: String
                    var displayName: String { name.capitalized }
                }
                """)
    }

    func testNoIDProperty() {
        assertMacroExpansion(
            """
            @Entity
            struct Author {
                var name: String
            }
            """,
            expandedSource: """
                struct Author {
                    var name: String

                    static let tableName = "author"

                    static let columns: [EntityColumn<Author>] = [
                        EntityColumn(\\.name, "name"),
                    ]
                }

                extension Author: Entity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: "@Entity struct 'Author' has no 'id' property: add the primary key's stored property 'id' (or, for a key of several columns, a computed 'id' and @Entity(primaryKey: …))",
                    line: 2, column: 8)
            ],
            macroSpecs: macros)
    }

    /// A transient property must have a value to decode to.
    func testATransientPropertyWithoutAnInitialValue() {
        assertMacroExpansion(
            """
            @Entity
            struct Author {
                var id: UUID
                @Transient var isSelected: Bool
            }
            """,
            expandedSource: """
                struct Author {
                    var id: UUID
                    var isSelected: Bool

                    static let tableName = "author"

                    static let columns: [EntityColumn<Author>] = [
                        EntityColumn(\\.id, "id"),
                    ]

                    enum CodingKeys: String, CodingKey {
                        case id
                    }
                }

                extension Author: Entity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: "@Transient property 'isSelected' needs an initial value: a fetched row does not hold it, so decoding must leave it at its default",
                    line: 4, column: 20)
            ],
            macroSpecs: macros)
    }
}

extension EntityDiagnosticTests {
    /// An identity id is set by `insert`: the property must be a `var`, and a fix-it makes it one.
    func testAnIdentityColumnDeclaredWithLet() {
        assertMacroExpansion(
            """
            @Entity
            struct Job {
                @Column(generated: .identity) let id: Int64
            }
            """,
            expandedSource: """
                struct Job {
                    let id: Int64

                    static let tableName = "job"

                    static let columns: [EntityColumn<Job>] = [
                        EntityColumn(\\.id, "id", generated: .identity),
                    ]
                }

                extension Job: Entity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: "an identity column is given its id at insert: declare 'id' with 'var'", line: 3,
                    column: 35, fixIts: [FixItSpec(message: "Replace 'let' with 'var'")])
            ],
            macroSpecs: macros,
            applyFixIts: ["Replace 'let' with 'var'"],
            fixedSource: """
                @Entity
                struct Job {
                    @Column(generated: .identity) var id: Int64
                }
                """)
    }
}
