import SkyrosStore

extension SnapshotReader {
    /// The rows matching `descriptor` with the relationships it names prefetched, every query in the snapshot:
    /// the rows and their related rows are one consistent state of the database (see
    /// `DataContext.fetchWithRelationships`).
    ///
    /// ```swift
    /// let books = try await stack.readSnapshot {
    ///     try await $0.fetchWithRelationships(FetchDescriptor<Book>(relationshipKeyPathsForPrefetching: [\.author]))
    /// }
    /// ```
    /// - Parameter descriptor: the rows, and in `FetchDescriptor.prefetchPaths` the relationships.
    /// - Returns: the rows and their related rows.
    /// - Throws: `RelationshipError` when a key path names no relationship (before any query), `QueryError`,
    ///   `PGError`.
    public func fetchWithRelationships<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> PrefetchedResults<T> {
        try await PrefetchLoader.results(descriptor, source: SnapshotRowSource(reader: self))
    }
}

/// A snapshot as the source of related rows.
struct SnapshotRowSource: RelatedRowSource {
    let reader: SnapshotReader

    func fetchRelated<R: Entity>(_ descriptor: FetchDescriptor<R>) async throws -> [R] {
        try await self.reader.fetch(descriptor)
    }

    /// On PostgreSQL one query in the snapshot (the targets joined to the join table); else two fetches.
    func fetchRelated<Owner: Entity, Join: Entity, Target: Entity>(
        _ request: ManyToManyFetch<Owner, Join, Target>
    ) async throws -> [(owner: Owner.ID, target: Target)] where Owner.ID: Codable, Target.ID: Codable {
        guard case .postgres(let connection, let schema) = self.reader.source else { return try await self.fetchInTwoSteps(request) }
        return try await request.run(schema: schema, on: connection)
    }
}
