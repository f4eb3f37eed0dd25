import ArgumentParser
import Foundation
import SkyrosMigrations
import SkyrosPostgres

/// Where the database is and where the history lives.
struct ConnectionOptions: ParsableArguments {
    @Option(
        name: .customLong("database-url"),
        help: "PostgreSQL URL or conninfo. Default: the DATABASE_URL environment variable.")
    var databaseURL: String?

    @Option(help: "Schema holding the history table and receiving the migrations' objects (created if missing).")
    var schema = "public"

    @Option(help: "Name of the history table.")
    var table = "skyros_schema_migrations"

    @Option(
        name: .customLong("lock-wait-timeout"),
        help: "Seconds to wait for another migrator's lock before failing.")
    var lockWaitTimeout: Double = 300

    func validate() throws {
        guard self.lockWaitTimeout >= 0, self.lockWaitTimeout <= 86_400 * 365 else {
            throw ValidationError("--lock-wait-timeout must be between 0 and 31536000 seconds")
        }
        guard !self.schema.isEmpty, !self.table.isEmpty else {
            throw ValidationError("--schema and --table must not be empty")
        }
    }

    /// The connection settings; the password never appears in errors.
    func postgresConfiguration() throws -> PostgresConfiguration {
        guard let url = self.databaseURL ?? ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty else {
            throw ValidationError("no database: pass --database-url or set DATABASE_URL")
        }
        var configuration = try PostgresConfiguration(url: url)
        if configuration["application_name"] == "skyros" { configuration["application_name"] = "skyros-migrate" }
        if configuration["connect_timeout"] == nil { configuration["connect_timeout"] = "10" }
        return configuration
    }

    /// Opens a direct connection, runs `body`, and closes it.
    func withConnection<R>(_ body: (Connection) async throws -> R) async throws -> R {
        let connection = try await Connection.connect(to: try self.postgresConfiguration())
        do {
            let result = try await body(connection)
            await connection.close()
            return result
        } catch {
            await connection.close()
            throw error
        }
    }
}

/// The migrations directory.
struct DirectoryOptions: ParsableArguments {
    @Option(help: "Directory of migration files.")
    var dir = "migrations"

    var url: URL { URL(fileURLWithPath: self.dir) }
}

/// Defaults for `lock_timeout` / `statement_timeout` (a file's directive overrides them).
struct TimeoutOptions: ParsableArguments {
    @Option(
        name: .customLong("lock-timeout"),
        help: "lock_timeout for each migration without a '-- migrate:lock-timeout' directive (e.g. 5s).")
    var lockTimeout: String?

    @Option(
        name: .customLong("statement-timeout"),
        help: "statement_timeout for each migration without a '-- migrate:statement-timeout' directive.")
    var statementTimeout: String?
}

/// Builds the library's migrator from the command-line options.
func makeMigrator(
    connection: ConnectionOptions, directory: DirectoryOptions, timeouts: TimeoutOptions? = nil,
    allowOutOfOrder: Bool = false
) -> Migrator {
    let configuration = Migrator.Configuration(
        schema: connection.schema, historyTable: connection.table,
        lockWaitTimeout: .milliseconds(Int64(connection.lockWaitTimeout * 1000)),
        allowOutOfOrder: allowOutOfOrder, lockTimeout: timeouts?.lockTimeout,
        statementTimeout: timeouts?.statementTimeout)
    return Migrator(source: .directory(directory.url), configuration: configuration)
}
