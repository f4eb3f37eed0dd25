@_exported import Skyros

/// Declares a struct an ``Skyros/Entity`` once: the table name, the column list and, when a column's name is not
/// its property's, the `CodingKeys` are derived from the stored properties.
///
/// Every stored instance property is a column, named in snake case (`authorID` → `author_id`, the rule of
/// ``Skyros/ColumnKeyStrategy/convertToSnakeCase``) unless ``Column(_:generated:)`` names it. Computed and static
/// properties are not columns; ``Transient()`` leaves a stored one out. The table is the type's name in snake
/// case (`OrderLine` → `order_line`) unless `table` names it. The struct must have an `id` property.
///
/// ```swift
/// @Entity(table: "authors")
/// struct Author {
///     var id: UUID
///     var name: String
///     var email: String?
///
///     static let defaultSort = [SortDescriptor(\Author.name)]
/// }
/// ```
///
/// expands to what one writes by hand:
///
/// ```swift
/// struct Author: Entity {
///     var id: UUID
///     var name: String
///     var email: String?
///
///     static let defaultSort = [SortDescriptor(\Author.name)]
///
///     static let tableName = "authors"
///     static let columns: [EntityColumn<Author>] = [
///         EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.email, "email"),
///     ]
/// }
/// ```
///
/// A member the struct declares itself (`tableName`, `columns`, `CodingKeys`, `relationships`) is left as written.
///
/// A ``Skyros/Reference`` property is a foreign-key column, named `<property in snake case>_id` (`author` →
/// `author_id`; a name whose snake case already ends in `_id`, such as `authorID`, is kept);
/// ``Column(_:generated:)`` names it otherwise. A ``Skyros/ToMany`` property is computed, not a column, and names
/// its inverse with `@Related(inverse:)`. When a property is declared with ``Related(deleteRule:)`` or
/// `@Related(inverse:)`, ``Skyros/Entity/relationships`` is derived from them; without any, the struct keeps the
/// default (every reference a to-one with ``Skyros/DeleteRule/noAction``):
///
/// ```swift
/// @Entity(table: "books")
/// struct Book {
///     var id: Int64
///     var title: String
///     @Related(deleteRule: .cascade) var author: Reference<Author>   // column author_id
/// }
/// ```
///
/// adds `static let relationships: [Relationship<Book>] = [.toOne(\.author, deleteRule: .cascade)]` beside the
/// columns, and `CodingKeys` mapping `author` to `"author_id"`.
///
/// For a primary key of several columns (see ``Skyros/CompositeKey``), `primaryKey` names its stored properties in
/// the key's order, and ``Skyros/Entity/primaryKey`` is derived from them:
///
/// ```swift
/// @Entity(table: "enrollments", primaryKey: "courseID", "studentID")
/// struct Enrollment {
///     var courseID: Int64
///     var studentID: UUID
///     var grade: String?
///
///     var id: CompositeKey<Int64, UUID> { CompositeKey(self.courseID, self.studentID) }
/// }
/// ```
///
/// - Parameters:
///   - table: The table's name (unqualified); by default the type's name in snake case.
///   - primaryKey: For a key of several columns, its stored properties as string literals, in the order of the
///     `CompositeKey`; none (default) for a key of one column, the property `id`.
@attached(member, names: named(tableName), named(columns), named(CodingKeys), named(primaryKey), named(relationships))
@attached(extension, conformances: Entity)
public macro Entity(table: String? = nil, primaryKey: String...) =
    #externalMacro(module: "SkyrosMacrosPlugin", type: "EntityMacro")

/// Names a stored property's column, or declares that the database sets it (see ``Skyros/DatabaseGenerated``),
/// in an ``Entity(table:primaryKey:)`` struct. The name must be a string literal.
///
/// ```swift
/// @Entity(table: "tickets")
/// struct Ticket {
///     @Column(generated: .identity) var id: Int64        // bigint GENERATED ALWAYS AS IDENTITY
///     var title: String
///     @Column("created", generated: .onInsert) var createdAt: Date   // DEFAULT now()
/// }
/// ```
///
/// - Parameters:
///   - name: The column's name; by default the property's name in snake case.
///   - generated: How the database sets the column's value; `nil` (default) for a column the app writes.
@attached(peer)
public macro Column(_ name: String? = nil, generated: DatabaseGenerated? = nil) =
    #externalMacro(module: "SkyrosMacrosPlugin", type: "ColumnMacro")

