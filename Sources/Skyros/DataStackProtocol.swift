import Logging
import SkyrosStore
import SkyrosStack
import SkyrosObservation
import SkyrosSync

/// The public surface of a ``DataStack``: what an app's code calls, so that it can depend on the protocol and
/// a test can hand it a double (SkyrosTesting's `DataStackDouble`) or a ``DataStack`` over
/// ``DataStackConfiguration/StoreLocation/inMemory``.
///
/// ```swift
/// struct BookService {
///     let stack: any DataStackProtocol
///     func add(_ book: Book) async throws {
///         try await stack.write { try $0.insert(book) }
///     }
///     func titles() async throws -> [String] {
///         try await stack.read { try await $0.fetch(FetchDescriptor<Book>()) }.map(\.title)
///     }
/// }
/// let service = BookService(stack: try await DataStack.start(DataStackConfiguration(store: .inMemory)))
/// ```
///
/// ## Writing a double
///
/// A `DataContext` is made only by a stack, so a conformance of your own cannot create one. A double
/// therefore wraps a real stack, usually an in-memory one, hands out its contexts, and adds what the test
/// needs around each call: a failure, a delay, a count.
///
/// ```swift
/// final class FailingWrites: DataStackProtocol {
///     let wrapped: DataStack                         // DataStack.start(DataStackConfiguration(store: .inMemory))
///     init(wrapping stack: DataStack) { self.wrapped = stack }
///
///     var mainContext: DataContext { wrapped.mainContext }
///     func newBackgroundContext() -> DataContext { wrapped.newBackgroundContext() }
///     func read<R>(_ body: (DataContext) async throws -> R) async throws -> R { try await wrapped.read(body) }
///     func write<R>(durability: WriteDurability, _ body: (DataContext) async throws -> R) async throws -> R {
///         throw DataStackError(code: .storeUnreachable, message: "simulated outage")
///     }
///     func write<R>(durability: WriteDurability?, mergePolicy: MergePolicy, _ body: (DataContext) async throws -> R) async throws -> R {
///         throw DataStackError(code: .storeUnreachable, message: "simulated outage")
///     }
///     func write<R>(
///         durability: WriteDurability?, mergePolicy: MergePolicy?, logger: Logger, _ body: (DataContext) async throws -> R
///     ) async throws -> R {
///         throw DataStackError(code: .storeUnreachable, message: "simulated outage")
///     }
///     func write<R>(
///         durability: WriteDurability?, deadline: ContinuousClock.Instant, mergePolicy: MergePolicy?, logger: Logger?,
///         _ body: (DataContext) async throws -> R
///     ) async throws -> R {
///         throw DataStackError(code: .storeUnreachable, message: "simulated outage")
///     }
///     func write<R: Sendable>(
///         _ body: @escaping @Sendable (DataContext) async throws -> R,
///         completion: @escaping @Sendable (Result<R, any Error>) -> Void
///     ) {
///         completion(.failure(DataStackError(code: .storeUnreachable, message: "simulated outage")))
///     }
///     func observe<T: Entity>(_ descriptor: FetchDescriptor<T>) -> ObservationSequence<ObservedResult<T>> {
///         wrapped.observe(descriptor)
///     }
///     func observe<T: Entity>(_ type: T.Type, id: T.ID) -> ObservationSequence<T?> { wrapped.observe(type, id: id) }
///     func observeWithRelationships<T: Entity>(_ descriptor: FetchDescriptor<T>) -> ObservationSequence<PrefetchedResults<T>> {
///         wrapped.observeWithRelationships(descriptor)
///     }
///     func readSnapshot<R>(from source: SnapshotSource, _ body: (SnapshotReader) async throws -> R) async throws -> R {
///         try await wrapped.readSnapshot(from: source, body)
///     }
///     func findOrCreate<T: Entity>(_ value: T) async throws -> (value: T, created: Bool) {
///         throw DataStackError(code: .storeUnreachable, message: "simulated outage")
///     }
///     func transaction<R>(
///         isolation: IsolationLevel, maxAttempts: Int, _ body: (DataTransaction) async throws -> R
///     ) async throws -> R {
///         try await wrapped.transaction(isolation: isolation, maxAttempts: maxAttempts, body)
///     }
///     func fetch<T: Entity>(_ type: T.Type, sql: PGQuery) async throws -> [T] { try await wrapped.fetch(type, sql: sql) }
///     func fetch<T: Decodable>(_ type: T.Type, sql: PGQuery, keyStrategy: ColumnKeyStrategy) async throws -> [T] {
///         try await wrapped.fetch(type, sql: sql, keyStrategy: keyStrategy)
///     }
///     var errors: AsyncStream<DataStackError> { wrapped.errors }
///     func shutdown() async { await wrapped.shutdown() }
/// }
/// ```
///
/// SkyrosTesting's `DataStackDouble` is such a wrapper, with failures and delays a test sets while it runs.
///
/// ## Topics
/// - ``mainContext``
/// - ``newBackgroundContext()``
/// - ``read(_:)``
/// - ``write(_:)``
/// - ``write(durability:_:)``
/// - ``write(durability:mergePolicy:_:)``
/// - ``write(durability:mergePolicy:logger:_:)``
/// - ``write(durability:deadline:mergePolicy:logger:_:)``
/// - ``write(_:completion:)``
/// - ``observe(_:)``
/// - ``observe(_:id:)``
/// - ``readSnapshot(from:_:)``
/// - ``errors``
/// - ``shutdown()``
public protocol DataStackProtocol: Sendable {
    /// The context readers share; reads by id are served from its cache (see ``DataStack/mainContext``).
    ///
    /// ```swift
    /// func cachedAuthor(_ stack: some DataStackProtocol, id: UUID) async throws -> Author? {
    ///     try await stack.mainContext.object(Author.self, id: id)
    /// }
    /// ```
    var mainContext: DataContext { get }

