import Foundation
import SkyrosPostgres
import SkyrosStore
import SkyrosStack
import SkyrosObservation
import SkyrosSync

extension DataStack {
    /// Observes a query: yields its current result, then a new result with an ordered `ResultDiff`
    /// whenever a save in this process or another process's commit changes it. Bursts of changes give one
    /// result. The query runs through the main context (queued local writes included), when the consumer asks
    /// for the next result (see `ObservationSequence`: a slow consumer never builds a backlog).
    ///
    /// ```swift
    /// let open = FetchDescriptor<Ticket>(predicate: #Predicate { $0.status == "open" },
    ///                                    sortBy: [SortDescriptor(\.priority)], fetchLimit: 50)
    /// for try await result in stack.observe(open) {
    ///     try await websocket.send(result.diff)         // first: every row inserted
    /// }
    /// ```
    /// The sequence ends when the consuming task is cancelled or the stack shuts down, and throws
    /// `ObservationError/storeRebuilt` after ``destroyAndRebuild(confirm:)``, or the query's error.
    /// `ObservationSequence/update(_:)` changes its query in place: the next result is the new query's, with
    /// the diff from the previous one.
    public func observe<T: Entity>(_ descriptor: FetchDescriptor<T>) -> ObservationSequence<ObservedResult<T>> {
        self.observation(of: descriptor) { $0 } changes: { old, new, queryUpdated in
            let diff = ResultDiff(from: old ?? [], to: new)
            if old != nil, diff.isEmpty, !queryUpdated { return nil }
            return ObservedResult(values: new.map(\.value), diff: diff)
        }
    }

    /// Observes a query grouped into sections by a key path, as `NSFetchedResultsController` with a
    /// `sectionNameKeyPath` does: yields the current sections, then new sections with a
    /// `SectionedResultDiff` (sections inserted, deleted and moved; rows inserted, deleted, moved — within a
    /// section or, when a row's section key changed, between sections — and updated) whenever a save in this
    /// process or another process's commit changes them, as ``observe(_:)`` does.
    ///
    /// Sections come in the order of their first row in the query's order (any `Hashable` key works, and no
    /// row is left out); each keeps its rows in that order. Sort by the section key first, as
    /// `NSFetchedResultsController` requires, to get sections ordered by key. `fetchLimit` and `fetchOffset`
    /// window the rows before they are grouped.
    ///
    /// ```swift
    /// let board = stack.observe(
    ///     FetchDescriptor<Ticket>(sortBy: [SortDescriptor(\.status), SortDescriptor(\.priority, order: .reverse)]),
    ///     sectionedBy: \.status)
    /// var columns: [ResultSection<Ticket, String>] = []
    /// for try await result in board {
    ///     columns = result.diff.applied(to: columns)    // == result.sections
    ///     for move in result.diff.moved where move.from.section != move.to.section {
    ///         print("\(move.value.title) is now \(move.value.status)")
    ///     }
    /// }
    /// ```
    /// `ObservationSequence/update(_:)` changes the query (the key path stays).
    /// - Parameters:
    ///   - descriptor: the query.
    ///   - keyPath: the property whose value names a row's section.
    public func observe<T: Entity, Key: Hashable & Sendable>(
        _ descriptor: FetchDescriptor<T>, sectionedBy keyPath: any KeyPath<T, Key> & Sendable
    ) -> ObservationSequence<SectionedResult<T, Key>> {
        self.observation(of: descriptor) { rows in
            SectionedResultDiff<T, Key>.sections(of: rows, by: keyPath)
        } changes: { old, new, queryUpdated in
            let diff = SectionedResultDiff(from: old ?? [], to: new)
            if old != nil, diff.isEmpty, !queryUpdated { return nil }
            return SectionedResult(sections: new.map { ResultSection(key: $0.key, values: $0.rows.map(\.value)) }, diff: diff)
        }
    }

