import Logging
import Skyros
import SkyrosPostgres

/// A `DataStackProtocol` for tests: it wraps a real stack (usually an in-memory one, see
/// ``inMemory(_:logger:)``) and passes every call through, except where the test told it to fail or to take its
/// time. Give it to the code under test where production gives a `DataStack`.
///
/// ```swift
/// let stack = try await DataStackDouble.inMemory(DataStackConfiguration(store: .inMemory, entities: [Author.self]))
/// stack.fail(.write, with: DataStackError(code: .storeUnreachable, message: "simulated outage"))
/// do {
///     try await stack.write { try $0.insert(Author(id: UUID(), name: "Ada")) }
/// } catch let error as DataStackError where error.code == .storeUnreachable {
///     // the code under test answers 503 here
/// }
/// stack.succeed(.write)
/// precondition(stack.calls(.write) == 1)
/// await stack.shutdown()
/// ```
///
/// Contexts (``mainContext``, ``newBackgroundContext()``) and observations always come from the wrapped
/// stack: a `DataContext` is made only by a stack. ``errors`` is the double's own stream: the test sends into it
/// with ``send(_:)``; the wrapped stack's commit failures are not forwarded.
///
/// ## Topics
/// - ``init(wrapping:)``
/// - ``inMemory(_:logger:)``
/// - ``Operation``
/// - ``fail(_:with:)``
/// - ``delay(_:by:)``
/// - ``succeed(_:)``
/// - ``calls(_:)``
/// - ``send(_:)``
/// - ``isShutDown``
public final class DataStackDouble: DataStackProtocol {
    /// The calls a test can make fail or slow down.
    ///
    /// ```swift
    /// stack.delay(.read, by: .milliseconds(200))
    /// ```
    public enum Operation: Sendable, Hashable, CaseIterable {
        /// ``DataStackDouble/read(_:)``.
        case read
        /// Every `write` overload, the completion-handler one included.
        case write
        /// ``DataStackDouble/readSnapshot(from:_:)``.
        case readSnapshot
        /// ``DataStackDouble/findOrCreate(_:)``.
        case findOrCreate
        /// ``DataStackDouble/transaction(isolation:maxAttempts:_:)``.
        case transaction
        /// Both `fetch(_:sql:)` forms: a statement written by hand.
        case sql
    }

    private struct State {
        var failures: [Operation: any Error] = [:]
        var delays: [Operation: Duration] = [:]
        var calls: [Operation: Int] = [:]
        var isShutDown = false
    }

    /// The stack every call goes to.
    public let wrapped: any DataStackProtocol
    private let state = Locked(State())
    /// The double's own error stream (see ``send(_:)``).
    public let errors: AsyncStream<DataStackError>
    private let errorContinuation: AsyncStream<DataStackError>.Continuation

    /// A double that passes every call to `stack`.
    ///
    /// ```swift
    /// let double = DataStackDouble(wrapping: try await DataStack.start(DataStackConfiguration(store: .inMemory)))
    /// ```
    /// - Parameter stack: the stack the calls go to.
    public init(wrapping stack: any DataStackProtocol) {
        self.wrapped = stack
        let (errors, continuation) = AsyncStream.makeStream(of: DataStackError.self, bufferingPolicy: .bufferingNewest(256))
        self.errors = errors
        self.errorContinuation = continuation
    }

    /// A double over a new in-memory stack with `configuration`'s entities and settings (its store replaced by
    /// `DataStackConfiguration/StoreLocation/inMemory`).
    ///
    /// ```swift
    /// let stack = try await DataStackDouble.inMemory(DataStackConfiguration(store: .inMemory, entities: [Author.self]))
    /// ```
    /// - Parameters:
    ///   - configuration: the app's configuration.
    ///   - logger: the wrapped stack's logger.
    /// - Returns: the double.
    /// - Throws: the errors of `DataStack/start(_:logger:)`.
    public static func inMemory(
        _ configuration: DataStackConfiguration = DataStackConfiguration(store: .inMemory),
        logger: Logger = TestDatabase.noOpLogger
    ) async throws -> DataStackDouble {
        var configuration = configuration
        configuration.store = .inMemory
        return DataStackDouble(wrapping: try await DataStack.start(configuration, logger: logger))
    }