    /// A new context whose saves go straight to the commit queue (a sibling of the main context; see
    /// ``DataStack/newBackgroundContext()``).
    ///
    /// ```swift
    /// func importAuthors(_ stack: some DataStackProtocol, names: [String]) async throws {
    ///     let context = stack.newBackgroundContext()
    ///     for name in names { try context.insert(Author(id: UUID(), name: name)) }
    ///     try context.save()
    /// }
    /// ```
    func newBackgroundContext() -> DataContext

    /// Runs `body` against the main context and returns its value (see ``DataStack/read(_:)``).
    ///
    /// ```swift
    /// func bookCount(_ stack: some DataStackProtocol) async throws -> Int {
    ///     try await stack.read { try await $0.count(FetchDescriptor<Book>()) }
    /// }
    /// ```
    /// - Parameter body: the reads.
    /// - Returns: the body's value.
    /// - Throws: the body's error.
    func read<R>(_ body: (DataContext) async throws -> R) async throws -> R

    /// Runs `body` on a new context and saves its changes atomically (see ``DataStack/write(durability:_:)``).
    ///
    /// ```swift
    /// func add(_ book: Book, to stack: some DataStackProtocol) async throws {
    ///     try await stack.write(durability: .committed) { try $0.insert(book) }
    /// }
    /// ```
    /// - Parameters:
    ///   - durability: `.visible` returns once every reader in the process sees the change, `.committed` after
    ///     the commit.
    ///   - body: the changes.
    /// - Returns: the body's value.
    /// - Throws: the body's error; with `.committed`, the commit's error.
    @discardableResult
    func write<R>(durability: WriteDurability, _ body: (DataContext) async throws -> R) async throws -> R

