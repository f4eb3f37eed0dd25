import SkyrosMacrosPlugin
import SwiftSyntax
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacrosGenericTestSupport
import SwiftSyntaxMacrosTestSupport
import XCTest

/// What `@Related` and `@Entity` refuse about relationships at compile time, where they point, and their fix-its.
final class RelationshipDiagnosticTests: XCTestCase {
    /// A to-many has no delete rule of its own: the fix-it removes the argument.
    func testADeleteRuleOnAToMany() {
        assertMacroExpansion(
            #"""
            @Entity
            struct Author {
                var id: Int64
                @Related(deleteRule: .cascade, inverse: \Book.author) var books: ToMany<Book> { ToMany() }
            }
            """#,
            expandedSource: #"""
                struct Author {
                    var id: Int64
                    var books: ToMany<Book> { ToMany() }

                    static let tableName = "author"

                    static let columns: [EntityColumn<Author>] = [
                        EntityColumn(\.id, "id"),
                    ]

                    static let relationships: [Relationship<Author>] = [
                        .toMany(\.books, inverse: \Book.author),
                    ]
                }

                extension Author: Entity {
                }
                """#,
            diagnostics: [
                DiagnosticSpec(
                    message: "the to-many 'books' has no delete rule of its own: the foreign key of its inverse has it, so write deleteRule: on the reference of Book and name that reference here with inverse:",
                    line: 4, column: 14, fixIts: [FixItSpec(message: "Remove 'deleteRule:'")])
            ],
            macroSpecs: macros,
            applyFixIts: ["Remove 'deleteRule:'"],
            fixedSource: #"""
                @Entity
                struct Author {
                    var id: Int64
                    @Related(inverse: \Book.author) var books: ToMany<Book> { ToMany() }
                }
                """#)
    }

    /// A to-one is its own foreign key: `inverse:` belongs to the to-many side.
    func testAnInverseOnAReference() {
        assertMacroExpansion(
            #"""
            @Entity
            struct Book {
                var id: Int64
                @Related(inverse: \Author.books) var author: Reference<Author>
            }
            """#,
            expandedSource: #"""
                struct Book {
                    var id: Int64
                    var author: Reference<Author>

                    static let tableName = "book"

                    static let columns: [EntityColumn<Book>] = [
                        EntityColumn(\.id, "id"),
                        EntityColumn(\.author, "author_id"),
                    ]

                    enum CodingKeys: String, CodingKey {
                        case id
                        case author = "author_id"
                    }

                    static let relationships: [Relationship<Book>] = [
                        .toOne(\.author),
                    ]
                }

                extension Book: Entity {
                }
                """#,
            diagnostics: [
                DiagnosticSpec(
                    message: "the to-one 'author' is its own foreign key, so it has no inverse: the ToMany<…> property of Author names 'author' as its inverse",
                    line: 4, column: 14, fixIts: [FixItSpec(message: "Remove 'inverse:'")])
            ],
            macroSpecs: macros,
            applyFixIts: ["Remove 'inverse:'"],
            fixedSource: #"""
                @Entity
                struct Book {
                    var id: Int64
                    @Related var author: Reference<Author>
                }
                """#)
    }

    /// `SET NULL` needs a column that can be `NULL`: the fix-it makes the reference optional.
    func testSetNullOnANonOptionalReference() {
        assertMacroExpansion(
            #"""
            @Entity
            struct Book {
                var id: Int64
                @Related(deleteRule: .setNull) var editor: Reference<Person>
            }
            """#,
            expandedSource: #"""
                struct Book {
                    var id: Int64
                    var editor: Reference<Person>

                    static let tableName = "book"

                    static let columns: [EntityColumn<Book>] = [
                        EntityColumn(\.id, "id"),
                        EntityColumn(\.editor, "editor_id"),
                    ]

                    enum CodingKeys: String, CodingKey {
                        case id
                        case editor = "editor_id"
                    }

                    static let relationships: [Relationship<Book>] = [
                        .toOne(\.editor, deleteRule: .setNull),
                    ]
                }

                extension Book: Entity {
                }
                """#,
            diagnostics: [
                DiagnosticSpec(
                    message: "ON DELETE SET NULL stores NULL in the column of 'editor': declare it optional, Reference<Person>?, or choose another delete rule",
                    line: 4, column: 26, fixIts: [FixItSpec(message: "Make 'editor' optional")])
            ],
            macroSpecs: macros,
            applyFixIts: ["Make 'editor' optional"],
            fixedSource: #"""
                @Entity
                struct Book {
                    var id: Int64
                    @Related(deleteRule: .setNull) var editor: Reference<Person>?
                }
                """#)
    }

    /// `@Related` on a property that is neither a reference nor a to-many (a foreign key written as its id type).
    func testRelatedOnAPropertyThatIsNoRelationship() {
        assertMacroExpansion(
            #"""
            @Entity
            struct Book {
                var id: Int64
                @Related(deleteRule: .cascade) var authorID: Int64
            }
            """#,
            expandedSource: #"""
                struct Book {
                    var id: Int64
                    var authorID: Int64

                    static let tableName = "book"

                    static let columns: [EntityColumn<Book>] = [
                        EntityColumn(\.id, "id"),
                        EntityColumn(\.authorID, "author_id"),
                    ]

                    enum CodingKeys: String, CodingKey {
                        case id
                        case authorID = "author_id"
                    }
                }

                extension Book: Entity {
                }
                """#,
            diagnostics: [
                DiagnosticSpec(
                    message: "@Related applies to a Reference<Target> property (a to-one) or a computed ToMany<Target> property (a to-many); 'authorID' is of type 'Int64'",
                    line: 4, column: 5, fixIts: [FixItSpec(message: "Remove '@Related'")])
            ],
            macroSpecs: macros,
            applyFixIts: ["Remove '@Related'"],
            fixedSource: #"""
                @Entity
                struct Book {
                    var id: Int64
                    var authorID: Int64
                }
                """#)
    }

    /// A stored `ToMany` (declared, or with an initial value): not a column; the fix-it makes it computed.
    func testAStoredToMany() {
        assertMacroExpansion(
            #"""
            @Entity
            struct Author {
                var id: Int64
                @Related(inverse: \Book.author) let books: ToMany<Book>
                var essays = ToMany<Essay>()
            }
            """#,
            expandedSource: #"""
                struct Author {
                    var id: Int64
                    let books: ToMany<Book>
                    var essays = ToMany<Essay>()

                    static let tableName = "author"

                    static let columns: [EntityColumn<Author>] = [
                        EntityColumn(\.id, "id"),
                    ]
                }

                extension Author: Entity {
                }
                """#,
            diagnostics: [
                DiagnosticSpec(
                    message: "a ToMany property holds no rows and is not a column: make 'books' computed, 'var books: ToMany<Book> { ToMany() }'",
                    line: 4, column: 41, fixIts: [FixItSpec(message: "Make 'books' computed")]),
                DiagnosticSpec(
                    message: "a ToMany property holds no rows and is not a column: make 'essays' computed, 'var essays: ToMany<Essay> { ToMany() }'",
                    line: 5, column: 9, fixIts: [FixItSpec(message: "Make 'essays' computed")]),
            ],
            macroSpecs: macros,
            applyFixIts: ["Make 'books' computed", "Make 'essays' computed"],
            fixedSource: #"""
                @Entity
                struct Author {
                    var id: Int64
                    @Related(inverse: \Book.author) var books: ToMany<Book> { ToMany() }
                    var essays: ToMany<Essay> { ToMany() }
                }
                """#)
    }

    /// A to-many must name its inverse: without `@Related`, and with `@Related` but no `inverse:`.
    func testAToManyWithoutItsInverse() {
        assertMacroExpansion(
            #"""
            @Entity
            struct Author {
                var id: Int64
                var books: ToMany<Book> { ToMany() }
                @Related var essays: ToMany<Essay> { ToMany() }
            }
            """#,
            expandedSource: #"""
                struct Author {
                    var id: Int64
                    var books: ToMany<Book> { ToMany() }
                    var essays: ToMany<Essay> { ToMany() }

                    static let tableName = "author"

                    static let columns: [EntityColumn<Author>] = [
                        EntityColumn(\.id, "id"),
                    ]
                }

                extension Author: Entity {
                }
                """#,
            diagnostics: [
                DiagnosticSpec(
                    message: #"the to-many 'essays' needs its inverse, the reference of Essay to this entity: @Related(inverse: \Essay.…)"#,
                    line: 5, column: 5),
                DiagnosticSpec(
                    message: #"the to-many 'books' needs its inverse, the reference of Book to this entity: @Related(inverse: \Book.…)"#,
                    line: 4, column: 9),
            ],
            macroSpecs: macros)
    }

    /// The inverse of a `ToMany<Book>` is a reference of `Book`; `@Related` on a static or a transient property, or
    /// on a computed reference, is no relationship.
    func testMisplacedRelated() {
        assertMacroExpansion(
            #"""
            @Entity
            struct Author {
                var id: Int64
                @Related(inverse: \Essay.author) var books: ToMany<Book> { ToMany() }
                @Related static var featured: Reference<Author>? = nil
                @Related @Transient var favourite: Reference<Book>? = nil
                @Related var mentor: Reference<Author> { Reference(self.id) }
            }
            """#,
            expandedSource: #"""
                struct Author {
                    var id: Int64
                    var books: ToMany<Book> { ToMany() }
                    static var featured: Reference<Author>? = nil
                    var favourite: Reference<Book>? = nil
                    var mentor: Reference<Author> { Reference(self.id) }

                    static let tableName = "author"

                    static let columns: [EntityColumn<Author>] = [
                        EntityColumn(\.id, "id"),
                    ]

                    enum CodingKeys: String, CodingKey {
                        case id
                    }

                    static let relationships: [Relationship<Author>] = [
                        .toMany(\.books, inverse: \Essay.author),
                    ]
                }

                extension Author: Entity {
                }
                """#,
            diagnostics: [
                DiagnosticSpec(
                    message: "'books' is a ToMany<Book>, so its inverse is a reference of Book, not of Essay", line: 4, column: 23),
                DiagnosticSpec(
                    message: "@Related applies to an instance property; 'featured' is static", line: 5, column: 5,
                    fixIts: [FixItSpec(message: "Remove '@Related'")]),
                DiagnosticSpec(
                    message: "'favourite' is both @Related and @Transient: a transient property has no column, so it is no relationship",
                    line: 6, column: 5, fixIts: [FixItSpec(message: "Remove '@Related'")]),
                DiagnosticSpec(
                    message: "@Related on a Reference applies to a stored property (its column is the foreign key); 'mentor' is computed",
                    line: 7, column: 5, fixIts: [FixItSpec(message: "Remove '@Related'")]),
            ],
            macroSpecs: macros)
    }

    /// `relationships` written by hand wins: an `@Related` beside it would not be read, which is said.
    func testRelatedBesideRelationshipsWrittenByHand() {
        assertMacroExpansion(
            #"""
            @Entity
            struct Book {
                var id: Int64
                @Related(deleteRule: .cascade) var author: Reference<Author>
                static let relationships: [Relationship<Book>] = []
            }
            """#,
            expandedSource: #"""
                struct Book {
                    var id: Int64
                    var author: Reference<Author>
                    static let relationships: [Relationship<Book>] = []

                    static let tableName = "book"

                    static let columns: [EntityColumn<Book>] = [
                        EntityColumn(\.id, "id"),
                        EntityColumn(\.author, "author_id"),
                    ]

                    enum CodingKeys: String, CodingKey {
                        case id
                        case author = "author_id"
                    }
                }

                extension Book: Entity {
                }
                """#,
            diagnostics: [
                DiagnosticSpec(
                    message: "this struct declares 'relationships' itself, so @Related on 'author' is not read: list the relationship there, or remove that declaration",
                    line: 4, column: 5)
            ],
            macroSpecs: macros)
    }
}