    /// Observes a query with the relationships it prefetches: yields its rows with their related rows
    /// (``PrefetchedResults``, as `fetchWithRelationships` gives them), then again whenever a save in this
    /// process or another process's commit changes the rows or any related row: a comment psql inserts moves the
    /// observation of "tickets with their comments". The queries run through the main context, one per
    /// relationship, when the consumer asks for the next result; a commit to a related table that changes
    /// nothing this result holds (a comment on another ticket) yields nothing.
    ///
    /// ```swift
    /// var tickets = FetchDescriptor<Ticket>(predicate: #Predicate { $0.status == "open" })
    /// tickets.prefetchPaths = [PrefetchPath(\.comments, then: [PrefetchPath(\.author)])]
    /// for try await open in stack.observeWithRelationships(tickets) {
    ///     for ticket in open { print(ticket.title, try open.related(\.comments, of: ticket).count) }
    /// }
    /// ```
    /// - Parameter descriptor: the rows, and in `FetchDescriptor/prefetchPaths` the relationships.
    /// - Returns: the results, each time they change.
    public func observeWithRelationships<T: Entity>(_ descriptor: FetchDescriptor<T>) -> ObservationSequence<PrefetchedResults<T>> {
        let query = ObservedQuery(descriptor, tables: descriptor.observedTables, registry: self.sync.observers)
        let fetch: @Sendable (FetchDescriptor<T>) async throws -> (results: PrefetchedResults<T>, fingerprint: [String]) = { descriptor in
            try await self.prepareObserved(T.self)
            for type in descriptor.predicateReferencedTypes { try await self.prepareObserved(type) }
            for type in descriptor.prefetchedTypes { try await self.prepareObserved(type) }
            let results = try await self.mainContext.fetchWithRelationships(descriptor)
            return (results, try results.fingerprint())
        }
        return ObservationSequence(query: query, row: nil, coalescing: self.sync.configuration.observerCoalescing, fetch: fetch) {
            last, new, queryUpdated in
            if let last, last.fingerprint == new.fingerprint, !queryUpdated { return nil }
            return new.results
        }
    }

    /// An observation of a query whose rows `shape` turns into the observed state, which `changes` compares.
    private func observation<T: Entity, State: Sendable, Element: Sendable>(
        of descriptor: FetchDescriptor<T>, shape: @escaping @Sendable ([(value: T, encoded: [PGValue])]) -> State,
        changes: @escaping @Sendable (State?, State, Bool) -> Element?
    ) -> ObservationSequence<Element> {
        let encoder = Result { try RowEncoder<T>() }
        let query = ObservedQuery(descriptor, tables: descriptor.observedTables, registry: self.sync.observers)
        let coalescing = self.sync.configuration.observerCoalescing
        let fetch: @Sendable (FetchDescriptor<T>) async throws -> State = { descriptor in
            let encoder = try encoder.get()
            try await self.prepareObserved(T.self)
            for type in descriptor.predicateReferencedTypes { try await self.prepareObserved(type) }
            return shape(try await self.mainContext.fetch(descriptor).map { (value: $0, encoded: try encoder.encode($0)) })
        }
        return ObservationSequence(query: query, row: nil, coalescing: coalescing, fetch: fetch, changes: changes)
    }

    /// Observes one row: yields it (or `nil` when it does not exist), then again whenever it changes or is
    /// deleted (`nil`), by a save in this process or another process's commit.
    ///
    /// ```swift
    /// for try await order in stack.observe(Order.self, id: orderID) {
    ///     guard let order else { print("deleted"); break }
    ///     print(order.status)
    /// }
    /// ```
    public func observe<T: Entity>(_ type: T.Type, id: T.ID) -> ObservationSequence<T?> {
        let encoder = Result { try RowEncoder<T>() }
        let query = ObservedQuery(id, tables: [T.tableName], registry: self.sync.observers)
        return ObservationSequence(
            query: query, row: try? RowKey(T.self, id: id), coalescing: self.sync.configuration.observerCoalescing
        ) { id in
            let encoder = try encoder.get()
            try await self.prepareObserved(T.self)
            return try await self.mainContext.object(type, id: id).map { (value: $0, encoded: try encoder.encode($0)) }
        } changes: { (old: (value: T, encoded: [PGValue])??, new: (value: T, encoded: [PGValue])?, _) -> T?? in
            if let old, old?.encoded == new?.encoded { return nil }
            return .some(new?.value)
        }
    }

    /// Makes an observed entity's table as good as one listed in ``DataStackConfiguration/entities``: checked
    /// against the live schema and captured, so that every writer's changes reach the observer, before its first
    /// result. Once per table; later calls only look the table up.
    /// - Throws: ``SchemaMismatchError`` when the entity does not match its table, or the capture's error.
    func prepareObserved<T: Entity>(_ type: T.Type) async throws {
        guard !self.sync.tablesNeedingPreparation([T.tableName]).isEmpty else { return }
        try await self.postgresStore?.validate([type])
        try await self.sync.prepare(tables: [T.tableName])
    }
}

extension PrefetchedResults: ObservedFetchResult {
    /// The entity the observed query fetches: `ObservationSequence/update(_:)` takes a new descriptor of it
    /// (its prefetch paths included).
    public typealias Fetched = T
}