    /// Runs `body` on a new context and saves its changes atomically, with the stack's default durability
    /// (see ``DataStack/write(_:)``).
    ///
    /// ```swift
    /// func add(_ book: Book, to stack: some DataStackProtocol) async throws {
    ///     try await stack.write { try $0.insert(book) }
    /// }
    /// ```
    /// - Parameter body: the changes.
    /// - Returns: the body's value.
    /// - Throws: the body's error (and with a `.committed` default, the commit's).
    @discardableResult
    func write<R>(_ body: (DataContext) async throws -> R) async throws -> R

    /// ``write(durability:_:)`` with a merge policy for this write's version conflicts (see
    /// ``DataStack/write(durability:mergePolicy:_:)``).
    ///
    /// ```swift
    /// func rename(_ author: Author, in stack: some DataStackProtocol) async throws {
    ///     try await stack.write(durability: .committed, mergePolicy: .mergeByProperty) { try await $0.update(author) }
    /// }
    /// ```
    /// - Parameters:
    ///   - durability: the durability; the stack's default when `nil`.
    ///   - mergePolicy: this write's merge policy.
    ///   - body: the changes.
    /// - Returns: the body's value.
    /// - Throws: the body's error; with `.committed`, the commit's error.
    @discardableResult
    func write<R>(
        durability: WriteDurability?, mergePolicy: MergePolicy, _ body: (DataContext) async throws -> R
    ) async throws -> R

    /// ``write(durability:_:)`` whose own log records go to `logger` (see
    /// ``DataStack/write(durability:mergePolicy:logger:_:)``).
    ///
    /// ```swift
    /// func add(_ book: Book, to stack: some DataStackProtocol, requestLogger: Logger) async throws {
    ///     try await stack.write(logger: requestLogger) { try $0.insert(book) }
    /// }
    /// ```
    /// - Parameters:
    ///   - durability: the durability; the stack's default when `nil`.
    ///   - mergePolicy: this write's merge policy; the stack's when `nil`.
    ///   - logger: where this write's records go.
    ///   - body: the changes.
    /// - Returns: the body's value.
    /// - Throws: the body's error; with `.committed`, the commit's error.
    @discardableResult
    func write<R>(
        durability: WriteDurability?, mergePolicy: MergePolicy?, logger: Logger, _ body: (DataContext) async throws -> R
    ) async throws -> R

    /// ``write(durability:_:)`` that ends by `deadline` (see ``DataStack/write(durability:deadline:mergePolicy:logger:_:)``).
    ///
    /// ```swift
    /// func add(_ book: Book, to stack: some DataStackProtocol) async throws {
    ///     try await stack.write(durability: .committed, deadline: .now + .seconds(2)) { try $0.insert(book) }
    /// }
    /// ```
    /// - Parameters:
    ///   - durability: the durability; the stack's default when `nil`.
    ///   - deadline: when the write must have ended.
    ///   - mergePolicy: this write's merge policy; the stack's when `nil`.
    ///   - logger: where this write's records go; the stack's logger when `nil`.
    ///   - body: the changes.
    /// - Returns: the body's value.
    /// - Throws: `DataStackError` `.deadlineExceeded` or `.writeCancelled`, the body's error, the commit's error.
    @discardableResult
    func write<R>(
        durability: WriteDurability?, deadline: ContinuousClock.Instant, mergePolicy: MergePolicy?, logger: Logger?,
        _ body: (DataContext) async throws -> R
    ) async throws -> R

    /// Runs `body` on a new context, saves it, and calls `completion` exactly once with the value or the error,
    /// after the commit (see ``DataStack/write(_:completion:)``).
    ///
    /// ```swift
    /// func add(_ book: Book, to stack: some DataStackProtocol) {
    ///     stack.write({ context in try context.insert(book) }, completion: { _ in })
    /// }
    /// ```
    /// - Parameters:
    ///   - body: the changes.
    ///   - completion: called once, with the body's value after the commit or with the error.
    func write<R: Sendable>(
        _ body: @escaping @Sendable (DataContext) async throws -> R,
        completion: @escaping @Sendable (Result<R, any Error>) -> Void)

