import Foundation
import SkyrosStore

extension DataContext {
    /// One page of rows in the descriptor's order, after `cursor` (keyset pagination), with this context's
    /// unsaved changes and the stack's queued changes applied, as ``fetch(_:)-(FetchDescriptor<T>)`` applies
    /// them: a deep page costs what the first one does.
    ///
    /// The page size is the descriptor's `fetchLimit`; its `fetchOffset` must be `nil`. The order is the sort
    /// (or `T.defaultSort`), then the primary key, so every row is visited exactly once as pages are fetched
    /// one after another. The cursor is a value a service can hand to its clients (its `description` is a
    /// URL-safe token) and use with another context or another stack.
    ///
    /// ```swift
    /// let descriptor = FetchDescriptor<Ticket>(
    ///     predicate: #Predicate { $0.status == "open" }, sortBy: [SortDescriptor(\.createdAt, order: .reverse)], fetchLimit: 50)
    /// let first = try await stack.read { try await $0.fetchPage(descriptor) }
    /// let second = try await stack.read { try await $0.fetchPage(descriptor, after: first.nextCursor) }
    /// ```
    /// - Parameters:
    ///   - descriptor: the predicate, the sort and the page size (`fetchLimit`).
    ///   - cursor: where the previous page ended (its `FetchPage.nextCursor`); `nil` for the first page.
    /// - Returns: the page's rows, and the cursor of the next page (`nil` after the last).
    /// - Throws: `QueryError` (`invalidDescriptor` without a positive `fetchLimit` or with an offset;
    ///   `invalidCursor` for a cursor of another entity or sort), `PGError`, ``DataStackError``.
    public func fetchPage<T: Entity>(
        _ descriptor: FetchDescriptor<T>, after cursor: PageCursor? = nil
    ) async throws -> FetchPage<T> {
        let paged = try PagedFetch(descriptor, after: cursor)
        return try paged.page(try await self.fetch(paged.descriptor)) { $0 }
    }
}
