import Foundation
import Logging
import Vapor
import VaporTicketsApp

/// Runs the ticket API on a Skyros stack inside Vapor.
///
///     DATABASE_URL=postgres://… PORT=8080 swift run VaporTickets
///
/// Exits 0 after SIGTERM or SIGINT once the queued writes committed; 1 (after logging why) when the stack
/// cannot start; 2 when `DATABASE_URL` is missing.
@main
enum Entrypoint {
    static func main() async {
        let environment = ProcessInfo.processInfo.environment
        var env: Environment
        do {
            env = try Environment.detect()
            try LoggingSystem.bootstrap(from: &env)
        } catch {
            FileHandle.standardError.write(Data("cannot read the command line: \(error)\n".utf8))
            exit(2)
        }
        let app: Application
        do {
            app = try await Application.make(env)
        } catch {
            FileHandle.standardError.write(Data("cannot create the application: \(error)\n".utf8))
            exit(1)
        }
        guard let url = environment["DATABASE_URL"] else {
            app.logger.critical("DATABASE_URL is not set")
            try? await app.asyncShutdown()
            exit(2)
        }
        app.http.server.configuration.hostname = environment["HOST"] ?? "127.0.0.1"
        app.http.server.configuration.port = environment["PORT"].flatMap(Int.init) ?? 8080
        var settings = TicketsSettings(databaseURL: url, schema: environment["SCHEMA"])
        if let migrations = environment["MIGRATIONS"] { settings.migrations = migrations }
        if let seconds = environment["DRAIN_SECONDS"].flatMap(Int.init) { settings.drainDeadline = .seconds(seconds) }
        if let milliseconds = environment["WRITE_TIMEOUT_MS"].flatMap(Int.init), milliseconds > 0 {
            settings.writeTimeout = .milliseconds(milliseconds)
        }
        do {
            try configure(app, settings)
            try await app.execute()        // boot (start the stack), serve until SIGTERM/SIGINT
        } catch {
            // Skyros's errors never hold the password (nor a piece of a malformed URL's).
            app.logger.critical("the service stopped on an error", metadata: ["error": "\(error)"])
            try? await app.asyncShutdown()
            exit(1)
        }
        do {
            try await app.asyncShutdown()  // stops the server, then drains the commit queue
        } catch {
            app.logger.critical("shutdown failed", metadata: ["error": "\(error)"])
            exit(1)
        }
    }
}