    /// Observes a query: its current result, then each change of it (see ``DataStack/observe(_:)``).
    ///
    /// ```swift
    /// func watchBooks(_ stack: some DataStackProtocol) async throws {
    ///     for try await result in stack.observe(FetchDescriptor<Book>()) {
    ///         _ = result.values.count
    ///     }
    /// }
    /// ```
    /// - Parameter descriptor: the query.
    /// - Returns: the results, each with its diff from the one before.
    func observe<T: Entity>(_ descriptor: FetchDescriptor<T>) -> ObservationSequence<ObservedResult<T>>

    /// Observes one row: it (or `nil`), then again each time it changes or is deleted (see
    /// ``DataStack/observe(_:id:)``).
    ///
    /// ```swift
    /// func watchAuthor(_ stack: some DataStackProtocol, id: UUID) async throws {
    ///     for try await author in stack.observe(Author.self, id: id) {
    ///         _ = author?.name
    ///     }
    /// }
    /// ```
    /// - Parameters:
    ///   - type: the entity.
    ///   - id: the row's primary key.
    /// - Returns: the row's states.
    func observe<T: Entity>(_ type: T.Type, id: T.ID) -> ObservationSequence<T?>

    /// Observes a query with the relationships it prefetches (see ``DataStack/observeWithRelationships(_:)``).
    ///
    /// ```swift
    /// func watchAuthors(_ stack: some DataStackProtocol) async throws {
    ///     for try await authors in stack.observeWithRelationships(
    ///         FetchDescriptor<Author>(relationshipKeyPathsForPrefetching: [\.books])) {
    ///         print(authors.count)
    ///     }
    /// }
    /// ```
    /// - Parameter descriptor: the rows, and the relationships to prefetch with them.
    /// - Returns: the results, each time they change.
    func observeWithRelationships<T: Entity>(_ descriptor: FetchDescriptor<T>) -> ObservationSequence<PrefetchedResults<T>>

    /// Runs several reads against one consistent snapshot (see ``DataStack/readSnapshot(from:_:)``).
    ///
    /// ```swift
    /// func report(_ stack: some DataStackProtocol) async throws -> (Int, Int) {
    ///     try await stack.readSnapshot(from: .primary) { reader in
    ///         (try await reader.count(FetchDescriptor<Author>()), try await reader.count(FetchDescriptor<Book>()))
    ///     }
    /// }
    /// ```
    /// - Parameters:
    ///   - source: the primary, or the read replica once it has caught up.
    ///   - body: the reads.
    /// - Returns: the body's value.
    /// - Throws: the body's error, `PGError`.
    func readSnapshot<R>(from source: SnapshotSource, _ body: (SnapshotReader) async throws -> R) async throws -> R

    /// Returns the row with `value`'s primary key, creating it with `value` when there is none, at once and
    /// race-free across processes (see ``DataStack/findOrCreate(_:)``).
    ///
    /// ```swift
    /// func author(named name: String, in stack: some DataStackProtocol) async throws -> Author {
    ///     try await stack.findOrCreate(Author(id: UUID(), name: name)).value
    /// }
    /// ```
    /// - Parameter value: the row to create when none has its primary key.
    /// - Returns: the stored row and whether this call created it.
    /// - Throws: `PGError`, `DataStackError`.
    func findOrCreate<T: Entity>(_ value: T) async throws -> (value: T, created: Bool)

    /// Runs `body` in one interactive PostgreSQL transaction, with row locks (see
    /// ``DataStack/transaction(isolation:maxAttempts:_:)``).
    ///
    /// ```swift
    /// func claim(_ stack: some DataStackProtocol) async throws -> Ticket? {
    ///     try await stack.transaction(isolation: .readCommitted, maxAttempts: 1) { tx in
    ///         try await tx.fetch(FetchDescriptor<Ticket>(fetchLimit: 1), lock: .forUpdate(skipLocked: true)).first
    ///     }
    /// }
    /// ```
    /// - Parameters:
    ///   - isolation: the transaction's isolation level.
    ///   - maxAttempts: how many times to run `body` in all after serialization failures and deadlocks.
    ///   - body: the transaction's work.
    /// - Returns: `body`'s value, after `COMMIT`.
    /// - Throws: `body`'s error, `PGError`, `DataStackError` `.unsupportedByStore` on the in-memory store.
    func transaction<R>(
        isolation: IsolationLevel, maxAttempts: Int, _ body: (DataTransaction) async throws -> R
    ) async throws -> R

