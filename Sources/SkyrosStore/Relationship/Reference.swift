import Foundation
import SkyrosPostgres

/// A to-one relationship stored as a foreign-key column: the id of the row it refers to.
///
/// Entities are values, cached and shared by the stack, so one entity never holds another: a `Book` holds a
/// `Reference<Author>`, which is the author's id, stored in the `author_id` column (the column's type is the
/// author's id type). Read the author itself from a fetch that prefetched it (``PrefetchedResults``) or with the
/// id (`context.object(Author.self, id: book.author.id)`).
///
/// ```swift
/// struct Book: Entity {
///     var id: Int64
///     var title: String
///     var author: Reference<Author>            // column author_id REFERENCES authors (id)
///
///     enum CodingKeys: String, CodingKey { case id, title, author = "author_id" }   // key → column
///
///     static let tableName = "books"
///     static let columns: [EntityColumn<Book>] = [
///         EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.author, "author_id"),
///     ]
/// }
///
/// let book = Book(id: 1, title: "Emma", author: Reference(7))   // or Reference(to: author)
/// ```
///
/// An optional reference (`Reference<Author>?`) is a nullable foreign key. A reference column is a to-one
/// relationship without further declaration (its delete rule then is ``DeleteRule/noAction``); declare it in
/// ``Entity/relationships`` to give another rule (see ``Relationship``).
///
/// A predicate reads the target's columns through the reference, as SwiftData reads a relationship
/// (`#Predicate<Book> { $0.author.name == "Ada" }`); see "Predicates across relationships" in the
/// Relationships and Prefetching article.
@dynamicMemberLookup
public struct Reference<Target: Entity>: Hashable, Sendable, CustomStringConvertible {
    /// The id of the row referred to.
    public var id: Target.ID

    /// A reference to the row with `id`.
    /// - Parameter id: the target row's primary key.
    public init(_ id: Target.ID) { self.id = id }

    /// A reference to `target`.
    /// - Parameter target: the row referred to.
    public init(to target: Target) { self.id = target.id }

    /// `Reference<Author>(7)`.
    public var description: String { "Reference<\(Target.self)>(\(self.id))" }
}

extension Reference: Codable where Target.ID: Codable {
    /// Decodes the target's id (a reference is stored as the id alone).
    public init(from decoder: any Decoder) throws {
        self.id = try decoder.singleValueContainer().decode(Target.ID.self)
    }

    /// Encodes the target's id.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(self.id)
    }
}

extension Reference: PGEncodable {
    /// The id's type: a reference is bound as the id it holds.
    public static var postgresType: PGType { Target.ID.postgresType }
    /// The id's text.
    public func postgresText() throws -> String? { try self.id.postgresText() }
}

extension Reference: PGDecodable {
    /// Decodes the id.
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
        self.id = try Target.ID(postgresText: bytes, type: type)
    }
}

extension Reference: PGArrayElement where Target.ID: PGArrayElement {
    /// The id's array type (a prefetch binds the references it looks up as one array).
    public static var postgresArrayType: PGType { Target.ID.postgresArrayType }
}

/// A reference type seen without its target: what start checks a reference column against, and how a
/// relationship is derived from a column.
package protocol AnyReference {
    /// The target entity type.
    static var targetType: any Entity.Type { get }
    /// The target's id type (the column's Swift type as the schema check sees it).
    static var idType: Any.Type { get }
    /// The to-one relationship (rule ``DeleteRule/noAction``) of a column of this type at `keyPath`; `nil` when
    /// the key path's value is not this type or its optional.
    static func derivedToOne<Root: Entity>(_ keyPath: PartialKeyPath<Root>, of root: Root.Type) -> Relationship<Root>?
}

extension Reference: AnyReference where Target.ID: Codable {
    package static var targetType: any Entity.Type { Target.self }
    package static var idType: Any.Type { Target.ID.self }

    package static func derivedToOne<Root: Entity>(_ keyPath: PartialKeyPath<Root>, of root: Root.Type) -> Relationship<Root>? {
        if let plain = keyPath as? KeyPath<Root, Reference<Target>> { return .toOne(plain) }
        if let optional = keyPath as? KeyPath<Root, Reference<Target>?> { return .toOne(optional) }
        return nil
    }
}

/// The reference type behind a column's Swift type (`Reference<A>` or `Reference<A>?`), and whether it is
/// optional; `nil` for a column that is not a reference.
package func referenceType(_ type: Any.Type) -> (reference: any AnyReference.Type, optional: Bool)? {
    let (wrapped, optional) = unwrapOptional(type)
    guard let reference = wrapped as? any AnyReference.Type else { return nil }
    return (reference, optional)
}
