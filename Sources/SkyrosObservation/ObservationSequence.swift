import Foundation
import ServiceLifecycle
import Tracing
import SkyrosPostgres
import SkyrosStore
import SkyrosStack

/// The results of an observation (`DataStack/observe(_:)`, `DataStack/observe(_:id:)`), as an
/// `AsyncSequence`: the current result first, then one element per change.
///
/// It is pulled, not pushed: the query re-runs when the consumer asks for the next element and something
/// changed since the last one, and each diff is computed against the last element the consumer received. A
/// slow consumer (a WebSocket behind a slow client) therefore holds one pending wake-up, never a backlog of
/// results: bursts of changes coalesce into one element, and memory stays flat.
///
/// ```swift
/// for try await result in stack.observe(FetchDescriptor<Ticket>(predicate: #Predicate { $0.status == "open" })) {
///     try await websocket.send(result.diff)
/// }
/// ```
/// Each iterator is an observation of its own. Iteration ends when the consuming task is cancelled, the stack
/// shuts down, or the consumer runs inside a swift-service-lifecycle service that is shutting down gracefully
/// (an HTTP server's open event streams end, so it can stop); it throws ``ObservationError/storeRebuilt``
/// after `DataStack/destroyAndRebuild(confirm:)`.
///
/// The query of an observed fetch can change in place, as a Flapjack data source's predicate or an
/// `NSFetchedResultsController`'s fetch request does: ``update(_:)``, after which
/// the next element is the new query's result with the diff from the previous element.
public struct ObservationSequence<Element: Sendable>: AsyncSequence, Sendable {
    /// Iteration throws ``ObservationError/storeRebuilt``, or a fetch's error when a re-fetch fails.
    public typealias Failure = any Error

    private let makeDriver: @Sendable () -> any ObservationDriving<Element>
    /// The ``ObservedQuery`` that ``update(_:)`` replaces (type-erased over the query).
    let query: any Sendable

    /// An observation of `query`: `fetch` gives its state, `changes` the element for a new state against the
    /// last one yielded (`nil`: nothing worth reporting; its flag says the query was updated since then).
    package init<Query: Sendable, State: Sendable>(
        query: ObservedQuery<Query>, row: RowKey?, coalescing: Duration,
        fetch: @escaping @Sendable (Query) async throws -> State,
        changes: @escaping @Sendable (_ last: State?, _ new: State, _ queryUpdated: Bool) -> Element?
    ) {
        self.query = query
        self.makeDriver = {
            ObservationDriver(query: query, row: row, coalescing: coalescing, fetch: fetch, changes: changes)
        }
    }

    /// Starts a new observation: its first element is the current state, the next ones follow the commits.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(driver: self.makeDriver()) }

    /// Yields the elements of one observation.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let driver: any ObservationDriving<Element>

        /// The next state that differs from the last one yielded, or `nil` once the observation ended (cancellation,
        /// shutdown or graceful shutdown).
        public mutating func next() async throws -> Element? { try await self.driver.next() }
    }
}

/// The iterator's engine, type-erased over the observed state.
protocol ObservationDriving<Element>: AnyObject {
    associatedtype Element
    func next() async throws -> Element?
}

/// One observation: registered for its query's tables' wake-ups while it lives, fetching on demand.
///
/// A query ``ObservedQuery/update(_:tables:)`` replaced wakes it: the next fetch runs the new query. A fetch
/// that an update overtook is discarded (the update's wake-up is pending, so the next turn runs the new query),
/// so that once `update` returned, the next element is the new query's; every element's diff is taken against
/// the last element yielded, so it replays whatever ran in between.
final class ObservationDriver<Query: Sendable, State: Sendable, Element: Sendable>: ObservationDriving {
    private let query: ObservedQuery<Query>
    private let id: UUID
    private var signals: AsyncStream<ObserverSignal>.AsyncIterator
    private let coalescing: Duration
    private let fetch: @Sendable (Query) async throws -> State
    private let changes: @Sendable (State?, State, Bool) -> Element?
    /// The state behind the last element the consumer received.
    private var last: State?
    /// The query generation behind ``last``.
    private var lastGeneration: UInt64 = 0
    private var ended = false

    init(
        query: ObservedQuery<Query>, row: RowKey?, coalescing: Duration,
        fetch: @escaping @Sendable (Query) async throws -> State,
        changes: @escaping @Sendable (State?, State, Bool) -> Element?
    ) {
        let (id, signals) = query.register(row: row)
        self.query = query
        self.id = id
        self.signals = signals.makeAsyncIterator()
        self.coalescing = coalescing
        self.fetch = fetch
        self.changes = changes
    }

    deinit { self.query.remove(self.id) }

