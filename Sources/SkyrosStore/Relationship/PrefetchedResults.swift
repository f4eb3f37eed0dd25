import Foundation
import SkyrosPostgres

/// The rows of a fetch and the related rows it prefetched, answered from memory with no further round trip.
///
/// ```swift
/// let books = try await context.fetchWithRelationships(
///     FetchDescriptor<Book>(relationshipKeyPathsForPrefetching: [\.author]))     // 2 queries
/// for book in books {
///     let author = try books.related(\.author, of: book)                          // no query
///     print(book.title, author?.name ?? "?")
/// }
/// ```
///
/// A to-one answers `nil` when no row has the referenced id (a nullable reference that is `nil`, or a row
/// deleted since). Asking for a relationship the fetch did not prefetch throws
/// ``RelationshipError`` (`.notPrefetched`): nothing is loaded behind the app's back.
public struct PrefetchedResults<T: Entity>: Sendable, RandomAccessCollection {
    /// The fetched rows, in the descriptor's order.
    public let rows: [T]
    let related: RelatedRows

    /// The index of the first row (0).
    public var startIndex: Int { self.rows.startIndex }
    /// The index after the last row (the number of rows).
    public var endIndex: Int { self.rows.endIndex }
    /// The row at `position`, in the descriptor's order.
    public subscript(position: Int) -> T { self.rows[position] }

    /// The row `row`'s reference at `keyPath` refers to, or `nil` when there is none.
    ///
    /// ```swift
    /// let author = try books.related(\.author, of: book)
    /// ```
    /// - Parameters:
    ///   - keyPath: a prefetched reference property (of the fetched entity or, for a nested path, of a related one).
    ///   - row: a fetched or prefetched row.
    /// - Throws: ``RelationshipError`` when the relationship was not prefetched.
    public func related<Source: Entity, Target: Entity>(_ keyPath: KeyPath<Source, Reference<Target>>, of row: Source) throws -> Target? {
        try self.related.checkPrefetched(keyPath)
        return self.related.row(Target.self, id: row[keyPath: keyPath].id)
    }

    /// The row `row`'s optional reference at `keyPath` refers to, or `nil` when it is `nil` or refers to no row.
    /// - Parameters:
    ///   - keyPath: a prefetched optional reference property.
    ///   - row: a fetched or prefetched row.
    /// - Throws: ``RelationshipError`` when the relationship was not prefetched.
    public func related<Source: Entity, Target: Entity>(_ keyPath: KeyPath<Source, Reference<Target>?>, of row: Source) throws -> Target? {
        try self.related.checkPrefetched(keyPath)
        guard let id = row[keyPath: keyPath]?.id else { return nil }
        return self.related.row(Target.self, id: id)
    }

    /// The rows of the to-many at `keyPath` of `row`, in `Target`'s default order (then by primary key).
    ///
    /// ```swift
    /// let books = try authors.related(\.books, of: author)
    /// ```
    /// - Parameters:
    ///   - keyPath: a prefetched ``ToMany`` property.
    ///   - row: a fetched or prefetched row.
    /// - Throws: ``RelationshipError`` when the relationship was not prefetched.
    public func related<Source: Entity, Target: Entity>(_ keyPath: KeyPath<Source, ToMany<Target>>, of row: Source) throws -> [Target] {
        try self.related.checkPrefetched(keyPath)
        return self.related.children(keyPath, of: row.id, ownerType: Source.self, rowType: Target.self)
    }
}

extension PrefetchedResults {
    /// The rows and every related row as JSON, in a stable order, with each to-many's rows in their order: two
    /// results with the same fingerprint answer every question alike (what an observation compares).
    package func fingerprint() throws -> [String] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        var lines = try self.rows.map { String(decoding: try encoder.encode($0), as: UTF8.self) }
        lines.append("--")
        lines += try self.related.fingerprint(encoder)
        return lines
    }
}

/// What fetches the related rows: a store, or a context (which also caches them).
package protocol RelatedRowSource: Sendable {
    /// The rows matching `descriptor`.
    func fetchRelated<R: Entity>(_ descriptor: FetchDescriptor<R>) async throws -> [R]
    /// The targets of a many-to-many with the owner each is paired with, in the target's order (one pair per
    /// join row). The default makes two descriptor fetches; a PostgreSQL store runs one query.
    func fetchRelated<Owner: Entity, Join: Entity, Target: Entity>(
        _ request: ManyToManyFetch<Owner, Join, Target>
    ) async throws -> [(owner: Owner.ID, target: Target)] where Owner.ID: Codable, Target.ID: Codable
}

