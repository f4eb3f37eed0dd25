import Foundation
import SkyrosStore

extension DataContext {
    /// The rows matching `descriptor` as this context sees them, with the relationships it names prefetched:
    /// one fetch for the rows, then one per relationship (`WHERE key = ANY($1)`), at every level. Each fetch
    /// is a context fetch: unsaved and queued changes are applied, and on the main context the rows read enter
    /// the cache (a later `object(_:id:)` of a prefetched row is served from memory).
    ///
    /// ```swift
    /// let books = try await stack.mainContext.fetchWithRelationships(
    ///     FetchDescriptor<Book>(relationshipKeyPathsForPrefetching: [\.author]))   // 2 queries
    /// for book in books {
    ///     print(book.title, try books.related(\.author, of: book)?.name ?? "?")    // no query
    /// }
    /// ```
    /// - Parameter descriptor: the rows, and in `FetchDescriptor.prefetchPaths` the relationships.
    /// - Returns: the rows and their related rows.
    /// - Throws: `RelationshipError` when a key path names no relationship (before any query), `QueryError`,
    ///   `PGError`, ``DataStackError``.
    public func fetchWithRelationships<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> PrefetchedResults<T> {
        try await PrefetchLoader.results(descriptor, source: ContextRowSource(context: self))
    }
}

/// A context as the source of related rows.
struct ContextRowSource: RelatedRowSource {
    let context: DataContext

    func fetchRelated<R: Entity>(_ descriptor: FetchDescriptor<R>) async throws -> [R] {
        try await self.context.fetch(descriptor)
    }
}
