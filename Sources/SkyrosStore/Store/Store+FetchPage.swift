import Foundation

extension Store {
    /// One page of rows in the descriptor's order, after `cursor` (keyset pagination): a deep page costs what
    /// the first one does, where an offset makes the database walk past every skipped row.
    ///
    /// The page size is the descriptor's `fetchLimit`; its `fetchOffset` must be `nil`. The order is the sort
    /// (or `T.defaultSort`), then the primary key, so it is total and every row is visited exactly once as
    /// pages are fetched one after another — also while rows are written between them (a row moved before the
    /// cursor is not seen again; one moved after it is).
    ///
    /// ```swift
    /// var cursor: PageCursor?
    /// repeat {
    ///     let page = try await store.fetchPage(FetchDescriptor<User>(sortBy: [SortDescriptor(\.name)], fetchLimit: 100), after: cursor)
    ///     for user in page.items { print(user.value.name, user.version) }
    ///     cursor = page.nextCursor
    /// } while cursor != nil
    /// ```
    /// - Parameters:
    ///   - descriptor: the predicate, the sort and the page size (`fetchLimit`).
    ///   - cursor: where the previous page ended (its ``FetchPage/nextCursor``); `nil` for the first page.
    /// - Returns: the page's rows with their versions, and the cursor of the next page (`nil` after the last).
    /// - Throws: ``QueryError`` (`invalidDescriptor` without a positive `fetchLimit`, with an offset, or on a
    ///   store other than ``PostgresStore`` and ``InMemoryStore``; `invalidCursor` for a cursor of another
    ///   entity or sort), `PGError`.
    public func fetchPage<T: Entity>(
        _ descriptor: FetchDescriptor<T>, after cursor: PageCursor? = nil
    ) async throws -> FetchPage<Versioned<T>> {
        // The cursor travels in the descriptor, which only Skyros's stores read: another store would ignore it.
        guard self is any GroupCommitStore else {
            throw QueryError(
                code: .invalidDescriptor, entity: String(describing: T.self), construct: "fetchPage",
                message: "\(type(of: self)) cannot fetch keyset pages; PostgresStore and InMemoryStore can")
        }
        let paged = try PagedFetch(descriptor, after: cursor)
        return try paged.page(try await self.fetch(paged.descriptor)) { $0.value }
    }
}