/// The related rows a fetch prefetched: by entity type and id, and a to-many's rows by owner.
///
/// Each type's rows and each to-many's groups are kept in typed dictionaries (`[Target.ID: Target]`), found by
/// the type's identifier: a lookup is one hash of the id, with no `AnyHashable` box and no cast of the row.
final class RelatedRows: Sendable {
    /// A box of rows that can describe itself for ``PrefetchedResults/fingerprint()``.
    private protocol Fingerprinted: AnyObject {
        func lines(_ encoder: JSONEncoder) throws -> [String]
    }

    /// One entity type's rows by id.
    private final class Rows<R: Entity>: Fingerprinted, @unchecked Sendable {
        // @unchecked Sendable: mutated only under the owner's lock, while loading.
        var byID: [R.ID: R] = [:]

        func lines(_ encoder: JSONEncoder) throws -> [String] {
            try self.byID.values.map { "\(R.self) " + String(decoding: try encoder.encode($0), as: UTF8.self) }.sorted()
        }
    }

    /// One to-many's rows by their owner's id.
    private final class Groups<Owner: Entity, R: Entity>: Fingerprinted, @unchecked Sendable {
        // @unchecked Sendable: written once, under the owner's lock.
        var byOwner: [Owner.ID: [R]] = [:]

        func lines(_ encoder: JSONEncoder) throws -> [String] {
            self.byOwner.map { owner, rows in
                "\(Owner.self)→\(R.self) \(owner): " + rows.map { "\($0.id)" }.joined(separator: ",")
            }.sorted()
        }
    }

    /// Every related row and each to-many's order, as lines in a stable order.
    func fingerprint(_ encoder: JSONEncoder) throws -> [String] {
        let boxes = self.state.withLock { state in Array(state.byType.values) + Array(state.children.values) }
        // Each line names its type (and owner): sorted, they do not depend on the dictionaries' order.
        return try boxes.flatMap { try ($0 as? any Fingerprinted)?.lines(encoder) ?? [] }.sorted()
    }

    private struct State: @unchecked Sendable {
        // @unchecked Sendable: the key paths are immutable values; the boxes are Sendable.
        var byType: [ObjectIdentifier: AnyObject] = [:]
        var children: [AnyKeyPath: AnyObject] = [:]
        var prefetched: Set<AnyKeyPath> = []
    }

    private let state = Locked(State())

    func markPrefetched(_ keyPath: AnyKeyPath) {
        self.state.withLock { _ = $0.prefetched.insert(keyPath) }
    }

    func add<R: Entity>(_ rows: [R]) {
        self.state.withLock { state in
            let key = ObjectIdentifier(R.self)
            let box: Rows<R>
            if let existing = state.byType[key] {
                box = unsafeDowncast(existing, to: Rows<R>.self)   // stored under R's identifier: a Rows<R>
            } else {
                box = Rows<R>()
                state.byType[key] = box
            }
            box.byID.reserveCapacity(box.byID.count + rows.count)
            for row in rows { box.byID[row.id] = row }
        }
    }

    func setChildren<Owner: Entity, R: Entity>(_ grouped: [Owner.ID: [R]], owner: Owner.Type, for keyPath: AnyKeyPath) {
        let box = Groups<Owner, R>()
        box.byOwner = grouped
        self.state.withLock { $0.children[keyPath] = box }
    }

    func checkPrefetched<Source>(_ keyPath: PartialKeyPath<Source>) throws {
        guard self.state.withLock({ $0.prefetched.contains(keyPath) }) else {
            throw RelationshipError(
                code: .notPrefetched, entity: String(describing: Source.self), keyPath: "\(keyPath)",
                message: "the fetch did not prefetch this relationship: add it to relationshipKeyPathsForPrefetching")
        }
    }

    func row<R: Entity>(_ type: R.Type, id: R.ID) -> R? {
        self.state.withLock { state in
            state.byType[ObjectIdentifier(R.self)].map { unsafeDowncast($0, to: Rows<R>.self).byID[id] } ?? nil
        }
    }

    func children<Owner: Entity, R: Entity>(_ keyPath: AnyKeyPath, of owner: Owner.ID, ownerType: Owner.Type, rowType: R.Type) -> [R] {
        self.state.withLock { state in
            // Set by the to-many at this key path, whose owner and row types are Owner and R.
            (state.children[keyPath] as? Groups<Owner, R>)?.byOwner[owner] ?? []
        }
    }
}

