import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Skyros
import SkyrosPostgres

/// Runs the ticket API on a Skyros stack. Start several instances on different ports against one database:
/// each one's `/tickets/stream` shows the others' changes.
///
///     DATABASE_URL=postgres://… PORT=8080 swift run TicketService
@main
struct TicketService {
    /// Exits with status 1 (after logging why) when the stack cannot start or the server stops on an error, and
    /// with 2 when `DATABASE_URL` is missing: an error thrown out of `main` would trap instead.
    static func main() async {
        let logger = { () -> Logger in
            var logger = Logger(label: "ticket-service")
            logger.logLevel = .info
            return logger
        }()
        let environment = ProcessInfo.processInfo.environment
        guard let url = environment["DATABASE_URL"] else {
            logger.critical("DATABASE_URL is not set")
            exit(2)
        }
        let port = environment["PORT"].flatMap(Int.init) ?? 8080
        let migrations = environment["MIGRATIONS"] ?? "migrations"

        let stack: DataStack
        do {
            stack = try await DataStack.start(
                DataStackConfiguration(
                    store: .postgres(try PostgresConfiguration(url: url), schema: environment["SCHEMA"]),
                    migrations: .directory(path: migrations), entities: [Ticket.self]),
                logger: logger)
        } catch {
            // Skyros's errors never hold the password (nor a piece of a malformed URL's).
            logger.critical("cannot start the data stack", metadata: ["error": "\(error)"])
            exit(1)
        }
        let router = Router()
        router.add(middleware: ErrorResponses())
        TicketRoutes(stack: stack).register(on: router)
        // The stack is one of the application's services: on SIGTERM the server stops taking requests first,
        // then the stack commits what is queued and closes its pool.
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)),
            services: [stack], onServerRunning: { _ in logger.info("listening", metadata: ["port": "\(port)"]) },
            logger: logger)
        do {
            try await app.runService()
        } catch {
            logger.critical("the service stopped on an error", metadata: ["error": "\(error)"])
            exit(1)
        }
    }
}
