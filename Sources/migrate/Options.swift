import ArgumentParser
import Foundation
import Logging
import SkyrosMigrations
import SkyrosPostgres

/// Where the database is, where the history lives, and how to reach the server.
struct ConnectionOptions: ParsableArguments {
    @Option(
        name: .customLong("database-url"),
        help: "PostgreSQL URL or conninfo. Default: the DATABASE_URL environment variable.")
    var databaseURL: String?

    @Option(
        name: .customLong("schema"),
        help: ArgumentHelp(
            "Schema holding the history table and receiving the migrations' objects (created if missing). Default: "
                + "the DATABASE_SCHEMA environment variable, else '\(SchemaMigrator.Configuration.defaultSchema)', the "
                + "schema DataStack.start migrates when its store names none.",
            valueName: "schema"))
    var schemaOption: String?

    /// The schema in effect: `--schema`, else `DATABASE_SCHEMA`, else the library's default, so that the
    /// command reads the history an app wrote with the same setting.
    var schema: String { self.schemaOption ?? Self.environmentSchema ?? SchemaMigrator.Configuration.defaultSchema }

    /// `DATABASE_SCHEMA`, when set and not empty.
    static var environmentSchema: String? {
        ProcessInfo.processInfo.environment["DATABASE_SCHEMA"].flatMap { $0.isEmpty ? nil : $0 }
    }

    @Option(help: "Name of the history table.")
    var table = "skyros_schema_migrations"

    @Option(
        name: .customLong("connect-timeout"),
        help: ArgumentHelp(
            "Seconds one connection attempt may take (libpq connect_timeout; a connect_timeout in the URL wins).",
            valueName: "seconds"))
    var connectTimeout = 10

    @Option(
        name: .customLong("wait"),
        help: ArgumentHelp(
            "Wait up to SECONDS for the database to accept connections, retrying with backoff and a line per "
                + "attempt on stderr. '--wait' alone waits \(Int(ConnectionOptions.waitDefault)) s.",
            valueName: "seconds"))
    var wait: Double?

    /// What `--wait` without a value means.
    static let waitDefault: Double = 60

    func validate() throws {
        guard !self.schema.isEmpty, !self.table.isEmpty else {
            throw ValidationError("--schema and --table must not be empty")
        }
        guard (1...3600).contains(self.connectTimeout) else {
            throw ValidationError("--connect-timeout must be between 1 and 3600 seconds")
        }
        if let wait = self.wait {
            guard wait >= 0, wait <= 86_400 else { throw ValidationError("--wait must be between 0 and 86400 seconds") }
        }
    }

    /// The connection settings; the password never appears in errors.
    func postgresConfiguration() throws -> PGConfiguration {
        guard let url = self.databaseURL ?? ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty else {
            throw ValidationError("no database: pass --database-url or set DATABASE_URL")
        }
        var configuration = try PGConfiguration(url: url)
        if configuration["application_name"] == "skyros" { configuration["application_name"] = "skyros-migrate" }
        // Without it libpq waits for the operating system's TCP timeout (minutes) on an unreachable host.
        if configuration["connect_timeout"] == nil { configuration["connect_timeout"] = String(self.connectTimeout) }
        return configuration
    }

    /// Opens a direct connection (waiting for the server when `--wait` was given), runs `body`, and closes it.
    func withConnection<R>(_ body: (PGConnection) async throws -> R) async throws -> R {
        let connection = try await self.connect()
        do {
            let result = try await body(connection)
            await connection.close()
            return result
        } catch {
            await connection.close()
            throw error
        }
    }

