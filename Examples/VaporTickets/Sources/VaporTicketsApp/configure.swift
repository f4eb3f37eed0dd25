import Foundation
import Skyros
import SkyrosVapor
import Vapor

/// Where the service's data lives and what it runs: read from the environment by the executable, given
/// directly by the tests.
public struct TicketsSettings: Sendable {
    /// The PostgreSQL URL (`DATABASE_URL`).
    public var databaseURL: String
    /// The schema the tables live in (`SCHEMA`); `nil`: the connection's `search_path`.
    public var schema: String?
    /// The migrations directory (`MIGRATIONS`, default `migrations`).
    public var migrations: String
    /// How long shutdown waits for queued writes to commit (`DRAIN_SECONDS`, default 20 s).
    public var drainDeadline: Duration
    /// How long a write may wait for PostgreSQL before the request answers 503 (`WRITE_TIMEOUT_MS`, default
    /// 2 s): `DataStackConfiguration.writeTimeout`.
    public var writeTimeout: Duration

    public init(
        databaseURL: String, schema: String? = nil, migrations: String = "migrations", drainDeadline: Duration = .seconds(20),
        writeTimeout: Duration = .seconds(2)
    ) {
        self.databaseURL = databaseURL
        self.schema = schema
        self.migrations = migrations
        self.drainDeadline = drainDeadline
        self.writeTimeout = writeTimeout
    }
}

/// Registers the stack, the error mapping and the routes on `app`. The stack starts when the application
/// boots (`execute()`, or `asyncBoot()` in tests) and drains when it shuts down.
public func configure(_ app: Application, _ settings: TicketsSettings) throws {
    var configuration = DataStackConfiguration(
        store: .postgres(try PGConfiguration(url: settings.databaseURL), schema: settings.schema),
        migrations: .directory(path: settings.migrations), entities: [Ticket.self, Person.self, Comment.self])
    // Within the 30 s grace period Kubernetes and docker give after SIGTERM.
    configuration.commitQueue.shutdownTimeout = settings.drainDeadline
    // A write waits at most this long (503 past it, while the queue keeps retrying what it accepted): while
    // PostgreSQL is down a request answers in time instead of waiting out the queue's retry budget.
    configuration.writeTimeout = settings.writeTimeout
    app.skyros.configure(configuration)

    // A larger body answers 413 (with the JSON error body) before it is decoded.
    app.routes.defaultMaxBodySize = "16kb"
    app.middleware.use(ErrorResponses())
    // Ready once the stack started (migrated and validated); 503 before and while it drains.
    app.get("health") { req -> Response in
        Response(status: req.application.skyros.runningStack == nil ? .serviceUnavailable : .ok)
    }
    try app.register(collection: TicketController())
}