    /// Runs a statement written by hand and decodes its rows into entities, caching the rows that carry a
    /// version (see ``DataStack/fetch(_:sql:)-(T.Type,_)``).
    ///
    /// ```swift
    /// func latest(_ stack: some DataStackProtocol) async throws -> [Ticket] {
    ///     try await stack.fetch(Ticket.self, sql: "SELECT * FROM tickets ORDER BY title DESC LIMIT 10")
    /// }
    /// ```
    /// - Parameters:
    ///   - type: the entity each row decodes into.
    ///   - sql: the statement; interpolated values are bound as parameters.
    /// - Returns: the rows.
    /// - Throws: `EntityMappingError`, `PGError`, `DataStackError` `.unsupportedByStore` on the in-memory store.
    func fetch<T: Entity>(_ type: T.Type, sql: PGQuery) async throws -> [T]

    /// Runs a statement written by hand and decodes its rows into any `Decodable` (see
    /// ``DataStack/fetch(_:sql:keyStrategy:)``).
    ///
    /// ```swift
    /// func ticketCount(_ stack: some DataStackProtocol) async throws -> Int {
    ///     try await stack.fetch(Int.self, sql: "SELECT count(*) FROM tickets", keyStrategy: .useCodingKeys).first ?? 0
    /// }
    /// ```
    /// - Parameters:
    ///   - type: the type each row decodes into.
    ///   - sql: the statement; interpolated values are bound as parameters.
    ///   - keyStrategy: how a key names its column.
    /// - Returns: the rows.
    /// - Throws: `EntityMappingError`, `PGError`, `DataStackError` `.unsupportedByStore` on the in-memory store.
    func fetch<T: Decodable>(_ type: T.Type, sql: PGQuery, keyStrategy: ColumnKeyStrategy) async throws -> [T]

    /// Commit failures of queued (non-durable) writes, as they happen (see ``DataStack/errors``).
    ///
    /// ```swift
    /// func logCommitFailures(_ stack: some DataStackProtocol, logger: Logger) async {
    ///     for await error in stack.errors { logger.error("commit failed: \(error)") }
    /// }
    /// ```
    var errors: AsyncStream<DataStackError> { get }

    /// Drains the commit queue, stops the stack's background work and closes its connections (see
    /// ``DataStack/shutdown()``).
    ///
    /// ```swift
    /// func stop(_ stack: some DataStackProtocol) async {
    ///     await stack.shutdown()
    /// }
    /// ```
    func shutdown() async
}

extension DataStackProtocol {
    /// ``transaction(isolation:maxAttempts:_:)`` at `READ COMMITTED`, run once.
    ///
    /// ```swift
    /// func close(_ id: UUID, in stack: some DataStackProtocol) async throws {
    ///     try await stack.transaction { tx in
    ///         guard var ticket = try await tx.object(Ticket.self, id: id, lock: .forUpdate) else { return }
    ///         ticket.title += " (closed)"
    ///         try await tx.update(ticket)
    ///     }
    /// }
    /// ```
    @discardableResult
    public func transaction<R>(_ body: (DataTransaction) async throws -> R) async throws -> R {
        try await self.transaction(isolation: .readCommitted, maxAttempts: 1, body)
    }

    /// ``fetch(_:sql:keyStrategy:)`` with keys naming their columns as they are.
    ///
    /// ```swift
    /// func total(_ stack: some DataStackProtocol) async throws -> Int {
    ///     try await stack.fetch(Int.self, sql: "SELECT count(*) FROM tickets").first ?? 0
    /// }
    /// ```
    public func fetch<T: Decodable>(_ type: T.Type, sql: PGQuery) async throws -> [T] {
        try await self.fetch(type, sql: sql, keyStrategy: .useCodingKeys)
    }

