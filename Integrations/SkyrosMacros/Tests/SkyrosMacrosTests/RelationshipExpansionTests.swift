import SkyrosMacrosPlugin
import SwiftSyntax
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacrosGenericTestSupport
import SwiftSyntaxMacrosTestSupport
import XCTest

/// What `@Entity` derives from `Reference` and `ToMany` properties and `@Related`: the foreign-key column's name,
/// `CodingKeys`, and `relationships`.
final class RelationshipExpansionTests: XCTestCase {
    /// The README's `Author` and `Book` with their relationships (README.md, "Relationships and prefetching"): the
    /// expansion is the hand-written declaration (`author` on column `author_id`, the `CodingKeys` saying so, the
    /// to-one with its delete rule and the to-many with its inverse; the `ToMany` is not a column).
    func testTheReadmeAuthorAndBookExpandToTheirHandWrittenDeclarations() {
        assertMacroExpansion(
            #"""
            @Entity(table: "authors")
            struct Author {
                var id: Int64
                var name: String
                @Related(inverse: \Book.author) var books: ToMany<Book> { ToMany() }
            }

            @Entity(table: "books")
            struct Book {
                var id: Int64
                var title: String
                @Related(deleteRule: .cascade) var author: Reference<Author>
            }
            """#,
            expandedSource: #"""
                struct Author {
                    var id: Int64
                    var name: String
                    var books: ToMany<Book> { ToMany() }

                    static let tableName = "authors"

                    static let columns: [EntityColumn<Author>] = [
                        EntityColumn(\.id, "id"),
                        EntityColumn(\.name, "name"),
                    ]

                    static let relationships: [Relationship<Author>] = [
                        .toMany(\.books, inverse: \Book.author),
                    ]
                }
                struct Book {
                    var id: Int64
                    var title: String
                    var author: Reference<Author>

                    static let tableName = "books"

                    static let columns: [EntityColumn<Book>] = [
                        EntityColumn(\.id, "id"),
                        EntityColumn(\.title, "title"),
                        EntityColumn(\.author, "author_id"),
                    ]

                    enum CodingKeys: String, CodingKey {
                        case id
                        case title
                        case author = "author_id"
                    }

                    static let relationships: [Relationship<Book>] = [
                        .toOne(\.author, deleteRule: .cascade),
                    ]
                }

                extension Author: Entity {
                }

                extension Book: Entity {
                }
                """#,
            macroSpecs: macros)
    }

    /// The rule of a reference's column: snake case and `_id`, unless the name ends so already; `@Column` wins;
    /// optional and qualified reference types are references too. No `@Related`, no `relationships`: the
    /// references keep the default (to-one, `NO ACTION`), as undeclared in a hand-written entity.
    func testReferenceColumnsAreNamedForTheirKeyAndUndeclaredOnesKeepTheDefault() {
        assertMacroExpansion(
            #"""
            @Entity(table: "tickets")
            struct Ticket {
                var id: Int64
                var author: Reference<Person>
                var reviewerID: Reference<Person>?
                var assignedTo: Skyros.Reference<Person>?
                var watcher: Optional<Reference<Person>>
                @Column("opened_by") var opener: Reference<Person>
                var project = Reference<Project>(1)
                var supervisorID: Int64?
            }
            """#,
            expandedSource: #"""
                struct Ticket {
                    var id: Int64
                    var author: Reference<Person>
                    var reviewerID: Reference<Person>?
                    var assignedTo: Skyros.Reference<Person>?
                    var watcher: Optional<Reference<Person>>
                    var opener: Reference<Person>
                    var project = Reference<Project>(1)
                    var supervisorID: Int64?

                    static let tableName = "tickets"

                    static let columns: [EntityColumn<Ticket>] = [
                        EntityColumn(\.id, "id"),
                        EntityColumn(\.author, "author_id"),
                        EntityColumn(\.reviewerID, "reviewer_id"),
                        EntityColumn(\.assignedTo, "assigned_to_id"),
                        EntityColumn(\.watcher, "watcher_id"),
                        EntityColumn(\.opener, "opened_by"),
                        EntityColumn(\.project, "project_id"),
                        EntityColumn(\.supervisorID, "supervisor_id"),
                    ]

                    enum CodingKeys: String, CodingKey {
                        case id
                        case author = "author_id"
                        case reviewerID = "reviewer_id"
                        case assignedTo = "assigned_to_id"
                        case watcher = "watcher_id"
                        case opener = "opened_by"
                        case project = "project_id"
                        case supervisorID = "supervisor_id"
                    }
                }

                extension Ticket: Entity {
                }
                """#,
            macroSpecs: macros)
    }

    /// Every form `@Related` takes: a rule on an optional reference (`.setNull`, qualified), no argument (the
    /// default rule, listed), an inverse that is an optional reference, a name that is a keyword, a public entity (its members public).
    func testEveryFormOfRelated() {
        assertMacroExpansion(
            #"""
            @Entity(table: "people")
            public struct Person {
                public var id: Int64
                @Related(deleteRule: DeleteRule.setNull) var manager: Reference<Person>?
                @Related var team: Reference<Team>
                @Related(deleteRule: .restrict) @Column("dept") var department: Reference<Department>
                @Related(inverse: \Ticket.assignee) var assignedTickets: ToMany<Ticket> { ToMany() }
                @Related(inverse: \Person.manager) var reports: ToMany<Person> {
                    ToMany()
                }
                @Related(deleteRule: .cascade) var `class`: Reference<SchoolClass>
            }
            """#,
            expandedSource: #"""
                public struct Person {
                    public var id: Int64
                    var manager: Reference<Person>?
                    var team: Reference<Team>
                    var department: Reference<Department>
                    var assignedTickets: ToMany<Ticket> { ToMany() }
                    var reports: ToMany<Person> {
                        ToMany()
                    }
                    var `class`: Reference<SchoolClass>

                    public static let tableName = "people"

                    public static let columns: [EntityColumn<Person>] = [
                        EntityColumn(\.id, "id"),
                        EntityColumn(\.manager, "manager_id"),
                        EntityColumn(\.team, "team_id"),
                        EntityColumn(\.department, "dept"),
                        EntityColumn(\.`class`, "class_id"),
                    ]

                    enum CodingKeys: String, CodingKey {
                        case id
                        case manager = "manager_id"
                        case team = "team_id"
                        case department = "dept"
                        case `class` = "class_id"
                    }

                    public static let relationships: [Relationship<Person>] = [
                        .toOne(\.manager, deleteRule: DeleteRule.setNull),
                        .toOne(\.team),
                        .toOne(\.department, deleteRule: .restrict),
                        .toMany(\.assignedTickets, inverse: \Ticket.assignee),
                        .toMany(\.reports, inverse: \Person.manager),
                        .toOne(\.`class`, deleteRule: .cascade),
                    ]
                }

                extension Person: Entity {
                }
                """#,
            macroSpecs: macros)
    }

    /// `relationships` written by hand is kept, and no other derived; the `ToMany` it lists needs no `@Related`.
    func testRelationshipsWrittenByHandAreKept() {
        assertMacroExpansion(
            #"""
            @Entity(table: "authors")
            struct Author {
                var id: Int64
                var books: ToMany<Book> { ToMany() }
                static let relationships: [Relationship<Author>] = [.toMany(\.books, inverse: \Book.author)]
            }
            """#,
            expandedSource: #"""
                struct Author {
                    var id: Int64
                    var books: ToMany<Book> { ToMany() }
                    static let relationships: [Relationship<Author>] = [.toMany(\.books, inverse: \Book.author)]

                    static let tableName = "authors"

                    static let columns: [EntityColumn<Author>] = [
                        EntityColumn(\.id, "id"),
                    ]
                }

                extension Author: Entity {
                }
                """#,
            macroSpecs: macros)
    }
}
