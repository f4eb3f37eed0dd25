import Foundation
import SkyrosPostgres

extension Store {
    /// Evaluates the request in memory over the rows ``fetch(_:)`` returns for its descriptor: what a store
    /// without SQL (``InMemoryStore``, a test double) does.
    public func evaluate<T: Entity>(_ request: AggregateRequest<T>) async throws -> AggregateRows {
        let rows = try await self.fetch(request.descriptor)
        return try InMemoryAggregate.evaluate(request, over: rows.map(\.value))
    }

    /// Aggregates over the rows a descriptor selects, typed: one value per function, in order (a single
    /// function returns its value alone). `NULL`s and empty sets follow SQL: no rows give `count` 0 and `nil`
    /// for the other functions.
    ///
    /// ```swift
    /// let (open, total, latest) = try await store.aggregate(
    ///     FetchDescriptor<Ticket>(predicate: #Predicate { $0.status == "open" }),
    ///     .count, .sum(\.amount), .max(\.createdAt))
    /// let tickets: Int = try await store.aggregate(FetchDescriptor<Ticket>(), .count)
    /// ```
    /// - Parameters:
    ///   - descriptor: the rows (its limit and offset, when set, select the rows aggregated).
    ///   - functions: the aggregates (see ``AggregateFunction``).
    /// - Throws: ``QueryError`` for an untranslatable predicate or a key path that is not a column, `PGError`.
    public func aggregate<T: Entity, each V: Sendable>(
        _ descriptor: FetchDescriptor<T>, _ functions: repeat AggregateFunction<T, each V>
    ) async throws -> (repeat each V) {
        let request = AggregateDecoding.request(descriptor, groupBy: [], repeat each functions)
        return try AggregateDecoding.single(try await self.evaluate(request), repeat each functions)
    }

    /// Aggregates per value of a column (`GROUP BY`), typed: one `(key, values)` per group, ordered by the key
    /// (`nil` first, strings by code point). Rows whose column is `NULL` form one group, as in SQL; a group
    /// exists only when a row has its key, so no rows give no groups.
    ///
    /// ```swift
    /// let perPriority = try await store.aggregate(
    ///     FetchDescriptor<Ticket>(predicate: #Predicate { $0.status == "open" }),
    ///     groupBy: \.priority, .count, .sum(\.amount), .max(\.createdAt))
    /// for (priority, (count, total, latest)) in perPriority { print(priority, count, total ?? 0, latest as Any) }
    /// ```
    /// - Parameters:
    ///   - descriptor: the rows (its limit and offset, when set, select the rows aggregated).
    ///   - groupBy: the column whose values form the groups.
    ///   - functions: the aggregates per group (none: the distinct values of the column).
    /// - Throws: ``QueryError`` for an untranslatable predicate or a key path that is not a column, `PGError`.
    public func aggregate<T: Entity, K: Decodable & Sendable, each V: Sendable>(
        _ descriptor: FetchDescriptor<T>, groupBy: KeyPath<T, K>, _ functions: repeat AggregateFunction<T, each V>
    ) async throws -> [(key: K, values: (repeat each V))] {
        let request = AggregateDecoding.request(descriptor, groupBy: [AggregateGroupColumn(groupBy)], repeat each functions)
        return try AggregateDecoding.grouped(try await self.evaluate(request), keyPath: groupBy, repeat each functions)
    }

    /// Aggregates per pair of values of two columns (`GROUP BY a, b`): one `(key: (a, b), values)` per pair that
    /// occurs, ordered by the first key, then the second (`nil` first, strings by code point).
    ///
    /// ```swift
    /// let perStatusAndPriority = try await store.aggregate(
    ///     FetchDescriptor<Ticket>(), groupBy: (\.status, \.priority), .count, .sum(\.price))
    /// for ((status, priority), (count, total)) in perStatusAndPriority { print(status, priority, count, total ?? 0) }
    /// ```
    /// - Parameters:
    ///   - descriptor: the rows (its limit and offset, when set, select the rows aggregated).
    ///   - keyPaths: the two columns whose values form the groups.
    ///   - functions: the aggregates per group.
    /// - Throws: ``QueryError`` for an untranslatable predicate or a key path that is not a column, `PGError`.
    public func aggregate<T: Entity, K1: Decodable & Sendable, K2: Decodable & Sendable, each V: Sendable>(
        _ descriptor: FetchDescriptor<T>, groupBy keyPaths: (KeyPath<T, K1>, KeyPath<T, K2>),
        _ functions: repeat AggregateFunction<T, each V>
    ) async throws -> [(key: (K1, K2), values: (repeat each V))] {
        let groups = [AggregateGroupColumn(keyPaths.0), AggregateGroupColumn(keyPaths.1)]
        let request = AggregateDecoding.request(descriptor, groupBy: groups, repeat each functions)
        return try AggregateDecoding.grouped(try await self.evaluate(request), keyPaths: keyPaths, repeat each functions)
    }

    /// The rows a descriptor selects, decoded into any `Decodable` (a projection): only `propertiesToFetch` are
    /// read (every column when empty), and `P`'s Codable keys name columns as the entity's keys do.
    ///
    /// ```swift
    /// struct TicketTitle: Decodable, Sendable { var id: Int; var title: String }
    /// let titles = try await store.fetch(
    ///     FetchDescriptor<Ticket>(sortBy: [SortDescriptor(\.title)]), as: TicketTitle.self,
    ///     propertiesToFetch: [\.id, \.title])
    /// ```
    /// - Parameters:
    ///   - descriptor: the rows, their order and window.
    ///   - type: the type each row decodes into.
    ///   - propertiesToFetch: the columns to read; empty reads every column.
    /// - Throws: ``QueryError``, `PGError` (`.decoding`) or ``EntityMappingError`` when `P` reads a key that
    ///   is not a fetched column.
    public func fetch<T: Entity, P: Decodable>(
        _ descriptor: FetchDescriptor<T>, as type: P.Type, propertiesToFetch: [PartialKeyPath<T>] = []
    ) async throws -> [P] {
        let request = try AggregateDecoding.projection(descriptor, properties: propertiesToFetch)
        return try AggregateDecoding.projected(try await self.evaluate(request), of: request, as: P.self)
    }
}