    // MARK: What the test sets

    /// Makes every later call of `operation` throw `error` (before anything runs: a failed write saves
    /// nothing), until ``succeed(_:)``.
    ///
    /// ```swift
    /// stack.fail(.readSnapshot, with: DataStackError(code: .storeUnreachable, message: "replica down"))
    /// ```
    /// - Parameters:
    ///   - operation: the calls that fail.
    ///   - error: what they throw.
    public func fail(_ operation: Operation, with error: any Error) {
        self.state.withLock { $0.failures[operation] = error }
    }

    /// Makes every later call of `operation` wait `duration` before it runs (or fails), until ``succeed(_:)``.
    /// A cancelled caller stops waiting and gets `CancellationError`.
    ///
    /// ```swift
    /// stack.delay(.write, by: .seconds(1))    // a slow database: does the handler's deadline hold?
    /// ```
    /// - Parameters:
    ///   - operation: the calls that wait.
    ///   - duration: how long.
    public func delay(_ operation: Operation, by duration: Duration) {
        self.state.withLock { $0.delays[operation] = duration }
    }

    /// Ends the failure and delay of `operation`: its calls go straight to the wrapped stack again.
    ///
    /// ```swift
    /// stack.succeed(.write)
    /// ```
    /// - Parameter operation: the calls.
    public func succeed(_ operation: Operation) {
        self.state.withLock {
            $0.failures[operation] = nil
            $0.delays[operation] = nil
        }
    }

    /// How many calls of `operation` were made, failed ones included.
    ///
    /// ```swift
    /// let writes = stack.calls(.write)
    /// ```
    /// - Parameter operation: the calls.
    /// - Returns: their number.
    public func calls(_ operation: Operation) -> Int {
        self.state.withLock { $0.calls[operation, default: 0] }
    }

    /// Yields `error` on ``errors``, as a stack does when a queued write fails to commit.
    ///
    /// ```swift
    /// stack.send(DataStackError(code: .storeUnreachable, message: "commit failed"))
    /// ```
    /// - Parameter error: the commit failure.
    public func send(_ error: DataStackError) {
        self.errorContinuation.yield(error)
    }

    /// Whether ``shutdown()`` was called.
    public var isShutDown: Bool { self.state.withLock { $0.isShutDown } }

    /// Counts a call of `operation`, waits its delay, and throws its failure.
    private func enter(_ operation: Operation) async throws {
        let (delay, failure) = self.state.withLock { state in
            state.calls[operation, default: 0] += 1
            return (state.delays[operation], state.failures[operation])
        }
        if let delay { try await Task.sleep(for: delay) }
        if let failure { throw failure }
    }

    // MARK: DataStackProtocol

    /// The wrapped stack's main context.
    public var mainContext: DataContext { self.wrapped.mainContext }

    /// A new background context of the wrapped stack.
    public func newBackgroundContext() -> DataContext { self.wrapped.newBackgroundContext() }

    /// The wrapped stack's read, after the ``Operation/read`` delay and failure.
    public func read<R>(_ body: (DataContext) async throws -> R) async throws -> R {
        try await self.enter(.read)
        return try await self.wrapped.read(body)
    }

    /// The wrapped stack's write, after the ``Operation/write`` delay and failure.
    @discardableResult
    public func write<R>(durability: WriteDurability, _ body: (DataContext) async throws -> R) async throws -> R {
        try await self.enter(.write)
        return try await self.wrapped.write(durability: durability, body)
    }

    /// The wrapped stack's write with its default durability, after the ``Operation/write`` delay and failure.
    @discardableResult
    public func write<R>(_ body: (DataContext) async throws -> R) async throws -> R {
        try await self.enter(.write)
        return try await self.wrapped.write(body)
    }

    /// The wrapped stack's write, after the ``Operation/write`` delay and failure.
    @discardableResult
    public func write<R>(
        durability: WriteDurability?, mergePolicy: MergePolicy, _ body: (DataContext) async throws -> R
    ) async throws -> R {
        try await self.enter(.write)
        return try await self.wrapped.write(durability: durability, mergePolicy: mergePolicy, body)
    }

