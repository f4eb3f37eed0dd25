import Foundation
import SkyrosPostgres

extension DataStack {
    /// Observes a query: yields its current result, then a new result with an ordered ``ResultDiff``
    /// whenever a save in this process or another process's commit changes it. Bursts of changes give one
    /// result. The query runs through the main context (queued local writes included).
    ///
    /// ```swift
    /// let open = FetchDescriptor<Ticket>(predicate: #Predicate { $0.status == "open" },
    ///                                    sortBy: [SortDescriptor(\.priority)], fetchLimit: 50)
    /// for try await result in stack.observe(open) {
    ///     try await socket.send(result.diff)            // first: every row inserted
    /// }
    /// ```
    /// The sequence ends when the consuming task is cancelled or the stack shuts down, and throws
    /// ``ObservationError/storeRebuilt`` after ``destroyAndRebuild(confirm:)``, or the query's error.
    public func observe<T: Entity>(_ descriptor: FetchDescriptor<T>) -> AsyncThrowingStream<ObservedResult<T>, any Error> {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return self.observation(tables: [T.tableName]) {
            try await self.mainContext.fetch(descriptor).map { (value: $0, encoded: try encoder.encode($0)) }
        } changes: { (old: [(value: T, encoded: Data)]?, new: [(value: T, encoded: Data)]) in
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
    public func observe<T: Entity>(_ type: T.Type, id: T.ID) -> AsyncThrowingStream<T?, any Error> {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return self.observation(tables: [T.tableName]) {
            try await self.mainContext.object(type, id: id).map { (value: $0, encoded: try encoder.encode($0)) }
        } changes: { (old: (value: T, encoded: Data)??, new: (value: T, encoded: Data)?) -> T?? in
            if let old, old?.encoded == new?.encoded { return nil }
            return .some(new?.value)
        }
    }

    /// The observation loop: fetch, yield, wait for a wake-up, coalesce, fetch again, yield what changed.
    private func observation<State: Sendable, Element: Sendable>(
        tables: Set<String>, fetch: @escaping @Sendable () async throws -> State,
        changes: @escaping @Sendable (State?, State) -> Element?
    ) -> AsyncThrowingStream<Element, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Element.self, throwing: (any Error).self)
        let registry = self.sync.observers
        let (id, signals) = registry.register(tables: tables)
        let coalescing = self.sync.configuration.observerCoalescing
        let task = Task {
            do {
                var last = try await Self.retrying(fetch)
                if let first = changes(nil, last) { continuation.yield(first) }
                for await signal in signals {
                    if case .finished(let error) = signal {
                        continuation.finish(throwing: error)
                        return
                    }
                    if coalescing > .zero { try await Task.sleep(for: coalescing) }
                    let current = try await Self.retrying(fetch)
                    if let element = changes(last, current) {
                        continuation.yield(element)
                        last = current
                    }
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
            registry.remove(id)
        }
        continuation.onTermination = { _ in
            task.cancel()
            registry.remove(id)
        }
        return stream
    }

    /// Retries transient PostgreSQL errors (a reconnecting pool) for up to about five seconds.
    private static func retrying<R>(_ body: () async throws -> R) async throws -> R {
        var attempt = 0
        while true {
            do {
                return try await body()
            } catch let error as PostgresError where error.isTransient && attempt < 50 {
                attempt += 1
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }
}
