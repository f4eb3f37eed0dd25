import Foundation
import SkyrosStore

extension DataContext {
    /// Aggregates over the rows a descriptor selects, with this context's unsaved changes and the stack's
    /// queued changes applied (read-your-writes): typed, one value per function, in order. `NULL`s and empty
    /// sets follow SQL (no rows: `count` 0, the other functions `nil`).
    ///
    /// While neither this context, its parents nor the commit queue hold changes of the table, the store runs
    /// it (one SQL statement on PostgreSQL); otherwise it is computed in memory over the layered fetch, with the
    /// same results.
    ///
    /// ```swift
    /// let (open, total) = try await stack.read { context in
    ///     try await context.aggregate(
    ///         FetchDescriptor<Ticket>(predicate: #Predicate { $0.status == "open" }), .count, .sum(\.amount))
    /// }
    /// ```
    /// - Parameters:
    ///   - descriptor: the rows (its limit and offset, when set, select the rows aggregated).
    ///   - functions: the aggregates (see `AggregateFunction`).
    /// - Throws: `QueryError`, `PGError`, ``DataStackError``.
    public func aggregate<T: Entity, each V: Sendable>(
        _ descriptor: FetchDescriptor<T>, _ functions: repeat AggregateFunction<T, each V>
    ) async throws -> (repeat each V) {
        let request = AggregateDecoding.request(descriptor, groupBy: [], repeat each functions)
        return try AggregateDecoding.single(try await self.evaluate(request), repeat each functions)
    }

    /// Aggregates per value of a column (`GROUP BY`), with unsaved and queued changes applied: one
    /// `(key, values)` per group, ordered by the key (`nil` first, strings by code point).
    ///
    /// ```swift
    /// let perPriority = try await context.aggregate(
    ///     FetchDescriptor<Ticket>(predicate: #Predicate { $0.status == "open" }),
    ///     groupBy: \.priority, .count, .sum(\.amount), .max(\.createdAt))
    /// ```
    /// - Parameters:
    ///   - descriptor: the rows (its limit and offset, when set, select the rows aggregated).
    ///   - groupBy: the column whose values form the groups (`NULL` is one group).
    ///   - functions: the aggregates per group.
    /// - Throws: `QueryError`, `PGError`, ``DataStackError``.
    public func aggregate<T: Entity, K: Decodable & Sendable, each V: Sendable>(
        _ descriptor: FetchDescriptor<T>, groupBy: KeyPath<T, K>, _ functions: repeat AggregateFunction<T, each V>
    ) async throws -> [(key: K, values: (repeat each V))] {
        let request = AggregateDecoding.request(descriptor, groupBy: [AggregateGroupColumn(groupBy)], repeat each functions)
        return try AggregateDecoding.grouped(try await self.evaluate(request), keyPath: groupBy, repeat each functions)
    }

    /// Aggregates per pair of values of two columns (`GROUP BY a, b`), with unsaved and queued changes applied:
    /// one `(key: (a, b), values)` per pair that occurs, ordered by the first key, then the second.
    ///
    /// ```swift
    /// let grid = try await context.aggregate(FetchDescriptor<Ticket>(), groupBy: (\.status, \.priority), .count)
    /// ```
    /// - Parameters:
    ///   - descriptor: the rows (its limit and offset, when set, select the rows aggregated).
    ///   - keyPaths: the two columns whose values form the groups.
    ///   - functions: the aggregates per group.
    /// - Throws: `QueryError`, `PGError`, ``DataStackError``.
    public func aggregate<T: Entity, K1: Decodable & Sendable, K2: Decodable & Sendable, each V: Sendable>(
        _ descriptor: FetchDescriptor<T>, groupBy keyPaths: (KeyPath<T, K1>, KeyPath<T, K2>),
        _ functions: repeat AggregateFunction<T, each V>
    ) async throws -> [(key: (K1, K2), values: (repeat each V))] {
        let groups = [AggregateGroupColumn(keyPaths.0), AggregateGroupColumn(keyPaths.1)]
        let request = AggregateDecoding.request(descriptor, groupBy: groups, repeat each functions)
        return try AggregateDecoding.grouped(try await self.evaluate(request), keyPaths: keyPaths, repeat each functions)
    }

    /// The rows a descriptor selects, with unsaved and queued changes applied, decoded into any `Decodable`:
    /// only `propertiesToFetch` are read (every column when empty); `P`'s Codable keys name columns as the
    /// entity's keys do.
    ///
    /// ```swift
    /// struct TicketTitle: Decodable, Sendable { var id: Int; var title: String }
    /// let titles = try await context.fetch(FetchDescriptor<Ticket>(), as: TicketTitle.self, propertiesToFetch: [\.id, \.title])
    /// ```
    /// - Parameters:
    ///   - descriptor: the rows, their order and window.
    ///   - type: the type each row decodes into.
    ///   - propertiesToFetch: the columns to read; empty reads every column.
    /// - Throws: `QueryError`, `PGError`, `EntityMappingError`, ``DataStackError``.
    public func fetch<T: Entity, P: Decodable>(
        _ descriptor: FetchDescriptor<T>, as type: P.Type, propertiesToFetch: [PartialKeyPath<T>] = []
    ) async throws -> [P] {
        let request = try AggregateDecoding.projection(descriptor, properties: propertiesToFetch)
        return try AggregateDecoding.projected(try await self.evaluate(request), of: request, as: P.self)
    }

    /// The request's rows from the store while nothing unsaved or queued touches the table, else computed in
    /// memory over ``layeredFetch(_:)``.
    func evaluate<T: Entity>(_ request: AggregateRequest<T>) async throws -> AggregateRows {
        try self.checkValid()
        if self.hasChanges(inAnyOf: request.descriptor.readTables) {
            return try InMemoryAggregate.evaluate(request, over: try await self.layeredFetch(request.descriptor).map(\.value))
        }
        switch self.parent {
        case .root: return try await self.core.evaluate(request)
        case .context(let parent): return try await parent.evaluate(request)
        }
    }
}
