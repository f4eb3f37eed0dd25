import Foundation

/// A relationship to prefetch, with the relationships of its rows to prefetch in turn (to any depth).
///
/// ``FetchDescriptor/relationshipKeyPathsForPrefetching`` names one level; a path names deeper ones:
///
/// ```swift
/// var descriptor = FetchDescriptor<Book>()
/// descriptor.prefetchPaths = [PrefetchPath(\.author, then: [PrefetchPath(\.publisher)])]   // 3 queries
/// ```
public struct PrefetchPath<Root: Entity>: @unchecked Sendable {
    // @unchecked Sendable: holds an immutable key path and further paths (themselves Sendable).

    /// The relationship (a ``Reference`` property or a ``ToMany`` property of `Root`).
    public let keyPath: PartialKeyPath<Root>
    /// The paths from the related rows (`PrefetchPath<Target>` values).
    let nested: [any Sendable]

    /// The relationship at `keyPath`, with nothing further.
    /// - Parameter keyPath: a ``Reference`` (or optional reference) property, or a ``ToMany`` property.
    public init(_ keyPath: PartialKeyPath<Root>) {
        self.keyPath = keyPath
        self.nested = []
    }

    /// A to-one relationship, and relationships of the rows it refers to.
    /// - Parameters:
    ///   - keyPath: the reference property.
    ///   - nested: what to prefetch from each referenced row.
    public init<Target: Entity>(_ keyPath: KeyPath<Root, Reference<Target>>, then nested: [PrefetchPath<Target>]) {
        self.keyPath = keyPath
        self.nested = nested
    }

    /// A to-one relationship through an optional reference, and relationships of the rows it refers to.
    /// - Parameters:
    ///   - keyPath: the optional reference property.
    ///   - nested: what to prefetch from each referenced row.
    public init<Target: Entity>(_ keyPath: KeyPath<Root, Reference<Target>?>, then nested: [PrefetchPath<Target>]) {
        self.keyPath = keyPath
        self.nested = nested
    }

    /// A to-many relationship, and relationships of its rows.
    /// - Parameters:
    ///   - keyPath: the ``ToMany`` property.
    ///   - nested: what to prefetch from each related row.
    public init<Target: Entity>(_ keyPath: KeyPath<Root, ToMany<Target>>, then nested: [PrefetchPath<Target>]) {
        self.keyPath = keyPath
        self.nested = nested
    }
}

extension FetchDescriptor {
    /// The relationships loaded with the rows, one level deep (SwiftData's name): each with one more query
    /// when the descriptor is fetched with `fetchWithRelationships(_:)`. Setting it replaces ``prefetchPaths``.
    ///
    /// ```swift
    /// let books = try await store.fetchWithRelationships(
    ///     FetchDescriptor<Book>(relationshipKeyPathsForPrefetching: [\.author]))
    /// ```
    public var relationshipKeyPathsForPrefetching: [PartialKeyPath<T>] {
        get { self.prefetchPaths.map(\.keyPath) }
        set { self.prefetchPaths = newValue.map { PrefetchPath($0) } }
    }

    /// Creates a fetch descriptor that prefetches relationships.
    /// - Parameters:
    ///   - predicate: the rows to return; `nil` for all.
    ///   - sortBy: the order; empty for `T.defaultSort`, then the primary key.
    ///   - fetchLimit: the maximum number of rows; `nil` for no limit.
    ///   - fetchOffset: the number of rows to skip; `nil` for none.
    ///   - relationshipKeyPathsForPrefetching: the relationships to load with the rows.
    public init(
        predicate: Predicate<T>? = nil,
        sortBy: [SortDescriptor<T>] = [],
        fetchLimit: Int? = nil,
        fetchOffset: Int? = nil,
        relationshipKeyPathsForPrefetching: [PartialKeyPath<T>]
    ) {
        self.init(predicate: predicate, sortBy: sortBy, fetchLimit: fetchLimit, fetchOffset: fetchOffset)
        self.relationshipKeyPathsForPrefetching = relationshipKeyPathsForPrefetching
    }
}

/// A prefetch path seen without its root type: what it reads.
protocol PrefetchPathReading {
    /// The entity types the path's relationships read, nested ones included.
    func prefetchedTypes() -> [any Entity.Type]
}

extension PrefetchPath: PrefetchPathReading {
    func prefetchedTypes() -> [any Entity.Type] {
        // A path that names no relationship reads nothing (its fetch fails before any query).
        guard let relationship = try? RelationshipCatalog.relationship(self.keyPath, of: Root.self) else { return [] }
        // A many-to-many reads its join table too (a join row added or removed changes the answer).
        let read: [any Entity.Type] = [relationship.target] + (relationship.joinTable.map { [$0.entity] } ?? [])
        return read + self.nested.flatMap { ($0 as? any PrefetchPathReading)?.prefetchedTypes() ?? [] }
    }
}

extension FetchDescriptor {
    /// The entity types of the relationships ``prefetchPaths`` names, at every level (each once).
    package var prefetchedTypes: [any Entity.Type] {
        var seen = Set<ObjectIdentifier>()
        return self.prefetchPaths.flatMap { $0.prefetchedTypes() }.filter { seen.insert(ObjectIdentifier($0)).inserted }
    }
}
