import Foundation

/// One keyset page as a plain fetch: the descriptor with the cursor as a bound and one row more than the page
/// (which tells whether another page follows), and the page cut from what that fetch returned.
///
/// ```swift
/// let paged = try PagedFetch(FetchDescriptor<User>(sortBy: [SortDescriptor(\.name)], fetchLimit: 20), after: cursor)
/// let page = try paged.page(try await store.fetch(paged.descriptor)) { $0.value }
/// ```
package struct PagedFetch<T: Entity>: Sendable {
    /// What to fetch: the rows after the cursor, `pageSize + 1` of them.
    package let descriptor: FetchDescriptor<T>
    /// The page's size: the caller's `fetchLimit`.
    package let pageSize: Int

    /// - Throws: ``QueryError``: `invalidDescriptor` without a positive `fetchLimit` or with a `fetchOffset`,
    ///   `invalidCursor` for a cursor that does not fit the fetch, and the sort's errors.
    package init(_ descriptor: FetchDescriptor<T>, after cursor: PageCursor?) throws {
        let metadata = try EntityQueryMetadata.of(T.self)
        guard let limit = descriptor.fetchLimit, limit > 0 else {
            throw QueryError(
                code: .invalidDescriptor, entity: metadata.entityName, construct: "fetchLimit",
                message: "a page fetch of \(T.self) needs a positive fetchLimit, the page size")
        }
        guard (descriptor.fetchOffset ?? 0) == 0 else {
            throw QueryError(
                code: .invalidDescriptor, entity: metadata.entityName, construct: "fetchOffset",
                message: "a page fetch of \(T.self) starts after its cursor, not at an offset: leave fetchOffset nil")
        }
        var paged = descriptor
        if let cursor {
            _ = try Keyset.parts(cursor, descriptor.sortBy, metadata)
            paged.pageAfter = cursor
        } else {
            _ = try SQLQueryBuilder.sortColumns(descriptor.sortBy, metadata)
        }
        paged.fetchLimit = limit == Int.max ? limit : limit + 1
        self.descriptor = paged
        self.pageSize = limit
    }

    /// The page from the rows ``descriptor`` fetched: at most ``pageSize`` of them, with the cursor after the
    /// last when more followed.
    /// - Throws: `PGError` when the last row's sort values cannot be encoded.
    package func page<Item: Sendable>(_ rows: [Item], value: (Item) -> T) throws -> FetchPage<Item> {
        guard rows.count > self.pageSize else { return FetchPage(items: rows, nextCursor: nil) }
        let items = Array(rows.prefix(self.pageSize))
        let cursor = try PageCursor(after: value(items[items.count - 1]), sortBy: self.descriptor.sortBy)
        return FetchPage(items: items, nextCursor: cursor)
    }
}
