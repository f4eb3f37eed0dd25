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

            The database comes from --database-url or the DATABASE_URL environment variable; the schema from \
            --schema or the DATABASE_SCHEMA environment variable, else '\(SchemaMigrator.Configuration.defaultSchema)', \
            where DataStack.start migrates when its store names no schema. Each connection \
            attempt gives up after --connect-timeout seconds (default 10; a connect_timeout in the URL wins); \
            --wait[=SECONDS] retries until the server accepts connections. Any number of migrate processes may \
            run at once: they take turns through an advisory lock. Versions applied by a newer build (newer than \
            every file, with every file applied) are tolerated with a notice; --refuse-newer-applied refuses them.

            Output: results on stdout (--json: one JSON document); progress, notices and errors on stderr.

            Exit codes:
              0  success
              1  failure (a migration failed, the files and the history disagree, the database is \
            unreachable, the lock wait timed out, verify found a problem, repair was declined)
              2  usage error (bad arguments, no database URL, an unparseable URL, repair without --yes \
            when stdin is not a terminal)
              3  'status --exit-code' only: migrations are pending
            """,
        version: "Skyros \(SkyrosVersion.current)",
        subcommands: [
            Up.self, Down.self, Status.self, Verify.self, Repair.self, Create.self, Draft.self, Baseline.self, CaptureSQL.self, Capture.self,
        ],
        defaultSubcommand: Up.self)

    /// Runs the command and maps outcomes to the documented exit codes. Under `--json` a failure also prints a
    /// JSON document (`{"error": {…}, "exitCode": n}`) on stdout.
    static func main() async {
        let arguments = ConnectionOptions.expandingBareWait(Array(CommandLine.arguments.dropFirst()))
        let json = arguments.prefix { $0 != "--" }.contains("--json")
        func fail(_ error: any Error, _ code: Int32) -> Never {
            if json { JSONOutput.print(JSONOutput.failure(error, exitCode: code)) }
            Output.flush()
            Foundation.exit(code)
        }
        do {
            var command = try parseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            Output.flush()
            Foundation.exit(0)
        } catch let error as MigrationError {
            Output.error("\(error)")
            fail(error, 1)
        } catch let error as PGError {
            if error.kind == .invalidConfiguration {
                Output.error("invalid database URL: \(error.message)")
                fail(error, 2)
            }
            var text = ""
            if let sqlState = error.sqlState { text += "SQLSTATE \(sqlState.rawValue): " }
            Output.error(text + error.message)
            fail(error, 1)
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
            fail(error, code == .validationFailure ? 2 : 1)
        }
    }
}
