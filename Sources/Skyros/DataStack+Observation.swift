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
    ///     try await socket.send(result.diff)            // first: every row inserted
    /// }
    /// ```
    /// The sequence ends when the consuming task is cancelled or the stack shuts down, and throws
    /// `ObservationError/storeRebuilt` after ``destroyAndRebuild(confirm:)``, or the query's error.
    public func observe<T: Entity>(_ descriptor: FetchDescriptor<T>) -> ObservationSequence<ObservedResult<T>> {
        let encoder = Result { try RowEncoder<T>() }
        return self.observation(tables: [T.tableName]) {
            let encoder = try encoder.get()
            try await self.prepareObserved(T.self)
            return try await self.mainContext.fetch(descriptor).map { (value: $0, encoded: try encoder.encode($0)) }
        } changes: { (old: [(value: T, encoded: [PGValue])]?, new: [(value: T, encoded: [PGValue])]) in
            let diff = ResultDiff(from: old ?? [], to: new)
            if old != nil, diff.isEmpty { return nil }
            return ObservedResult(values: new.map(\.value), diff: diff)
        }
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
        return self.observation(tables: [T.tableName], row: try? RowKey(T.self, id: id)) {
            let encoder = try encoder.get()
            try await self.prepareObserved(T.self)
            return try await self.mainContext.object(type, id: id).map { (value: $0, encoded: try encoder.encode($0)) }
        } changes: { (old: (value: T, encoded: [PGValue])??, new: (value: T, encoded: [PGValue])?) -> T?? in
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

    /// An observation of `tables`: `fetch` gives the state, `changes` the element for a new state (`nil`: no
    /// change worth reporting).
    private func observation<State: Sendable, Element: Sendable>(
        tables: Set<String>, row: RowKey? = nil, fetch: @escaping @Sendable () async throws -> State,
        changes: @escaping @Sendable (State?, State) -> Element?
    ) -> ObservationSequence<Element> {
        ObservationSequence(
            registry: self.sync.observers, tables: tables, row: row, coalescing: self.sync.configuration.observerCoalescing,
            fetch: fetch, changes: changes)
    }
}
