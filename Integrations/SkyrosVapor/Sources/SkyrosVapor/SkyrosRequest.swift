import Logging
import Skyros
import Vapor

extension Request {
    /// The application's data stack, for this request: reads and writes whose failures are logged with the
    /// request's logger (and so its `request-id`).
    ///
    /// ```swift
    /// app.post("tickets") { req -> Ticket in
    ///     let ticket = Ticket(id: UUID(), title: try req.content.decode(NewTicket.self).title)
    ///     try await req.skyros.write(durability: .committed) { try $0.insert(ticket) }
    ///     return ticket
    /// }
    /// ```
    public var skyros: SkyrosRequest { SkyrosRequest(request: self) }
}

/// `req.skyros`: the application's ``DataStack`` seen from a request handler. It is a ``DataStackProtocol``,
/// so code written against the protocol takes it as it is.
///
/// Writes go through ``DataStack/write(durability:mergePolicy:logger:_:)`` with the request's logger: a
/// queued write that fails to commit after the handler returned is logged at `error` there, with the
/// request's `request-id`. A read or write that throws here is also logged at `debug` with the request's
/// logger. The stack's own records (start-up, the change feed, shutdown) stay with the stack's logger.
public struct SkyrosRequest: DataStackProtocol {
    let request: Request

    /// The application's stack (``SkyrosApplication/stack``).
    public var stack: DataStack { self.request.application.skyros.stack }

    /// The request's logger.
    public var logger: Logger { self.request.logger }

    public var mainContext: DataContext { self.stack.mainContext }

    public func newBackgroundContext() -> DataContext { self.stack.newBackgroundContext() }

    /// ``DataStack/read(_:)``.
    ///
    /// ```swift
    /// let ticket = try await req.skyros.read { try await $0.object(Ticket.self, id: id) }
    /// ```
    public func read<R>(_ body: (DataContext) async throws -> R) async throws -> R {
        try await self.logged("read") { try await self.stack.read(body) }
    }

    /// ``DataStack/write(durability:_:)``.
    ///
    /// ```swift
    /// try await req.skyros.write(durability: .committed) { try $0.insert(ticket) }
    /// ```
    @discardableResult
    public func write<R>(durability: WriteDurability, _ body: (DataContext) async throws -> R) async throws -> R {
        try await self.logged("write") { try await self.stack.write(durability: durability, logger: self.request.logger, body) }
    }

    /// ``DataStack/write(_:)``: the stack's default durability (``DataStackConfiguration/defaultDurability``).
    ///
    /// ```swift
    /// try await req.skyros.write { try $0.insert(ticket) }   // returns once every reader sees it
    /// ```
    @discardableResult
    public func write<R>(_ body: (DataContext) async throws -> R) async throws -> R {
        try await self.logged("write") { try await self.stack.write(logger: self.request.logger, body) }
    }

    /// ``DataStack/write(_:completion:)``. The completion may run after the request ended.
    public func write<R: Sendable>(
        _ body: @escaping @Sendable (DataContext) async throws -> R,
        completion: @escaping @Sendable (Result<R, any Error>) -> Void
    ) {
        self.stack.write(body, completion: completion)
    }

    /// ``DataStack/write(durability:mergePolicy:_:)`` with the request's logger.
    ///
    /// ```swift
    /// try await req.skyros.write(durability: .committed, mergePolicy: .mergeByProperty) { try await $0.update(ticket) }
    /// ```
    @discardableResult
    public func write<R>(
        durability: WriteDurability?, mergePolicy: MergePolicy, _ body: (DataContext) async throws -> R
    ) async throws -> R {
        try await self.logged("write") {
            try await self.stack.write(durability: durability, mergePolicy: mergePolicy, logger: self.request.logger, body)
        }
    }

    /// ``DataStack/write(durability:mergePolicy:logger:_:)``: `logger` instead of the request's.
    @discardableResult
    public func write<R>(
        durability: WriteDurability?, mergePolicy: MergePolicy?, logger: Logger, _ body: (DataContext) async throws -> R
    ) async throws -> R {
        try await self.logged("write") {
            try await self.stack.write(durability: durability, mergePolicy: mergePolicy, logger: logger, body)
        }
    }