    /// Runs `body` on a new context and returns once every reader in the process sees its changes (the default
    /// for a conformance without a default durability of its own).
    ///
    /// ```swift
    /// func add(_ book: Book, to stack: some DataStackProtocol) async throws {
    ///     try await stack.write { try $0.insert(book) }
    /// }
    /// ```
    /// - Parameter body: the changes.
    /// - Returns: the body's value.
    /// - Throws: the body's error.
    @discardableResult
    public func write<R>(_ body: (DataContext) async throws -> R) async throws -> R {
        try await self.write(durability: .visible, body)
    }

    /// ``write(durability:mergePolicy:_:)`` with the stack's default durability.
    ///
    /// ```swift
    /// func rename(_ author: Author, in stack: any DataStackProtocol) async throws {
    ///     try await stack.write(mergePolicy: .mergeByProperty) { try await $0.update(author) }
    /// }
    /// ```
    /// - Parameters:
    ///   - mergePolicy: this write's merge policy.
    ///   - body: the changes.
    /// - Returns: the body's value.
    /// - Throws: the body's error.
    @discardableResult
    public func write<R>(mergePolicy: MergePolicy, _ body: (DataContext) async throws -> R) async throws -> R {
        try await self.write(durability: nil, mergePolicy: mergePolicy, body)
    }

    /// ``write(durability:mergePolicy:logger:_:)`` with the stack's default durability and merge policy.
    ///
    /// ```swift
    /// func add(_ book: Book, to stack: any DataStackProtocol, requestLogger: Logger) async throws {
    ///     try await stack.write(logger: requestLogger) { try $0.insert(book) }
    /// }
    /// ```
    /// - Parameters:
    ///   - durability: the durability; the stack's default when `nil`.
    ///   - logger: where this write's records go.
    ///   - body: the changes.
    /// - Returns: the body's value.
    /// - Throws: the body's error.
    @discardableResult
    public func write<R>(
        durability: WriteDurability? = nil, logger: Logger, _ body: (DataContext) async throws -> R
    ) async throws -> R {
        try await self.write(durability: durability, mergePolicy: nil, logger: logger, body)
    }

    /// ``write(durability:deadline:mergePolicy:logger:_:)`` with the stack's merge policy and logger.
    ///
    /// ```swift
    /// func add(_ book: Book, to stack: any DataStackProtocol) async throws {
    ///     try await stack.write(deadline: .now + .seconds(2)) { try $0.insert(book) }
    /// }
    /// ```
    /// - Parameters:
    ///   - durability: the durability; the stack's default when `nil`.
    ///   - deadline: when the write must have ended.
    ///   - body: the changes.
    /// - Returns: the body's value.
    /// - Throws: `DataStackError` `.deadlineExceeded` or `.writeCancelled`, the body's error, the commit's error.
    @discardableResult
    public func write<R>(
        durability: WriteDurability? = nil, deadline: ContinuousClock.Instant, _ body: (DataContext) async throws -> R
    ) async throws -> R {
        try await self.write(durability: durability, deadline: deadline, mergePolicy: nil, logger: nil, body)
    }

    /// ``readSnapshot(from:_:)`` on the primary.
    ///
    /// ```swift
    /// func authorCount(_ stack: any DataStackProtocol) async throws -> Int {
    ///     try await stack.readSnapshot { try await $0.count(FetchDescriptor<Author>()) }
    /// }
    /// ```
    /// - Parameter body: the reads.
    /// - Returns: the body's value.
    /// - Throws: the body's error, `PGError`.
    public func readSnapshot<R>(_ body: (SnapshotReader) async throws -> R) async throws -> R {
        try await self.readSnapshot(from: .primary, body)
    }
}