    /// The wrapped stack's write, after the ``Operation/write`` delay and failure.
    @discardableResult
    public func write<R>(
        durability: WriteDurability?, mergePolicy: MergePolicy?, logger: Logger, _ body: (DataContext) async throws -> R
    ) async throws -> R {
        try await self.enter(.write)
        return try await self.wrapped.write(durability: durability, mergePolicy: mergePolicy, logger: logger, body)
    }

    /// The wrapped stack's write, after the ``Operation/write`` delay and failure.
    @discardableResult
    public func write<R>(
        durability: WriteDurability?, deadline: ContinuousClock.Instant, mergePolicy: MergePolicy?, logger: Logger?,
        _ body: (DataContext) async throws -> R
    ) async throws -> R {
        try await self.enter(.write)
        return try await self.wrapped.write(
            durability: durability, deadline: deadline, mergePolicy: mergePolicy, logger: logger, body)
    }

    /// The wrapped stack's write; with an ``Operation/write`` failure, `completion` gets it (after the delay)
    /// and nothing is written.
    public func write<R: Sendable>(
        _ body: @escaping @Sendable (DataContext) async throws -> R,
        completion: @escaping @Sendable (Result<R, any Error>) -> Void
    ) {
        let failure = self.state.withLock { state -> (any Error)? in
            state.calls[.write, default: 0] += 1
            return state.failures[.write]
        }
        guard let failure else { return self.wrapped.write(body, completion: completion) }
        completion(.failure(failure))
    }

    /// The wrapped stack's observation of `descriptor`.
    public func observe<T: Entity>(_ descriptor: FetchDescriptor<T>) -> ObservationSequence<ObservedResult<T>> {
        self.wrapped.observe(descriptor)
    }

    /// The wrapped stack's observation of one row.
    public func observe<T: Entity>(_ type: T.Type, id: T.ID) -> ObservationSequence<T?> {
        self.wrapped.observe(type, id: id)
    }

    /// The wrapped stack's observation of a query with its relationships.
    public func observeWithRelationships<T: Entity>(_ descriptor: FetchDescriptor<T>) -> ObservationSequence<PrefetchedResults<T>> {
        self.wrapped.observeWithRelationships(descriptor)
    }

    /// The wrapped stack's snapshot read, after the ``Operation/readSnapshot`` delay and failure.
    public func readSnapshot<R>(from source: SnapshotSource, _ body: (SnapshotReader) async throws -> R) async throws -> R {
        try await self.enter(.readSnapshot)
        return try await self.wrapped.readSnapshot(from: source, body)
    }

    /// The wrapped stack's `findOrCreate`, after the ``Operation/findOrCreate`` delay and failure.
    public func findOrCreate<T: Entity>(_ value: T) async throws -> (value: T, created: Bool) {
        try await self.enter(.findOrCreate)
        return try await self.wrapped.findOrCreate(value)
    }

    /// The wrapped stack's transaction, after the ``Operation/transaction`` delay and failure (an in-memory
    /// stack refuses it with `DataStackError` `.unsupportedByStore`).
    @discardableResult
    public func transaction<R>(
        isolation: IsolationLevel, maxAttempts: Int, _ body: (DataTransaction) async throws -> R
    ) async throws -> R {
        try await self.enter(.transaction)
        return try await self.wrapped.transaction(isolation: isolation, maxAttempts: maxAttempts, body)
    }

    /// The wrapped stack's raw SQL fetch into entities, after the ``Operation/sql`` delay and failure.
    public func fetch<T: Entity>(_ type: T.Type, sql: PGQuery) async throws -> [T] {
        try await self.enter(.sql)
        return try await self.wrapped.fetch(type, sql: sql)
    }

    /// The wrapped stack's raw SQL fetch into any `Decodable`, after the ``Operation/sql`` delay and failure.
    public func fetch<T: Decodable>(_ type: T.Type, sql: PGQuery, keyStrategy: ColumnKeyStrategy) async throws -> [T] {
        try await self.enter(.sql)
        return try await self.wrapped.fetch(type, sql: sql, keyStrategy: keyStrategy)
    }

    /// Shuts the wrapped stack down and finishes ``errors``.
    public func shutdown() async {
        self.state.withLock { $0.isShutDown = true }
        await self.wrapped.shutdown()
        self.errorContinuation.finish()
    }
}