    /// Connects; with `--wait`, retries what a starting server answers (refused, starting up, shutting down)
    /// with a growing pause (0.25 s doubling to 2 s) until the deadline. A wrong password, database or URL fails
    /// at once: waiting would not change it.
    private func connect() async throws -> PGConnection {
        let configuration = try self.postgresConfiguration()
        guard let wait = self.wait, wait > 0 else { return try await PGConnection.connect(to: configuration) }
        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start + .milliseconds(Int64(wait * 1000))
        let retries = RetryPolicy(initialDelay: .milliseconds(250), maximumDelay: .seconds(2))
        var attempt = 0
        while true {
            attempt += 1
            do {
                let connection = try await PGConnection.connect(to: configuration)
                if attempt > 1 {
                    Output.note("the database accepts connections (attempt \(attempt), after \(Output.format(clock.now - start)))")
                }
                return connection
            } catch let error as PGError where Self.isWorthWaiting(error) {
                let now = clock.now
                guard now < deadline else {
                    Output.note("gave up waiting for the database after \(attempt) attempt(s) in \(Output.format(now - start))")
                    throw error
                }
                let delay = min(retries.delay(afterAttempt: attempt), deadline - now)
                Output.note(
                    "waiting for the database (attempt \(attempt), \(Output.format(now - start)) of \(Int(wait)) s): "
                        + "\(Self.firstLine(error.message)); retrying in \(Output.format(delay))")
                try await Task.sleep(for: delay)
            }
        }
    }

    private static func isWorthWaiting(_ error: PGError) -> Bool {
        error.kind != .invalidConfiguration && error.kind != .authenticationFailed && error.kind != .databaseNotFound
    }

    private static func firstLine(_ text: String) -> String {
        String(text.split(separator: "\n", omittingEmptySubsequences: true).first ?? "")
    }

    /// `--wait` may come without a value: it becomes `--wait=60` unless the next argument is a number.
    static func expandingBareWait(_ arguments: [String]) -> [String] {
        var result: [String] = []
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            if argument == "--" {
                result += arguments[index...]
                break
            }
            if argument == "--wait" {
                let next = index + 1 < arguments.endIndex ? arguments[index + 1] : nil
                if next.flatMap(Double.init) == nil {
                    result.append("--wait=\(Int(self.waitDefault))")
                    index += 1
                    continue
                }
            }
            result.append(argument)
            index += 1
        }
        return result
    }
}

/// How long to wait for another migrator's lock (for the commands that take it).
struct LockOptions: ParsableArguments {
    @Option(
        name: .customLong("lock-wait-timeout"),
        help: ArgumentHelp("Seconds to wait for another migrator's lock before failing.", valueName: "seconds"))
    var lockWaitTimeout: Double = 300

    func validate() throws {
        guard self.lockWaitTimeout >= 0, self.lockWaitTimeout <= 86_400 * 365 else {
            throw ValidationError("--lock-wait-timeout must be between 0 and 31536000 seconds")
        }
    }

    var duration: Duration { .milliseconds(Int64(self.lockWaitTimeout * 1000)) }
}

/// `--json`: one JSON document on stdout; progress and logs on stderr.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print one JSON document on stdout (fields in the README); progress and logs go to stderr.")
    var json = false
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

/// How to treat the history against the files (`up`, `verify`).
struct PolicyOptions: ParsableArguments {
    @Flag(
        name: .customLong("allow-out-of-order"),
        help: "Accept new files older than the newest applied version instead of refusing.")
    var allowOutOfOrder = false

    @Flag(
        name: .customLong("refuse-newer-applied"),
        help: ArgumentHelp(
            "Refuse when the history holds versions newer than every file. By default they are tolerated "
                + "(with a notice) when every file is applied: an older build during a rolling deploy."))
    var refuseNewerApplied = false
}

/// Builds the library's migrator from the command-line options; its notices go to stderr.
func makeMigrator(
    connection: ConnectionOptions, directory: DirectoryOptions, lock: LockOptions? = nil,
    timeouts: TimeoutOptions? = nil, policy: PolicyOptions? = nil
) -> SchemaMigrator {
    let configuration = SchemaMigrator.Configuration(
        schema: connection.schema, historyTable: connection.table,
        lockWaitTimeout: lock?.duration ?? .seconds(300),
        allowOutOfOrder: policy?.allowOutOfOrder ?? false, lockTimeout: timeouts?.lockTimeout,
        statementTimeout: timeouts?.statementTimeout,
        newerAppliedMigrations: policy?.refuseNewerApplied == true ? .refuse : .tolerate)
    var logger = Logger(label: "migrate", factory: { StreamLogHandler.standardError(label: $0) })
    logger.logLevel = .notice
    return SchemaMigrator(source: .directory(directory.url), configuration: configuration, logger: logger)
}
