import Foundation
import SkyrosPostgres

/// A Swift value stored as one row of a PostgreSQL table.
///
/// Conform a `Codable` struct, name its table and list its columns once. The column list maps each stored
/// property's key path to its column (no reliance on runtime string formats); it is checked against the
/// live schema when the stack starts.
///
/// ```swift
/// struct User: Entity {
///     var id: UUID
///     var name: String
///     var age: Int?
///
///     static let tableName = "users"
///     static let columns: [EntityColumn<User>] = [
///         EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.age, "age"),
///     ]
///     static let defaultSort = [SortDescriptor(\User.name)]
/// }
/// ```
public protocol Entity: Codable, Sendable, Identifiable where ID: PGCodable & Hashable & Sendable {
    /// The table's name (unqualified; the store adds its schema).
    static var tableName: String { get }
    /// Every stored property: key path and column name. The primary key column is the one for `\.id`.
    static var columns: [EntityColumn<Self>] { get }
    /// The order used when a fetch gives no sort. Empty by default (then the primary key is used).
    static var defaultSort: [SortDescriptor<Self>] { get }
    /// A column holding the row version for optimistic locking; `nil` (default) uses PostgreSQL's `xmin`.
    static var versionColumn: String? { get }
    /// The columns of a primary key that has several, in the order of the ``CompositeKey`` that is the entity's
    /// `ID`. By default the key is one column, the one for `\.id`.
    static var primaryKey: PrimaryKey<Self> { get }
    /// The relationships (see ``Relationship``); reference columns not listed are to-one with ``DeleteRule/noAction``.
    static var relationships: [Relationship<Self>] { get }
}

extension Entity {
    public static var defaultSort: [SortDescriptor<Self>] { [] }
    public static var versionColumn: String? { nil }
    public static var primaryKey: PrimaryKey<Self> { PrimaryKey() }
}

/// One stored property of an ``Entity``: its key path and its column name.
public struct EntityColumn<Root>: @unchecked Sendable {
    // @unchecked Sendable: key paths to stored properties are immutable values; the type is not marked
    // Sendable by the standard library.
    /// The key path, type-erased.
    public let keyPath: PartialKeyPath<Root>
    /// The column name in the table.
    public let name: String
    /// The Swift type of the property (e.g. `Optional<Int>`).
    public let valueType: Any.Type
    /// Set when the database decides the column's value (see ``DatabaseGenerated``); `nil` for a column the app
    /// writes.
    public internal(set) var generated: DatabaseGenerated?

    /// Maps a stored property to a column: `EntityColumn(\User.email, "email")`.
    public init<Value>(_ keyPath: KeyPath<Root, Value>, _ name: String) {
        self.keyPath = keyPath
        self.name = name
        self.valueType = Value.self
    }
}

/// A column whose value the database decides: the key a sequence hands out, a default, what a trigger sets, or a
/// generated column. Declared on its ``EntityColumn``, it is never written from the app's value; after each
/// commit the stored value is read back (`RETURNING`) into the cache, the overlay and a durable writer's result.
///
/// The four kinds follow the column's SQL (the names echo EF Core's `ValueGenerated` and Hibernate's
/// `@Generated`; `computed` is what Core Data calls a derived attribute):
///
/// | SQL                                                       | Declaration                 | Written by inserts | Read back after      |
/// |-----------------------------------------------------------|-----------------------------|--------------------|----------------------|
/// | `bigint GENERATED ALWAYS AS IDENTITY`, `bigserial`         | ``identity``                | an allocated id    | (known at `insert`)  |
/// | `DEFAULT now()`, `DEFAULT gen_random_uuid()`               | ``onInsert``                | no                 | insert               |
/// | set by a `BEFORE INSERT OR UPDATE` trigger (`updated_at`)  | ``onInsertAndUpdate``       | no                 | insert and update    |
/// | `GENERATED ALWAYS AS (…) STORED`                           | ``computed``                | no                 | insert and update    |
///
/// ```swift
/// struct Ticket: Entity {
///     var id: Int64                       // bigint GENERATED ALWAYS AS IDENTITY
///     var title: String
///     var createdAt: Date                 // DEFAULT now()
///     var updatedAt: Date                 // set by a BEFORE INSERT OR UPDATE trigger
///     var titleLength: Int                // GENERATED ALWAYS AS (length(title)) STORED
///
///     static let tableName = "tickets"
///     static let columns: [EntityColumn<Ticket>] = [
///         EntityColumn(\.id, "id", generated: .identity),
///         EntityColumn(\.title, "title"),
///         EntityColumn(\.createdAt, "created_at", generated: .onInsert),
///         EntityColumn(\.updatedAt, "updated_at", generated: .onInsertAndUpdate),
///         EntityColumn(\.titleLength, "title_length", generated: .computed),
///     ]
/// }
///
/// let ticket = try context.insert(Ticket(id: 0, title: "Printer", createdAt: .now, updatedAt: .now, titleLength: 0))
/// ticket.id   // already allocated: 1, 2, … (from a block of the column's sequence)
/// ```
///
/// Until its commit, readers see the values the app gave to ``onInsert``, ``onInsertAndUpdate`` and ``computed``
/// columns (the overlay holds the row as written, pending); once it committed, the stored ones.
public struct DatabaseGenerated: Sendable, Hashable, CustomStringConvertible {
    enum Kind: Sendable, Hashable {
        case identity(blockSize: Int)
        case onInsert
        case onInsertAndUpdate
        case computed