    /// ``DataStack/write(durability:deadline:mergePolicy:logger:_:)``, with the request's logger unless `logger`
    /// names another.
    ///
    /// ```swift
    /// try await req.skyros.write(durability: .committed, deadline: .now + .seconds(2)) { try $0.insert(ticket) }
    /// ```
    @discardableResult
    public func write<R>(
        durability: WriteDurability?, deadline: ContinuousClock.Instant, mergePolicy: MergePolicy?, logger: Logger?,
        _ body: (DataContext) async throws -> R
    ) async throws -> R {
        try await self.logged("write") {
            try await self.stack.write(
                durability: durability, deadline: deadline, mergePolicy: mergePolicy, logger: logger ?? self.request.logger, body)
        }
    }

    /// ``DataStack/observe(_:)``.
    public func observe<T: Entity>(_ descriptor: FetchDescriptor<T>) -> ObservationSequence<ObservedResult<T>> {
        self.stack.observe(descriptor)
    }

    /// ``DataStack/observe(_:id:)``.
    public func observe<T: Entity>(_ type: T.Type, id: T.ID) -> ObservationSequence<T?> {
        self.stack.observe(type, id: id)
    }

    /// ``DataStack/observeWithRelationships(_:)``.
    public func observeWithRelationships<T: Entity>(_ descriptor: FetchDescriptor<T>) -> ObservationSequence<PrefetchedResults<T>> {
        self.stack.observeWithRelationships(descriptor)
    }

    /// ``DataStack/readSnapshot(from:_:)``.
    public func readSnapshot<R>(from source: SnapshotSource, _ body: (SnapshotReader) async throws -> R) async throws -> R {
        try await self.logged("read") { try await self.stack.readSnapshot(from: source, body) }
    }

    /// ``DataStack/findOrCreate(_:)``.
    ///
    /// ```swift
    /// let (ticket, created) = try await req.skyros.findOrCreate(Ticket(id: id, title: "New"))
    /// ```
    public func findOrCreate<T: Entity>(_ value: T) async throws -> (value: T, created: Bool) {
        try await self.logged("write") { try await self.stack.findOrCreate(value) }
    }

    /// ``DataStack/transaction(isolation:maxAttempts:_:)``.
    ///
    /// ```swift
    /// let open = try await req.skyros.transaction(isolation: .repeatableRead, maxAttempts: 3) { tx in
    ///     try await tx.fetch(FetchDescriptor<Ticket>()).count
    /// }
    /// ```
    @discardableResult
    public func transaction<R>(
        isolation: IsolationLevel, maxAttempts: Int, _ body: (DataTransaction) async throws -> R
    ) async throws -> R {
        try await self.logged("transaction") { try await self.stack.transaction(isolation: isolation, maxAttempts: maxAttempts, body) }
    }

    /// ``DataStack/fetch(_:sql:)-(T.Type,_)``: a statement written by hand, into entities.
    public func fetch<T: Entity>(_ type: T.Type, sql: PGQuery) async throws -> [T] {
        try await self.logged("read") { try await self.stack.fetch(type, sql: sql) }
    }

    /// ``DataStack/fetch(_:sql:keyStrategy:)``: a statement written by hand, into any `Decodable`.
    public func fetch<T: Decodable>(_ type: T.Type, sql: PGQuery, keyStrategy: ColumnKeyStrategy) async throws -> [T] {
        try await self.logged("read") { try await self.stack.fetch(type, sql: sql, keyStrategy: keyStrategy) }
    }

    /// ``DataStack/errors``: the application's stack's failed commits.
    public var errors: AsyncStream<DataStackError> { self.stack.errors }

    /// ``DataStack/shutdown()`` of the application's stack (the application's lifecycle does this on its own).
    public func shutdown() async { await self.stack.shutdown() }

    /// Runs `body`; an error it throws is logged at `debug` with the request's logger, then rethrown.
    private func logged<R>(
        _ operation: String, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> R
    ) async throws -> R {
        do {
            return try await body()
        } catch {
            // Skyros's errors never hold a password or a refused value (ColumnValueError names the column only).
            self.request.logger.debug("skyros \(operation) failed", metadata: ["skyros.error": "\(error)"])
            throw error
        }
    }
}
