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