        var isIdentity: Bool {
            if case .identity = self { return true }
            return false
        }
    }

    let kind: Kind

    /// The primary key comes from the column's sequence (`GENERATED … AS IDENTITY`, `serial`/`bigserial`).
    ///
    /// `insert` of a value whose id is `0` gives it the next id at once, without a round trip: ids are taken from
    /// the sequence in blocks of 100 (one `nextval` round trip per block; Hibernate's pooled optimizer), the next
    /// block fetched while the current one is half used. A non-zero id is written as given. The insert uses
    /// `OVERRIDING SYSTEM VALUE`, so `GENERATED ALWAYS` works too. The property must be a `var`.
    ///
    /// Ids left in a block when the process ends are never used: there are gaps, as with PostgreSQL's own
    /// sequence caching, and ids are increasing per process, not across processes.
    ///
    /// The allocation is a stack's (its contexts' `insert`, `upsert` and `bulkInsert`). A ``Store`` used on its
    /// own writes every id as given, `0` included.
    public static let identity = DatabaseGenerated(kind: .identity(blockSize: 100))

    /// ``identity`` with another block size: larger blocks cost fewer round trips and leave larger gaps.
    public static func identity(blockSize: Int) -> DatabaseGenerated {
        DatabaseGenerated(kind: .identity(blockSize: max(1, blockSize)))
    }

    /// The database sets the value when the row is inserted (a `DEFAULT` such as `now()` or
    /// `gen_random_uuid()`, or a `BEFORE INSERT` trigger); an update never writes it. Start refuses it
    /// (`SchemaMismatchError`) on a column with no `DEFAULT` in a table with no enabled `BEFORE INSERT` row
    /// trigger: nothing would set it, and every insert would store `NULL`.
    public static let onInsert = DatabaseGenerated(kind: .onInsert)

    /// The database sets the value on every insert and update (a `BEFORE INSERT OR UPDATE` trigger, e.g.
    /// `updated_at`); the app's value is never written. Start checks the insert side as for ``onInsert``.
    public static let onInsertAndUpdate = DatabaseGenerated(kind: .onInsertAndUpdate)

    /// A `GENERATED ALWAYS AS (…) STORED` column: computed by PostgreSQL from the row, read-only.
    public static let computed = DatabaseGenerated(kind: .computed)

    /// The strategy as written in Swift (`identity(blockSize: 100)`, `onInsert`).
    public var description: String {
        switch self.kind {
        case .identity(let blockSize): "identity(blockSize: \(blockSize))"
        case .onInsert: "onInsert"
        case .onInsertAndUpdate: "onInsertAndUpdate"
        case .computed: "computed"
        }
    }
}

extension EntityColumn {
    /// A column whose value the database decides (see ``DatabaseGenerated``).
    ///
    /// ```swift
    /// EntityColumn(\.createdAt, "created_at", generated: .onInsert)
    /// ```
    public init<Value>(_ keyPath: KeyPath<Root, Value>, _ name: String, generated: DatabaseGenerated) {
        self.init(keyPath, name)
        self.generated = generated
    }
}
