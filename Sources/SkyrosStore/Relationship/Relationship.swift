import Foundation
import SkyrosPostgres

/// What PostgreSQL does to the rows that refer to a deleted row (the foreign key's `ON DELETE` action).
///
/// SwiftData's `Schema.Relationship.DeleteRule` names two of them differently: its `nullify` is ``setNull`` and
/// its `deny` is ``restrict``. Its `noAction` leaves dangling references, which a foreign key never does:
/// here ``noAction`` is PostgreSQL's (the delete fails while a row still refers to the deleted one).
public enum DeleteRule: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// `ON DELETE CASCADE`: the referring rows are deleted too.
    case cascade
    /// `ON DELETE SET NULL`: the referring rows' foreign-key column is set to `NULL` (the reference must be
    /// optional).
    case setNull
    /// `ON DELETE RESTRICT`: the delete fails (`foreign_key_violation`) while a row refers to the row.
    case restrict
    /// `ON DELETE NO ACTION`, PostgreSQL's default: the delete fails (`foreign_key_violation`) while a row
    /// refers to the row (checked at the end of the statement; for a deferred constraint, at commit).
    case noAction

    /// The rule as SQL writes it: `CASCADE`, `SET NULL`, `RESTRICT`, `NO ACTION`.
    public var description: String {
        switch self {
        case .cascade: "CASCADE"
        case .setNull: "SET NULL"
        case .restrict: "RESTRICT"
        case .noAction: "NO ACTION"
        }
    }

    /// The rule of `pg_constraint.confdeltype` (`a` no action, `r` restrict, `c` cascade, `n` set null); `nil`
    /// for `d` (set default), which Skyros does not model.
    package init?(catalogCode: String) {
        switch catalogCode {
        case "a": self = .noAction
        case "r": self = .restrict
        case "c": self = .cascade
        case "n": self = .setNull
        default: return nil
        }
    }
}

/// A foreign key as Skyros sees it: the referring table's column and the referenced table's primary key.
public struct ForeignKey: Sendable, Hashable, CustomStringConvertible {
    /// The referring table (`books`).
    public var table: String
    /// The foreign-key column (`author_id`).
    public var column: String
    /// The referenced table (`authors`).
    public var referencedTable: String
    /// The referenced column, the target's primary key (`id`).
    public var referencedColumn: String
    /// What deleting a referenced row does to the referring rows.
    public var deleteRule: DeleteRule

    /// The constraint name PostgreSQL gives a foreign key declared without one (`books_author_id_fkey`); the
    /// in-memory store names its foreign-key violations so.
    public var defaultConstraintName: String { "\(self.table)_\(self.column)_fkey" }

    /// `books.author_id → authors.id`.
    public var description: String {
        "\(self.table).\(self.column) → \(self.referencedTable).\(self.referencedColumn)"
    }
}

/// The marker type of a to-many relationship: a computed property of this type names the relationship (for
/// ``FetchDescriptor/relationshipKeyPathsForPrefetching`` and ``PrefetchedResults``), and
/// ``Entity/relationships`` declares which to-one of `Target` it is the inverse of.
///
/// ```swift
/// extension Author {
///     var books: ToMany<Book> { ToMany() }
///     static let relationships: [Relationship<Author>] = [.toMany(\.books, inverse: \Book.author)]
/// }
/// ```
///
/// A value holds nothing: entities are values and never hold other rows. The rows come from a fetch that
/// prefetched the relationship (``PrefetchedResults``).
public struct ToMany<Target: Entity>: Sendable, Hashable {
    /// The marker (the property's value carries no rows).
    public init() {}
}

/// A relationship of an ``Entity``: a to-one (a ``Reference`` column, a foreign key) or a to-many (the inverse
/// of another entity's to-one).
///
/// A reference column is a to-one relationship without further declaration, with the delete rule
/// ``DeleteRule/noAction``. List it in ``Entity/relationships`` to state another rule (checked against the
/// foreign key at start, and applied by the in-memory store), and list each to-many there with its inverse:
///
/// ```swift
/// struct Author: Entity {
///     var id: Int64
///     var name: String
///     var books: ToMany<Book> { ToMany() }
///
///     static let tableName = "authors"
///     static let columns: [EntityColumn<Author>] = [EntityColumn(\.id, "id"), EntityColumn(\.name, "name")]
///     static let relationships: [Relationship<Author>] = [.toMany(\.books, inverse: \Book.author)]
/// }
///
/// struct Book: Entity {
///     var id: Int64
///     var title: String
///     var author: Reference<Author>
///
///     enum CodingKeys: String, CodingKey { case id, title, author = "author_id" }
///
///     static let tableName = "books"
///     static let columns: [EntityColumn<Book>] = [
///         EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.author, "author_id"),
///     ]
///     static let relationships: [Relationship<Book>] = [.toOne(\.author, deleteRule: .cascade)]
/// }
/// ```
public struct Relationship<Root: Entity>: @unchecked Sendable, CustomStringConvertible {
    // @unchecked Sendable: holds immutable key paths (values the standard library does not mark Sendable), a
    // metatype and Sendable closures.

