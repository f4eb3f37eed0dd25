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
    static func main() async throws {
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

        let stack = try await DataStack.start(
            DataStackConfiguration(
                store: .postgres(try PostgresConfiguration(url: url), schema: environment["SCHEMA"]),
                migrations: .directory(path: migrations), entities: [Ticket.self]),
            logger: logger)
        let router = Router()
        router.add(middleware: ErrorResponses())
        TicketRoutes(stack: stack).register(on: router)
        // The stack is one of the application's services: on SIGTERM the server stops taking requests first,
        // then the stack commits what is queued and closes its pool.
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)),
            services: [stack], onServerRunning: { _ in logger.info("listening", metadata: ["port": "\(port)"]) },
            logger: logger)
        try await app.runService()
    }
}
