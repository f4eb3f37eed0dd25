import Logging

/// How an app starts its stack, as a value the app is given instead of calling ``DataStack/start(_:logger:)``
/// itself: production passes ``live(_:)``, a test passes a starter that fails or takes its time (SkyrosTesting's
/// `StackStarter.failing(_:)` and `StackStarter.delayed(by:then:)`) or one over an in-memory stack, and the
/// app's start-up path (a health check, a readiness probe, a retry loop) runs unchanged in both.
///
/// ```swift
/// struct App {
///     let starter: StackStarter
///     func boot(logger: Logger) async -> (any DataStackProtocol)? {
///         do {
///             return try await starter.start(logger: logger)
///         } catch let error as DataStackError where error.code == .storeUnreachable {
///             logger.error("database unavailable: \(error)")
///             return nil
///         } catch {
///             return nil
///         }
///     }
/// }
/// let app = App(starter: .live(DataStackConfiguration(store: .inMemory, entities: [Author.self])))
/// ```
///
/// ## Topics
/// - ``init(_:)``
/// - ``live(_:)``
/// - ``start(logger:)``
public struct StackStarter: Sendable {
    private let body: @Sendable (Logger) async throws -> any DataStackProtocol

    /// A starter that runs `start`.
    ///
    /// ```swift
    /// let starter = StackStarter { logger in
    ///     try await DataStack.start(DataStackConfiguration(store: .inMemory), logger: logger)
    /// }
    /// ```
    /// - Parameter start: starts a stack, given the logger ``start(logger:)`` was called with.
    public init(_ start: @escaping @Sendable (Logger) async throws -> any DataStackProtocol) {
        self.body = start
    }

    /// The real thing: ``DataStack/start(_:logger:)`` with `configuration`.
    ///
    /// ```swift
    /// let starter = StackStarter.live(DataStackConfiguration(store: .postgres(try PGConfiguration(url: url))))
    /// ```
    /// - Parameter configuration: the stack's configuration.
    /// - Returns: a starter that opens a ``DataStack``.
    public static func live(_ configuration: DataStackConfiguration) -> StackStarter {
        StackStarter { logger in try await DataStack.start(configuration, logger: logger) }
    }

    /// Starts a stack.
    ///
    /// ```swift
    /// let stack = try await StackStarter.live(DataStackConfiguration(store: .inMemory)).start()
    /// ```
    /// - Parameter logger: the stack's logger; a no-op logger by default.
    /// - Returns: the started stack.
    /// - Throws: what the start throws: for ``live(_:)``, the errors of ``DataStack/start(_:logger:)``.
    public func start(
        logger: Logger = Logger(label: "skyros.stack", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws -> any DataStackProtocol {
        try await self.body(logger)
    }
}
