import Logging
import ServiceLifecycle
import Skyros
import Synchronization
import Vapor

extension Application {
    /// The application's Skyros data stack: configure it once, before the application boots.
    ///
    /// ```swift
    /// let app = try await Application.make(.detect())
    /// app.skyros.configure(DataStackConfiguration(
    ///     store: .postgres(try PGConfiguration(url: Environment.get("DATABASE_URL")!)),
    ///     migrations: .directory(path: "migrations"),
    ///     entities: [Ticket.self]))
    /// app.get("tickets") { req in try await req.skyros.read { try await $0.fetch(Ticket.open) } }
    /// try await app.execute()          // boots: starts the stack; serves; on SIGTERM drains the queue
    /// try await app.asyncShutdown()
    /// ```
    public var skyros: SkyrosApplication { SkyrosApplication(application: self) }
}

/// `app.skyros`: configures the application's ``DataStack`` and gives it out once the application booted.
///
/// ``configure(_:)`` registers a ``SkyrosLifecycle`` handler. It starts the stack when the application boots
/// (`Application.asyncBoot()`, which `execute()` calls), waiting for PostgreSQL up to
/// ``DataStackConfiguration/waitForDatabase``, and runs the stack's background work (``DataStack/run()``)
/// until `Application.asyncShutdown()`. There, after the HTTP server stopped taking requests, it commits what
/// is still queued, waiting at most ``CommitQueueConfiguration/shutdownTimeout`` (`nil`: until everything
/// committed), and closes the pool.
public struct SkyrosApplication: Sendable {
    let application: Application

    struct Key: StorageKey {
        typealias Value = SkyrosLifecycle
    }

    /// Sets up the stack once: it starts when the application boots and drains when it shuts down.
    ///
    /// ```swift
    /// var configuration = DataStackConfiguration(
    ///     store: .postgres(try PGConfiguration(url: url)), entities: [Ticket.self])
    /// configuration.commitQueue.shutdownTimeout = .seconds(20)   // within Kubernetes' 30 s grace period
    /// app.skyros.configure(configuration)
    /// ```
    /// - Parameters:
    ///   - configuration: the stack's configuration, as for ``DataStack/start(_:logger:)``.
    ///   - logger: the stack's logger; the application's logger when `nil`.
    /// - Precondition: called once, before the application boots.
    public func configure(_ configuration: DataStackConfiguration, logger: Logger? = nil) {
        precondition(self.application.storage[Key.self] == nil, "app.skyros.configure(_:) is called once")
        let lifecycle = SkyrosLifecycle(configuration: configuration, logger: logger ?? self.application.logger)
        self.application.storage[Key.self] = lifecycle
        self.application.lifecycle.use(lifecycle)
    }

    /// The running stack.
    ///
    /// ```swift
    /// let open = try await app.skyros.stack.read { try await $0.fetch(Ticket.open) }
    /// ```
    /// - Precondition: ``configure(_:)`` was called and the application booted (`asyncBoot()` or
    ///   `execute()`), and has not shut down. A route is only called in between.
    public var stack: DataStack {
        guard let lifecycle = self.application.storage[Key.self] else {
            fatalError("app.skyros.stack: call app.skyros.configure(_:) before the application boots")
        }
        guard let stack = lifecycle.stack else {
            fatalError("app.skyros.stack: the stack starts when the application boots (asyncBoot() or execute())")
        }
        return stack
    }

    /// The stack when it runs: `nil` before boot, after shutdown, or when ``configure(_:)`` was not called.
    /// A health check answers 503 while this is `nil`.
    public var runningStack: DataStack? { self.application.storage[Key.self]?.stack }
}

