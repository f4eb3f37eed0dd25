import ArgumentParser
import Foundation
import SkyrosMigrations
import SkyrosPostgres

/// `swift run migrate`: applies, reverts, inspects and creates versioned SQL migrations.
@main
struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Versioned SQL migrations for PostgreSQL (Skyros).",
        discussion: """
            Migration files live in --dir (default: migrations) and are named <version>_<description>.sql. \
            Optional sections: '-- migrate:up' and '-- migrate:down'. A first line '-- migrate:no-transaction' \
            runs the file outside a transaction (for CREATE INDEX CONCURRENTLY and the like); \
            '-- migrate:lock-timeout 5s' and '-- migrate:statement-timeout 1min' set per-migration timeouts.

            The database comes from --database-url or the DATABASE_URL environment variable. Any number of \
            migrate processes may run at once: they take turns through an advisory lock.

            Exit codes:
              0  success
              1  failure (a migration failed, the files and the history disagree, the database is \
            unreachable, the lock wait timed out, verify found a problem)
              2  usage error (bad arguments, no database URL, an unparseable URL)
              3  'status --exit-code' only: migrations are pending
            """,
        subcommands: [Up.self, Down.self, Status.self, Verify.self, Create.self, Baseline.self],
        defaultSubcommand: Up.self)

    /// Runs the command and maps outcomes to the documented exit codes.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            Output.flush()
            Foundation.exit(0)
        } catch let error as MigrationError {
            Output.error("\(error)")
            Foundation.exit(1)
        } catch let error as PostgresError {
            if error.kind == .invalidConfiguration {
                Output.error("invalid database URL: \(error.message)")
                Foundation.exit(2)
            }
            var text = ""
            if let sqlState = error.sqlState { text += "SQLSTATE \(sqlState.rawValue): " }
            Output.error(text + error.message)
            Foundation.exit(1)
        } catch let code as ExitCode {
            Output.flush()
            Foundation.exit(code.rawValue)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                Output.line(fullMessage(for: error))
                Output.flush()
                Foundation.exit(0)
            }
            Output.error(fullMessage(for: error), prefixed: false)
            Foundation.exit(code == .validationFailure ? 2 : 1)
        }
    }
}
