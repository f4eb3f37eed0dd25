import ArgumentParser
import Foundation
import SkyrosMigrations
import SkyrosPostgres

/// `migrate up` (the default).
struct Up: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply pending migrations, each in its own transaction (the default command).")

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var directory: DirectoryOptions
    @OptionGroup var timeouts: TimeoutOptions

    @Option(help: "Apply versions up to and including VERSION only.")
    var to: Int64?

    @Flag(name: .customLong("dry-run"), help: "Print the plan and the SQL; change nothing.")
    var dryRun = false

    @Flag(
        name: .customLong("allow-out-of-order"),
        help: "Apply new files older than the newest applied version instead of refusing.")
    var allowOutOfOrder = false

    func run() async throws {
        let migrator = makeMigrator(
            connection: self.connection, directory: self.directory, timeouts: self.timeouts,
            allowOutOfOrder: self.allowOutOfOrder)
        _ = try migrator.migrations()  // report a bad file before connecting
        let report = try await self.connection.withConnection { connection in
            try await migrator.migrate(
                on: connection, to: self.to, dryRun: self.dryRun, progress: { Output.progress($0) })
        }
        if report.isDryRun {
            Output.dryRun(report)
        } else if report.completed.isEmpty {
            Output.line("Nothing to migrate; database at version \(report.currentVersion.map(String.init) ?? "none").")
        } else {
            let total = report.completed.reduce(Duration.zero) { $0 + $1.duration }
            Output.line(
                "Applied \(report.completed.count) migration(s) in \(Output.format(total)); database at version "
                    + "\(report.currentVersion.map(String.init) ?? "none").")
        }
    }
}

/// `migrate down --steps N`.
struct Down: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Revert the newest applied migrations with their -- migrate:down sections.")

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var directory: DirectoryOptions
    @OptionGroup var timeouts: TimeoutOptions

    @Option(help: "How many migrations to revert, newest first.")
    var steps = 1

    @Flag(name: .customLong("dry-run"), help: "Print the plan and the SQL; change nothing.")
    var dryRun = false

    func validate() throws {
        guard self.steps >= 1 else { throw ValidationError("--steps must be at least 1") }
    }

    func run() async throws {
        let migrator = makeMigrator(connection: self.connection, directory: self.directory, timeouts: self.timeouts)
        _ = try migrator.migrations()
        let report = try await self.connection.withConnection { connection in
            try await migrator.rollback(
                steps: self.steps, on: connection, dryRun: self.dryRun, progress: { Output.progress($0) })
        }
        if report.isDryRun {
            Output.dryRun(report)
        } else if report.completed.isEmpty {
            Output.line("Nothing to revert.")
        } else {
            Output.line(
                "Reverted \(report.completed.count) migration(s); database at version "
                    + "\(report.currentVersion.map(String.init) ?? "none").")
        }
    }
}

/// `migrate status`.
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show every version: description, when it was applied, and its state.")

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var directory: DirectoryOptions

    @Flag(name: .customLong("exit-code"), help: "Exit with code 3 while migrations are pending.")
    var exitCode = false

    func run() async throws {
        let migrator = makeMigrator(connection: self.connection, directory: self.directory)
        let statuses = try await self.connection.withConnection { try await migrator.status(on: $0) }
        Output.table(
            ["Version", "Description", "Applied at", "State"],
            statuses.map { [String($0.version), $0.description, Output.timestamp($0.appliedAt), $0.state.rawValue] })
        let pending = statuses.filter { $0.state == .pending || $0.state == .outOfOrder }.count
        let applied = statuses.filter { $0.state == .applied || $0.state == .checksumMismatch }.count
        Output.line("")
        Output.line("\(applied) applied, \(pending) pending.")
        if self.exitCode && pending > 0 { throw ExitCode(3) }
    }
}

/// `migrate verify`.
struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check applied files against their recorded checksums; exit 1 on drift, missing files or "
            + "unknown applied versions.")

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var directory: DirectoryOptions

    @Flag(name: .customLong("allow-out-of-order"), help: "Do not report pending files older than the newest applied.")
    var allowOutOfOrder = false

    func run() async throws {
        let migrator = makeMigrator(
            connection: self.connection, directory: self.directory, allowOutOfOrder: self.allowOutOfOrder)
        let migrations = try migrator.migrations()
        let issues = try await self.connection.withConnection { try await migrator.verify(on: $0) }
        if issues.isEmpty {
            Output.line("OK: \(migrations.count) migration file(s) agree with the history.")
            return
        }
        for issue in issues { Output.error("\(issue.kind.rawValue): \(issue)") }
        throw ExitCode.failure
    }
}

/// `migrate create NAME`.
struct Create: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write the next-numbered migration file with empty up and down sections.")

    @OptionGroup var directory: DirectoryOptions

    @Argument(help: "What the migration does, e.g. add_books.")
    var name: String

    @Flag(help: "Use a UTC timestamp (yyyyMMddHHmmss) as the version.")
    var timestamp = false

    func run() async throws {
        let url = try MigrationFileCreator.create(
            named: self.name, in: self.directory.url, timestamp: self.timestamp ? true : nil)
        Output.line("Created \(self.directory.dir)/\(url.lastPathComponent)")
    }
}

/// `migrate baseline VERSION`.
struct Baseline: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Mark an existing database as being at VERSION: files up to it will never run.")

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var directory: DirectoryOptions

    @Argument(help: "The version the existing schema corresponds to.")
    var version: Int64

    @Option(help: "Description recorded for the baseline.")
    var description = "baseline"

    func run() async throws {
        let migrator = makeMigrator(connection: self.connection, directory: self.directory)
        try await self.connection.withConnection { connection in
            try await migrator.baseline(version: self.version, description: self.description, on: connection)
        }
        Output.line("Baselined at version \(self.version).")
    }
}