/// Starts a ``DataStack`` when a Vapor application boots and drains it when the application shuts down.
/// ``SkyrosApplication/configure(_:logger:)`` registers it; there is nothing to call on it.
///
/// Vapor does not run swift-service-lifecycle services, so the handler runs the stack in a `ServiceGroup` of
/// its own (without signal handlers: Vapor's `serve` command handles SIGTERM and SIGINT) and triggers its
/// graceful shutdown from `shutdownAsync`. ``DataStack/run()`` then drains the commit queue with
/// ``CommitQueueConfiguration/shutdownTimeout`` and logs the ``ShutdownReport`` when writes were left.
///
/// The application must boot and shut down through the async entry points (`Application.make`,
/// `execute()` or `asyncBoot()`, `asyncShutdown()`): the synchronous `boot()` cannot wait for the database
/// and throws ``SkyrosVaporError/synchronousBoot``. In tests, call `try await app.asyncBoot()` before
/// `app.testing()` (which boots synchronously, and does nothing once booted).
public final class SkyrosLifecycle: LifecycleHandler, Sendable {
    private struct Running: Sendable {
        var stack: DataStack
        var group: ServiceGroup
        var task: Task<Void, any Error>
    }

    private let configuration: DataStackConfiguration
    private let logger: Logger
    private let running = Mutex<Running?>(nil)

    init(configuration: DataStackConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// The stack, from boot until shutdown.
    var stack: DataStack? { self.running.withLock { $0?.stack } }

    /// Throws ``SkyrosVaporError/synchronousBoot``: the synchronous `Application.boot()` (which
    /// `app.testing()` calls when the application has not booted) cannot wait for the database.
    ///
    /// ```swift
    /// try await app.asyncBoot()               // starts the stack
    /// try await app.testing().test(.GET, "tickets") { res in #expect(res.status == .ok) }
    /// ```
    public func willBoot(_ application: Application) throws {
        throw SkyrosVaporError.synchronousBoot
    }

    /// Does nothing: `willBootAsync` has no synchronous fallback here (see ``willBoot(_:)``).
    public func willBootAsync(_ application: Application) async throws {}

    /// Starts the stack (waiting for the database, migrating, validating), then runs its background work
    /// until shutdown. Throws ``DataStackError`` when the stack cannot start; the application does not serve.
    public func didBootAsync(_ application: Application) async throws {
        let stack = try await DataStack.start(self.configuration, logger: self.logger)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(services: [stack], logger: self.logger))
        let task = Task { try await group.run() }
        self.running.withLock { $0 = Running(stack: stack, group: group, task: task) }
    }

    /// Stops the HTTP server, then commits what is queued (at most ``CommitQueueConfiguration/shutdownTimeout``),
    /// stops the stack's background work and closes its pool.
    ///
    /// Vapor runs lifecycle handlers before it stops its server, so this stops it first (`Server.shutdown()`:
    /// no new connection, requests in flight finish): no write arrives while the queue drains.
    public func shutdownAsync(_ application: Application) async {
        guard let running = self.running.withLock({ $0 }) else { return }
        await application.server.shutdown()
        self.logger.info("committing the data stack's queued writes before shutdown")
        await running.group.triggerGracefulShutdown()
        do {
            try await running.task.value
            self.logger.info("data stack stopped")
        } catch {
            self.logger.error("the data stack stopped on an error", metadata: ["error": "\(error)"])
        }
        self.running.withLock { $0 = nil }
    }

    /// The synchronous `Application.shutdown()` cannot wait for the queue: it logs what it leaves undone.
    public func shutdown(_ application: Application) {
        guard self.running.withLock({ $0 }) != nil else { return }
        self.logger.error(
            "Application.shutdown() cannot drain the data stack's commit queue; use asyncShutdown()")
    }
}

/// Misuse of the Vapor integration that the types cannot rule out.
public enum SkyrosVaporError: Error, Sendable, CustomStringConvertible {
    /// The application booted through the synchronous `boot()`, which cannot wait for the database.
    case synchronousBoot

    public var description: String {
        switch self {
        case .synchronousBoot:
            "Skyros starts its data stack at boot and needs the async entry points: Application.make(_:), then "
                + "execute() or asyncBoot() (in tests, before app.testing())"
        }
    }
}
