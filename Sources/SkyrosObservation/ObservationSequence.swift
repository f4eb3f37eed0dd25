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
/// for try await result in stack.observe(FetchDescriptor<Ticket>(predicate: #Predicate { $0.open })) {
///     try await socket.send(result.diff)
/// }
/// ```
/// Each iterator is an observation of its own. Iteration ends when the consuming task is cancelled, the stack
/// shuts down, or the consumer runs inside a swift-service-lifecycle service that is shutting down gracefully
/// (an HTTP server's open event streams end, so it can stop); it throws ``ObservationError/storeRebuilt``
/// after `DataStack/destroyAndRebuild(confirm:)`.
public struct ObservationSequence<Element: Sendable>: AsyncSequence, Sendable {
    /// Iteration throws ``ObservationError/storeRebuilt``, or a fetch's error when a re-fetch fails.
    public typealias Failure = any Error

    private let makeDriver: @Sendable () -> any ObservationDriving<Element>

    package init<State: Sendable>(
        registry: ObserverRegistry, tables: Set<String>, row: RowKey?, coalescing: Duration,
        fetch: @escaping @Sendable () async throws -> State, changes: @escaping @Sendable (State?, State) -> Element?
    ) {
        self.makeDriver = {
            ObservationDriver(registry: registry, tables: tables, row: row, coalescing: coalescing, fetch: fetch, changes: changes)
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

/// One observation: registered for its tables' wake-ups while it lives, fetching on demand.
final class ObservationDriver<State: Sendable, Element: Sendable>: ObservationDriving {
    private let registry: ObserverRegistry
    private let id: UUID
    private var signals: AsyncStream<ObserverSignal>.AsyncIterator
    private let coalescing: Duration
    private let fetch: @Sendable () async throws -> State
    private let changes: @Sendable (State?, State) -> Element?
    /// The observed tables, sorted: the refresh span's `skyros.observation.tables`.
    private let tables: [String]
    /// The state behind the last element the consumer received.
    private var last: State?
    private var ended = false

    init(
        registry: ObserverRegistry, tables: Set<String>, row: RowKey?, coalescing: Duration,
        fetch: @escaping @Sendable () async throws -> State, changes: @escaping @Sendable (State?, State) -> Element?
    ) {
        let (id, signals) = registry.register(tables: tables, row: row)
        self.registry = registry
        self.id = id
        self.signals = signals.makeAsyncIterator()
        self.coalescing = coalescing
        self.fetch = fetch
        self.changes = changes
        self.tables = tables.sorted()
    }

    deinit { self.registry.remove(self.id) }

    func next() async throws -> Element? {
        if self.ended { return nil }
        do {
            if self.last == nil {
                let current = try await self.refresh(first: self.last == nil)
                self.last = current
                if let first = self.changes(nil, current) { return first }
            }
            while true {
                // nil: the consuming task was cancelled, the stack shut down, or the service the consumer
                // runs in is shutting down gracefully (a server waits for its open streams: end them).
                let registry = self.registry
                let id = self.id
                let next = await withGracefulShutdownHandler {
                    await self.signals.next()
                } onGracefulShutdown: {
                    registry.remove(id)
                }
                guard let signal = next else { return try self.end(throwing: nil) }
                if case .finished(let error) = signal { return try self.end(throwing: error) }
                if self.coalescing > .zero { try await Task.sleep(for: self.coalescing) }
                let current = try await self.refresh(first: self.last == nil)
                if let element = self.changes(self.last, current) {
                    self.last = current
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
    private func refresh(first: Bool) async throws -> State {
        guard let parent = ServiceContext.current else { return try await Self.retrying(self.fetch) }
        let span = InstrumentationSystem.tracer.startSpan("skyros.observe.refresh", context: parent, ofKind: .internal)
        defer { span.end() }
        if span.isRecording {
            span.attributes["skyros.observation.tables"] = self.tables
            span.attributes["skyros.observation.initial"] = first
        }
        do {
            return try await ServiceContext.withValue(span.context) { try await Self.retrying(self.fetch) }
        } catch {
            span.recordError(error)
            span.setStatus(SpanStatus(code: .error))
            throw error
        }
    }

    private func end(throwing error: (any Error)?) throws -> Element? {
        self.ended = true
        self.registry.remove(self.id)
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