    /// The two kinds of relationship.
    public enum Kind: Sendable, Hashable {
        /// A foreign-key column of `Root` referring to one row of the target.
        case toOne
        /// The rows of the target whose foreign key refers to a row of `Root`.
        case toMany
        /// The rows of the target a join table's rows pair with a row of `Root` (each join row refers to both).
        case manyToMany
    }

    /// To-one or to-many.
    public let kind: Kind
    /// The property naming the relationship (`\Book.author`, `\Author.books`).
    public let keyPath: PartialKeyPath<Root>
    /// The related entity type.
    public let target: any Entity.Type
    /// The to-one's own delete rule; for a to-many, ``DeleteRule/noAction`` (the rule is its inverse's).
    let declaredRule: DeleteRule
    /// A many-to-many's join table; `nil` for the other kinds.
    var joinTable: JoinTable? = nil
    /// The foreign key behind it, resolved from the entities' column lists.
    let resolveForeignKey: @Sendable () throws -> ForeignKey
    /// Loads the related rows of `owners` (one fetch), records them in `rows`, then loads `nested` from them.
    let prefetch: @Sendable ([Root], [any Sendable], any RelatedRowSource, RelatedRows) async throws -> Void

    /// The foreign key behind the relationship (for a to-many, its inverse's; for a many-to-many, the join
    /// table's reference to `Root`): `books.author_id → authors.id`.
    /// - Throws: ``RelationshipError`` when a key path is not in its entity's ``Entity/columns``.
    public func foreignKey() throws -> ForeignKey { try self.resolveForeignKey() }

    /// `Book.author (to-one, books.author_id → authors.id)`.
    public var description: String {
        let key = (try? self.foreignKey()).map { "\($0)" } ?? "unresolved"
        let kind = switch self.kind {
        case .toOne: "to-one"
        case .toMany: "to-many"
        case .manyToMany: "many-to-many through \(self.joinTable.map { "\($0.entity)" } ?? "?")"
        }
        return "\(Root.self) \(self.keyPath) (\(kind), \(key))"
    }
}

extension Relationship {
    /// A to-one relationship: the ``Reference`` column at `keyPath` is a foreign key to `Target`'s primary key.
    ///
    /// ```swift
    /// static let relationships: [Relationship<Book>] = [.toOne(\.author, deleteRule: .cascade)]
    /// ```
    /// - Parameters:
    ///   - keyPath: the reference property (listed in ``Entity/columns``).
    ///   - deleteRule: the foreign key's `ON DELETE` action, checked at start against the database's.
    public static func toOne<Target: Entity>(
        _ keyPath: KeyPath<Root, Reference<Target>>, deleteRule: DeleteRule = .noAction
    ) -> Relationship where Target.ID: Codable {
        self.makeToOne(keyPath, deleteRule: deleteRule)
    }

    /// A to-one relationship through an optional reference (a nullable foreign key), e.g. with
    /// ``DeleteRule/setNull``.
    ///
    /// ```swift
    /// static let relationships: [Relationship<Ticket>] = [.toOne(\.assignee, deleteRule: .setNull)]
    /// ```
    /// - Parameters:
    ///   - keyPath: the optional reference property (listed in ``Entity/columns``).
    ///   - deleteRule: the foreign key's `ON DELETE` action, checked at start against the database's.
    public static func toOne<Target: Entity>(
        _ keyPath: KeyPath<Root, Reference<Target>?>, deleteRule: DeleteRule = .noAction
    ) -> Relationship where Target.ID: Codable {
        self.makeToOne(keyPath, deleteRule: deleteRule)
    }

