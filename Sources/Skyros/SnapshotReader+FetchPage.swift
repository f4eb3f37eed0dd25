import SkyrosStore

extension SnapshotReader {
    /// One page of rows after `cursor` (keyset pagination), as of the snapshot: see `DataContext.fetchPage`.
    ///
    /// ```swift
    /// let page = try await stack.readSnapshot { try await $0.fetchPage(FetchDescriptor<Order>(fetchLimit: 100), after: cursor) }
    /// ```
    /// - Parameters:
    ///   - descriptor: the predicate, the sort and the page size (`fetchLimit`).
    ///   - cursor: where the previous page ended; `nil` for the first page.
    /// - Throws: `QueryError` (`invalidDescriptor`, `invalidCursor`), `PGError`.
    public func fetchPage<T: Entity>(
        _ descriptor: FetchDescriptor<T>, after cursor: PageCursor? = nil
    ) async throws -> FetchPage<T> {
        let paged = try PagedFetch(descriptor, after: cursor)
        return try paged.page(try await self.fetch(paged.descriptor)) { $0 }
    }
}
