import SkyrosPostgres
@_spi(Benchmarks) import SkyrosStore

extension SnapshotReader {
    /// Aggregates over the rows a descriptor selects, as of the snapshot (see `Store/aggregate(_:_:)`).
    ///
    /// ```swift
    /// let (tickets, total) = try await stack.readSnapshot { snapshot in
    ///     try await snapshot.aggregate(FetchDescriptor<Ticket>(), .count, .sum(\.amount))
    /// }
    /// ```
    /// - Parameters:
    ///   - descriptor: the rows (its limit and offset, when set, select the rows aggregated).
    ///   - functions: the aggregates (see `AggregateFunction`).
    /// - Throws: `QueryError`, `PGError`.
    public func aggregate<T: Entity, each V: Sendable>(
        _ descriptor: FetchDescriptor<T>, _ functions: repeat AggregateFunction<T, each V>
    ) async throws -> (repeat each V) {
        let request = AggregateDecoding.request(descriptor, groupBy: [], repeat each functions)
        return try AggregateDecoding.single(try await self.evaluate(request), repeat each functions)
    }

    /// Aggregates per value of a column, as of the snapshot (see `Store/aggregate(_:groupBy:_:)`).
    /// - Parameters:
    ///   - descriptor: the rows (its limit and offset, when set, select the rows aggregated).
    ///   - groupBy: the column whose values form the groups (`NULL` is one group).
    ///   - functions: the aggregates per group.
    /// - Throws: `QueryError`, `PGError`.
    public func aggregate<T: Entity, K: Decodable & Sendable, each V: Sendable>(
        _ descriptor: FetchDescriptor<T>, groupBy: KeyPath<T, K>, _ functions: repeat AggregateFunction<T, each V>
    ) async throws -> [(key: K, values: (repeat each V))] {
        let request = AggregateDecoding.request(descriptor, groupBy: [AggregateGroupColumn(groupBy)], repeat each functions)
        return try AggregateDecoding.grouped(try await self.evaluate(request), keyPath: groupBy, repeat each functions)
    }

    /// Aggregates per pair of values of two columns, as of the snapshot (see `Store`'s `aggregate` with two
    /// group-by key paths).
    /// - Parameters:
    ///   - descriptor: the rows (its limit and offset, when set, select the rows aggregated).
    ///   - keyPaths: the two columns whose values form the groups.
    ///   - functions: the aggregates per group.
    /// - Throws: `QueryError`, `PGError`.
    public func aggregate<T: Entity, K1: Decodable & Sendable, K2: Decodable & Sendable, each V: Sendable>(
        _ descriptor: FetchDescriptor<T>, groupBy keyPaths: (KeyPath<T, K1>, KeyPath<T, K2>),
        _ functions: repeat AggregateFunction<T, each V>
    ) async throws -> [(key: (K1, K2), values: (repeat each V))] {
        let groups = [AggregateGroupColumn(keyPaths.0), AggregateGroupColumn(keyPaths.1)]
        let request = AggregateDecoding.request(descriptor, groupBy: groups, repeat each functions)
        return try AggregateDecoding.grouped(try await self.evaluate(request), keyPaths: keyPaths, repeat each functions)
    }

    /// The rows a descriptor selects, as of the snapshot, decoded into any `Decodable` (see
    /// `Store/fetch(_:as:propertiesToFetch:)`).
    /// - Parameters:
    ///   - descriptor: the rows, their order and window.
    ///   - type: the type each row decodes into.
    ///   - propertiesToFetch: the columns to read; empty reads every column.
    /// - Throws: `QueryError`, `PGError`, `EntityMappingError`.
    public func fetch<T: Entity, P: Decodable>(
        _ descriptor: FetchDescriptor<T>, as type: P.Type, propertiesToFetch: [PartialKeyPath<T>] = []
    ) async throws -> [P] {
        let request = try AggregateDecoding.projection(descriptor, properties: propertiesToFetch)
        return try AggregateDecoding.projected(try await self.evaluate(request), of: request, as: P.self)
    }

    private func evaluate<T: Entity>(_ request: AggregateRequest<T>) async throws -> AggregateRows {
        switch self.source {
        case .postgres(let connection, let schema):
            return AggregateRows(try await connection.query(try SQLQueryBuilder.aggregate(request, schema: schema)))
        case .store(let store):
            return try await store.evaluate(request)
        }
    }
}