    /// A to-many relationship: the rows of `Target` whose reference at `inverse` is a row of `Root`.
    ///
    /// ```swift
    /// var books: ToMany<Book> { ToMany() }
    /// static let relationships: [Relationship<Author>] = [.toMany(\.books, inverse: \Book.author)]
    /// ```
    /// - Parameters:
    ///   - keyPath: the ``ToMany`` property naming the relationship.
    ///   - inverse: `Target`'s reference to `Root` (listed in `Target`'s ``Entity/columns``).
    public static func toMany<Target: Entity>(
        _ keyPath: KeyPath<Root, ToMany<Target>>, inverse: KeyPath<Target, Reference<Root>>
    ) -> Relationship where Root.ID: Codable {
        self.makeToMany(keyPath, inverse: inverse)
    }

    /// A to-many relationship through an optional reference of `Target` (a nullable foreign key).
    ///
    /// ```swift
    /// var assignedTickets: ToMany<Ticket> { ToMany() }
    /// static let relationships: [Relationship<Person>] = [.toMany(\.assignedTickets, inverse: \Ticket.assignee)]
    /// ```
    /// - Parameters:
    ///   - keyPath: the ``ToMany`` property naming the relationship.
    ///   - inverse: `Target`'s optional reference to `Root` (listed in `Target`'s ``Entity/columns``).
    public static func toMany<Target: Entity>(
        _ keyPath: KeyPath<Root, ToMany<Target>>, inverse: KeyPath<Target, Reference<Root>?>
    ) -> Relationship where Root.ID: Codable {
        self.makeToMany(keyPath, inverse: inverse)
    }
}

/// A relationship that cannot be used as declared.
public struct RelationshipError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: Sendable, Hashable {
        /// A key path of a relationship is not in its entity's ``Entity/columns``.
        case notAColumn
        /// A key path given for prefetching or to ``PrefetchedResults`` is not a relationship of the entity.
        case notARelationship
        /// ``PrefetchedResults`` was asked for a relationship the fetch did not prefetch.
        case notPrefetched
        /// The target's primary key has several columns (a ``CompositeKey``); a reference holds one id.
        case unsupportedTarget
    }

    /// The kind of problem.
    public var code: Code
    /// The entity type's name.
    public var entity: String
    /// The key path, as Swift describes it (`\Book.author`).
    public var keyPath: String
    /// The explanation.
    public var message: String

    /// The entity, the key path and the explanation.
    public var description: String { "entity \(self.entity), \(self.keyPath): \(self.message)" }
}

extension Entity {
    /// No relationship declared: the reference columns are to-one relationships with ``DeleteRule/noAction``.
    public static var relationships: [Relationship<Self>] { [] }
}

/// Every relationship of an entity: the declared ones, then the reference columns not declared (as to-one
/// relationships with ``DeleteRule/noAction``).
package enum RelationshipCatalog {
    private static let cache = Locked<[ObjectIdentifier: any Sendable]>([:])

    package static func relationships<T: Entity>(of type: T.Type) -> [Relationship<T>] {
        let key = ObjectIdentifier(type)
        if let cached = self.cache.withLock({ $0[key] }) as? [Relationship<T>] { return cached }
        var all = T.relationships
        let declared = Set(all.map { $0.keyPath as AnyKeyPath })
        for column in T.columns where !declared.contains(column.keyPath) {
            guard let (reference, _) = referenceType(column.valueType),
                let derived = reference.derivedToOne(column.keyPath, of: T.self)
            else { continue }
            all.append(derived)
        }
        self.cache.withLock { $0[key] = all }
        return all
    }

    /// The relationship of `T` named by `keyPath`.
    /// - Throws: ``RelationshipError`` (`.notARelationship`).
    package static func relationship<T: Entity>(_ keyPath: AnyKeyPath, of type: T.Type) throws -> Relationship<T> {
        guard let found = self.relationships(of: type).first(where: { $0.keyPath == keyPath }) else {
            throw RelationshipError(
                code: .notARelationship, entity: String(describing: T.self), keyPath: "\(keyPath)",
                message: "not a relationship: prefetch a Reference column, or a ToMany property listed in \(T.self).relationships")
        }
        return found
    }

    /// The foreign keys of every to-one of `T`.
    package static func foreignKeys<T: Entity>(of type: T.Type) throws -> [ForeignKey] {
        try self.relationships(of: type).filter { $0.kind == .toOne }.map { try $0.foreignKey() }
    }
}