    func next() async throws -> Element? {
        if self.ended { return nil }
        do {
            while self.last == nil {
                let (query, generation) = self.query.current
                let current = try await self.refresh(query, first: true)
                guard self.query.generation == generation else { continue }     // updated meanwhile: run the new one
                self.last = current
                self.lastGeneration = generation
                if let first = self.changes(nil, current, false) { return first }
            }
            while true {
                // nil: the consuming task was cancelled, the stack shut down, or the service the consumer
                // runs in is shutting down gracefully (a server waits for its open streams: end them).
                let observed = self.query
                let id = self.id
                let next = await withGracefulShutdownHandler {
                    await self.signals.next()
                } onGracefulShutdown: {
                    observed.remove(id)
                }
                guard let signal = next else { return try self.end(throwing: nil) }
                if case .finished(let error) = signal { return try self.end(throwing: error) }
                if self.coalescing > .zero { try await Task.sleep(for: self.coalescing) }
                let (query, generation) = self.query.current
                let current = try await self.refresh(query, first: false)
                // Updated while it ran: the update's wake-up is pending, and the next turn runs the new query.
                guard self.query.generation == generation else { continue }
                if let element = self.changes(self.last, current, generation != self.lastGeneration) {
                    self.last = current
                    self.lastGeneration = generation
                    return element
                }
            }
        } catch {
            _ = try? self.end(throwing: nil)
            throw error
        }
    }

    /// Fetches the observed state, in a `skyros.observe.refresh` span when the consuming task is traced (an
    /// SSE handler under its request's span, say): its statements are that span's children.
    private func refresh(_ query: Query, first: Bool) async throws -> State {
        let fetch = self.fetch
        guard let parent = ServiceContext.current else { return try await Self.retrying { try await fetch(query) } }
        let span = InstrumentationSystem.tracer.startSpan("skyros.observe.refresh", context: parent, ofKind: .internal)
        defer { span.end() }
        if span.isRecording {
            span.attributes["skyros.observation.tables"] = (self.query.registry.tables(of: self.id) ?? []).sorted()
            span.attributes["skyros.observation.initial"] = first
        }
        do {
            return try await ServiceContext.withValue(span.context) { try await Self.retrying { try await fetch(query) } }
        } catch {
            span.recordError(error)
            span.setStatus(SpanStatus(code: .error))
            throw error
        }
    }

    private func end(throwing error: (any Error)?) throws -> Element? {
        self.ended = true
        self.query.remove(self.id)
        if let error { throw error }
        return nil
    }

    /// Retries transient PostgreSQL errors (a reconnecting pool) for up to about five seconds.
    private static func retrying<R>(_ body: () async throws -> R) async throws -> R {
        let started = ContinuousClock.now
        var attempt = 0
        while true {
            do {
                return try await body()
            } catch let error as PGError where error.isTransient && observationFetchRetries.allowsRetry(elapsed: ContinuousClock.now - started) {
                attempt += 1
                try await Task.sleep(for: observationFetchRetries.delay(afterAttempt: attempt))
            }
        }
    }
}

/// The retries of an observation's fetch: every 100 ms (no backoff: the pool reconnects by itself), for 5 s.
private let observationFetchRetries = RetryPolicy(
    initialDelay: .milliseconds(100), multiplier: 1, maximumDelay: .milliseconds(100), budget: .seconds(5))

/// An element of an observed query — ``ObservedResult`` or ``SectionedResult`` — whose observation
/// (``ObservationSequence``) can change its query with ``ObservationSequence/update(_:)``.
public protocol ObservedFetchResult: Sendable {
    /// The entity the query fetches.
    associatedtype Fetched: Entity
}

extension ObservationSequence where Element: ObservedFetchResult {
    /// Replaces the observed query — predicate, sort, window — as a Flapjack data source's `predicate` and
    /// `sortDescriptors`, or an `NSFetchedResultsController`'s `fetchRequest` before `performFetch()`, change.
    ///
    /// Every observation of this sequence (each iterator, and those made later) runs the new query: its next
    /// element is the new query's result (yielded even when the rows are the same), with the ordered diff from
    /// the previous element, so the consumer's rows go from the old query's result to the new one without a
    /// reload. Changes committed while the query changes are not lost: each element's diff is taken against the
    /// last element yielded, and a change made after `update` returns wakes the observation for the tables the
    /// new query reads. An update made while a fetch of the old query runs discards that fetch.
    ///
    /// ```swift
    /// let tickets = stack.observe(FetchDescriptor<Ticket>(sortBy: [SortDescriptor(\.priority)]))
    /// Task {                                            // on the client's "open tickets only", say
    ///     tickets.update(FetchDescriptor(predicate: #Predicate { $0.status == "open" },
    ///                                    sortBy: [SortDescriptor(\.priority)]))
    /// }
    /// var rows: [Ticket] = []
    /// for try await result in tickets {
    ///     rows = result.diff.applied(to: rows)          // == result.values; after the update, open tickets
    /// }
    /// ```
    /// - Parameter descriptor: the new query, of the same entity. A sectioned observation keeps its section
    ///   key path.
    public func update(_ descriptor: FetchDescriptor<Element.Fetched>) {
        guard let query = self.query as? ObservedQuery<FetchDescriptor<Element.Fetched>> else { return }
        query.update(descriptor, tables: descriptor.observedTables)
    }
}

extension FetchDescriptor {
    /// The tables whose changes may change this query's result: its entity's (predicates and sorts read the
    /// entity's own columns), those its predicate reads through references, and those of the relationships it
    /// prefetches.
    package var observedTables: Set<String> {
        Set([T.tableName] + self.predicateReferencedTypes.map { $0.tableName } + self.prefetchedTypes.map { $0.tableName })
    }
}
