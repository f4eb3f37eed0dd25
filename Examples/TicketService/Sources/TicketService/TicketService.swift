import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Skyros
import SkyrosPostgres

/// Runs the ticket API on a Skyros stack. Start several instances on different ports against one database:
/// each one's `/tickets/stream` shows the others' changes. Settings come from the environment (``Settings``).
///
///     DATABASE_URL=postgres://… PORT=8080 swift run TicketService
///
/// The server listens at once; the stack starts behind it (`/health` answers 503 `starting` meanwhile). On
/// SIGTERM or SIGINT: `/health` answers 503 `draining` (for `DRAIN_SECONDS`), the server stops (open event
/// streams end), then the stack commits what is queued and closes its pool; exit status 0.
@main
struct TicketService {
    /// Exits with status 1 (after logging why) when the stack cannot start or the server stops on an error, and
    /// with 2 when a setting is missing or invalid: an error thrown out of `main` would trap instead.
    static func main() async {
        let logger = { () -> Logger in
            var logger = Logger(label: "ticket-service")
            logger.logLevel = .info
            return logger
        }()
        let settings: Settings
        let postgres: PGConfiguration
        do {
            settings = try Settings(environment: ProcessInfo.processInfo.environment)
            postgres = try PGConfiguration(url: settings.databaseURL)
        } catch {
            // Skyros's URL errors never hold the password (nor a piece of a malformed URL's).
            logger.critical("invalid setting", metadata: ["error": "\(error)"])
            exit(2)
        }

        // Without `MIGRATE_AT_START` the schema is someone else's job (a `migrate` step once per deploy): the
        // stack still checks the entities against the live schema, so a missing migration fails the start.
        var configuration = DataStackConfiguration(
            store: .postgres(postgres, schema: settings.schema),
            migrations: settings.migrateAtStart ? .directory(path: settings.migrations) : nil, entities: [Ticket.self, Person.self, Comment.self])
        configuration.waitForDatabase = settings.databaseWait
        // A write waits at most this long (503 past it, while the queue keeps retrying what it accepted): while
        // PostgreSQL is down a request answers in time instead of waiting out the queue's retry budget.
        configuration.writeTimeout = settings.writeTimeout
        logger.info(
            "starting",
            metadata: [
                "host": "\(settings.host)", "port": "\(settings.port)", "migrate_at_start": "\(settings.migrateAtStart)",
                "sse_heartbeat": "\(settings.heartbeat)", "drain": "\(settings.drain)", "write_timeout": "\(settings.writeTimeout)",
            ])

        let lifecycle = Lifecycle()
        let feed = TicketFeed()
        let router = Router(context: TicketsContext.self)
        router.add(middleware: RequestLogging())
        router.add(middleware: ErrorResponses())
        TicketRoutes(lifecycle: lifecycle, feed: feed, heartbeat: settings.heartbeat).register(on: router)
        let app = Application(
            router: router, configuration: .init(address: .hostname(settings.host, port: settings.port)),
            onServerRunning: { channel in
                logger.info("listening", metadata: ["address": "\(channel.localAddress.map { "\($0)" } ?? "?")"])
            },
            logger: logger)
        // On SIGTERM a group stops its services in reverse order: the drain gate (health turns 503, then the
        // delay), the server (no new requests; open event streams end), then the stack (its queue commits).
        let group = ServiceGroup(
            configuration: .init(
                services: [
                    StackService(configuration: configuration, lifecycle: lifecycle, feed: feed, logger: logger),
                    app,
                    DrainGate(lifecycle: lifecycle, delay: settings.drain, logger: logger),
                ],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch {
            logger.critical("the service stopped on an error", metadata: ["error": "\(error)"])
            exit(1)
        }
        logger.info("stopped")
    }
}