/// Runs a descriptor's prefetching: the rows, then one fetch per relationship, level by level.
package enum PrefetchLoader {
    /// The rows of `descriptor` and every relationship it names, through `source`.
    /// - Throws: ``RelationshipError``, and what `source` throws.
    package static func results<T: Entity>(_ descriptor: FetchDescriptor<T>, source: any RelatedRowSource) async throws -> PrefetchedResults<T> {
        let paths = descriptor.prefetchPaths
        // Check every named relationship before the first query.
        try self.check(paths)
        var plain = descriptor
        plain.prefetchPaths = []
        let rows = try await source.fetchRelated(plain)
        let related = RelatedRows()
        try await self.load(paths, owners: rows, source: source, into: related)
        return PrefetchedResults(rows: rows, related: related)
    }

    /// Loads `paths` from `owners`: one fetch per path (none when no owner refers to anything).
    static func load<Root: Entity>(_ paths: [PrefetchPath<Root>], owners: [Root], source: any RelatedRowSource, into rows: RelatedRows) async throws {
        for path in paths {
            let relationship = try RelationshipCatalog.relationship(path.keyPath, of: Root.self)
            try await relationship.prefetch(owners, path.nested, source, rows)
        }
    }

    /// `nested` as paths from `Target`.
    static func paths<Target: Entity>(_ nested: [any Sendable], of type: Target.Type) throws -> [PrefetchPath<Target>] {
        try nested.map { path in
            guard let typed = path as? PrefetchPath<Target> else {
                throw RelationshipError(
                    code: .notARelationship, entity: String(describing: Target.self), keyPath: "\(path)",
                    message: "a nested prefetch path does not start at \(Target.self)")
            }
            return typed
        }
    }

    /// Throws when a path names no relationship (checked before any query runs).
    static func check<Root: Entity>(_ paths: [PrefetchPath<Root>]) throws {
        for path in paths { _ = try RelationshipCatalog.relationship(path.keyPath, of: Root.self) }
    }
}

/// A store as the source of related rows.
struct StoreRowSource: RelatedRowSource {
    let store: any Store

    func fetchRelated<R: Entity>(_ descriptor: FetchDescriptor<R>) async throws -> [R] {
        try await self.store.fetch(descriptor).map(\.value)
    }
}

/// A store that reads a prefetch its own way rather than through its ``Store/fetch(_:)`` (each relationship's
/// query then leasing a connection of its own, and a many-to-many taking two fetches).
package protocol PrefetchingStore: Store {
    /// Runs `body` with the source a prefetch reads its related rows from.
    func withRelatedRowSource<R>(_ body: (any RelatedRowSource) async throws -> R) async throws -> R
}

extension PostgresStore: PrefetchingStore {
    /// Every level of a prefetch on one leased connection: the queries still run one per relationship, without
    /// a lease each, and a many-to-many is one query (its targets joined to the join table).
    package func withRelatedRowSource<R>(_ body: (any RelatedRowSource) async throws -> R) async throws -> R {
        try await self.pool.withConnection { connection in try await body(ConnectionRowSource(store: self, connection: connection)) }
    }
}

/// One leased PostgreSQL connection as the source of related rows: a prefetch's queries run one after another on
/// its thread, with one hop there and back for all of them rather than one per query.
struct ConnectionRowSource: RelatedRowSource {
    let store: PostgresStore
    let connection: PGConnection

    func fetchRelated<R: Entity>(_ descriptor: FetchDescriptor<R>) async throws -> [R] {
        try await self.store.fetch(descriptor, on: self.connection).map(\.value)
    }
}

extension Store {
    /// The rows matching `descriptor`, with the relationships it names prefetched: one query for the rows,
    /// then one per relationship (`WHERE key = ANY($1)`, every id bound as one array), at every level.
    ///
    /// ```swift
    /// let books = try await store.fetchWithRelationships(
    ///     FetchDescriptor<Book>(relationshipKeyPathsForPrefetching: [\.author]))    // 2 queries
    /// let author = try books.related(\.author, of: books[0])
    /// ```
    /// - Parameter descriptor: the rows, and in ``FetchDescriptor/prefetchPaths`` the relationships.
    /// - Returns: the rows and their related rows.
    /// - Throws: ``RelationshipError`` when a key path names no relationship (before any query), ``QueryError``,
    ///   `PGError`.
    public func fetchWithRelationships<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> PrefetchedResults<T> {
        if let store = self as? any PrefetchingStore {
            return try await store.withRelatedRowSource { try await PrefetchLoader.results(descriptor, source: $0) }
        }
        return try await PrefetchLoader.results(descriptor, source: StoreRowSource(store: self))
    }
}