/// Leaves a stored property out of an ``Entity(table:primaryKey:)`` struct's columns and its `CodingKeys`: it is not
/// stored, and a fetched value has the property's initial value, which it must therefore have. (SwiftData's
/// attribute of the same name means the same.)
///
/// ```swift
/// @Entity(table: "authors")
/// struct Author {
///     var id: UUID
///     var name: String
///     @Transient var isSelected = false
/// }
/// ```
@attached(peer)
public macro Transient() = #externalMacro(module: "SkyrosMacrosPlugin", type: "TransientMacro")

/// Declares a relationship of an ``Entity(table:primaryKey:)`` struct: the delete rule of a to-one (a
/// ``Skyros/Reference`` property, a foreign-key column). `@Entity` lists it in ``Skyros/Entity/relationships``
/// (`.toOne(\.author, deleteRule: .cascade)`), which start checks against the foreign key's `ON DELETE` action.
///
/// ```swift
/// @Entity(table: "books")
/// struct Book {
///     var id: Int64
///     var title: String
///     @Related(deleteRule: .cascade) var author: Reference<Author>      // author_id … ON DELETE CASCADE
///     @Related(deleteRule: .setNull) var editor: Reference<Person>?     // editor_id … ON DELETE SET NULL
/// }
/// ```
///
/// A reference without `@Related` is a to-one relationship too, with ``Skyros/DeleteRule/noAction``. The name is not
/// SwiftData's `@Relationship`, nor Skyros's ``Skyros/Relationship`` type that the macro generates, nor FluentKit's
/// `Relation` protocol; it is the word of `PrefetchedResults.related(_:of:)`,
/// which answers the relationship once prefetched.
///
/// - Parameter deleteRule: The foreign key's `ON DELETE` action; ``Skyros/DeleteRule/setNull`` needs an optional
///   reference.
@attached(peer)
public macro Related(deleteRule: DeleteRule = .noAction) =
    #externalMacro(module: "SkyrosMacrosPlugin", type: "RelatedMacro")

/// Declares a to-many relationship of an ``Entity(table:primaryKey:)`` struct: a computed ``Skyros/ToMany`` property,
/// the inverse of `Target`'s reference to this entity. `@Entity` lists it in ``Skyros/Entity/relationships``
/// (`.toMany(\.books, inverse: \Book.author)`).
///
/// ```swift
/// @Entity(table: "authors")
/// struct Author {
///     var id: Int64
///     var name: String
///     @Related(inverse: \Book.author) var books: ToMany<Book> { ToMany() }
/// }
/// ```
///
/// - Parameter inverse: `Target`'s reference to this entity, with its root written out (`\Book.author`).
@attached(peer)
public macro Related<Target: Entity, Owner: Entity>(inverse: KeyPath<Target, Reference<Owner>>) =
    #externalMacro(module: "SkyrosMacrosPlugin", type: "RelatedMacro")

/// Declares a to-many relationship whose inverse is an optional reference (a nullable foreign key): see the
/// `Related(inverse:)` taking a non-optional reference.
///
/// ```swift
/// @Entity(table: "people")
/// struct Person {
///     var id: Int64
///     @Related(inverse: \Ticket.assignee) var assignedTickets: ToMany<Ticket> { ToMany() }
/// }
/// ```
///
/// - Parameter inverse: `Target`'s optional reference to this entity, with its root written out.
@attached(peer)
public macro Related<Target: Entity, Owner: Entity>(inverse: KeyPath<Target, Reference<Owner>?>) =
    #externalMacro(module: "SkyrosMacrosPlugin", type: "RelatedMacro")
