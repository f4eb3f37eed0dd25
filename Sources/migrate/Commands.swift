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
    @OptionGroup var lock: LockOptions
    @OptionGroup var timeouts: TimeoutOptions
    @OptionGroup var policy: PolicyOptions
    @OptionGroup var output: OutputOptions

    @Option(help: "Apply versions up to and including VERSION only.")
    var to: Int64?

    @Flag(name: .customLong("dry-run"), help: "Print the plan and the SQL; change nothing.")
    var dryRun = false

    func run() async throws {
        let migrator = makeMigrator(
            connection: self.connection, directory: self.directory, lock: self.lock, timeouts: self.timeouts,
            policy: self.policy)
        _ = try migrator.migrations()  // report a bad file before connecting
        let progress = ProgressReporter(json: self.output.json)
        let report = try await progress.ticking {
            try await self.connection.withConnection { connection in
                try await migrator.migrate(
                    on: connection, to: self.to, dryRun: self.dryRun, progress: { progress.handle($0) })
            }
        }
        if self.output.json {
            JSONOutput.print(JSONOutput.report(report, connection: self.connection))
        } else if report.isDryRun {
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
    @OptionGroup var lock: LockOptions
    @OptionGroup var timeouts: TimeoutOptions
    @OptionGroup var output: OutputOptions

    @Option(help: "How many migrations to revert, newest first.")
    var steps = 1

    @Flag(name: .customLong("dry-run"), help: "Print the plan and the SQL; change nothing.")
    var dryRun = false

    func validate() throws {
        guard self.steps >= 1 else { throw ValidationError("--steps must be at least 1") }
    }

    func run() async throws {
        let migrator = makeMigrator(
            connection: self.connection, directory: self.directory, lock: self.lock, timeouts: self.timeouts)
        _ = try migrator.migrations()
        let progress = ProgressReporter(json: self.output.json)
        let report = try await progress.ticking {
            try await self.connection.withConnection { connection in
                try await migrator.rollback(
                    steps: self.steps, on: connection, dryRun: self.dryRun, progress: { progress.handle($0) })
            }
        }
        if self.output.json {
            JSONOutput.print(JSONOutput.report(report, connection: self.connection))
        } else if report.isDryRun {
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
    @OptionGroup var output: OutputOptions

    @Flag(name: .customLong("exit-code"), help: "Exit with code 3 while migrations are pending.")
    var exitCode = false

    func run() async throws {
        let migrator = makeMigrator(connection: self.connection, directory: self.directory)
        let statuses = try await self.connection.withConnection { try await migrator.status(on: $0) }
        let pending = statuses.filter { $0.state == .pending || $0.state == .outOfOrder }.count
        let applied = statuses.filter { [.applied, .checksumMismatch, .newerThanFiles].contains($0.state) }.count
        if self.output.json {
            JSONOutput.print(
                JSONOutput.status(statuses, connection: self.connection, applied: applied, pending: pending))
        } else {
            Output.table(
                ["Version", "Description", "Applied at", "State"],
                statuses.map {
                    [String($0.version), $0.description, Output.timestamp($0.appliedAt), $0.state.rawValue]
                })
            Output.line("")
            Output.line("\(applied) applied, \(pending) pending.")
        }
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
    @OptionGroup var policy: PolicyOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let migrator = makeMigrator(connection: self.connection, directory: self.directory, policy: self.policy)
        _ = try migrator.migrations()
        let plan = try await self.connection.withConnection { try await migrator.plan(on: $0) }
        if self.output.json {
            JSONOutput.print(JSONOutput.verify(plan))
            if !plan.issues.isEmpty { throw ExitCode.failure }
            return
        }
        if plan.issues.isEmpty {
            var text = "OK: \(plan.migrations.count) migration file(s) agree with the history."
            if let newest = plan.newerApplied.last {
                text += " The history also holds \(plan.newerApplied.count) newer version(s), up to \(newest.version)."
            }
            Output.line(text)
            return
        }
        for issue in plan.issues { Output.error("\(issue.kind.rawValue): \(issue)") }
        throw ExitCode.failure
    }
}

/// `migrate repair`.
struct Repair: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record the new checksum of each edited applied migration (after confirmation), so that "
            + "verify and up accept the files as they are.",
        discussion: """
            The edited statements do not run again: use it for a deliberate edit that does not change the \
            schema (a comment, a re-runnable statement). Each repair keeps the old and the new checksum in the \
            history row's 'repairs' column. It asks for confirmation on a terminal; elsewhere pass --yes.
            """)

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var directory: DirectoryOptions
    @OptionGroup var lock: LockOptions
    @OptionGroup var output: OutputOptions

    @Flag(name: [.customShort("y"), .long], help: "Do not ask: repair (required when stdin is not a terminal).")
    var yes = false

    @Flag(name: .customLong("dry-run"), help: "List what would be repaired; change nothing.")
    var dryRun = false

    func run() async throws {
        let migrator = makeMigrator(connection: self.connection, directory: self.directory, lock: self.lock)
        _ = try migrator.migrations()
        let json = self.output.json
        try await self.connection.withConnection { connection in
            let candidates = try await migrator.repair(on: connection, dryRun: true)
            guard !candidates.isEmpty else {
                if json {
                    JSONOutput.print(JSONOutput.repair([], repaired: false))
                } else {
                    Output.line("Nothing to repair: every applied file matches its recorded checksum.")
                }
                return
            }
            Output.result("Edited applied migration(s):", json: json)
            for repair in candidates {
                Output.result(
                    "  \(repair.fileName): recorded \(repair.oldChecksum.map { String($0.prefix(12)) } ?? "none"), "
                        + "file \(repair.newChecksum.prefix(12))",
                    json: json)
            }
            if self.dryRun {
                if json { JSONOutput.print(JSONOutput.repair(candidates, repaired: false)) }
                return
            }
            if !self.yes {
                guard isatty(STDIN_FILENO) == 1 else {
                    throw ValidationError(
                        "repair changes the history and stdin is not a terminal: pass --yes to confirm")
                }
                Output.stderr(
                    "Record the new checksums in \(self.connection.schema).\(self.connection.table)? "
                        + "The edited statements will not run again. [y/N] ")
                let answer = await Self.readLine()?.trimmingCharacters(in: .whitespaces).lowercased()
                guard answer == "y" || answer == "yes" else {
                    Output.error("repair cancelled; nothing changed")
                    throw ExitCode.failure
                }
            }
            let repairs = try await migrator.repair(on: connection)
            if json {
                JSONOutput.print(JSONOutput.repair(repairs, repaired: true))
            } else {
                Output.line("Repaired \(repairs.count) migration(s); verify now passes for them.")
            }
        }
    }

    /// A line of stdin, read on a thread of its own (it blocks until the user answers).
    private static func readLine() async -> String? {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: Swift.readLine()) }
        }
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

/// `migrate draft NAME`: cannot draft here (this tool knows no entities); says how an app drafts. Exit 2.
struct Draft: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Explain how to draft a migration from an app's entities (this tool cannot see them).")

    @Argument(parsing: .captureForPassthrough, help: "Ignored: draft NAME [--database-url URL] [--schema S] [--dir D].")
    var ignored: [String] = []

    static let message = """
        migrate cannot draft a migration: the entities live in the app, and this tool does not see them.
        Draft from the app's own executable, which calls the Skyros library with its entities, e.g. a target
        Sources/migrate-draft/main.swift:

            import Foundation
            import Skyros
            // import the module that declares your entities
            exit(await MigrationDraft.command(Array(CommandLine.arguments.dropFirst()), entities: [Author.self, Book.self]))

        then: swift run migrate-draft draft NAME [--database-url URL] [--schema S] [--dir D]
        (the demo does this: swift run skyros-demo draft NAME). Apply the file with: swift run migrate
        """

    func run() async throws {
        Output.stderr(Self.message + "\n")
        throw ExitCode(2)
    }
}

/// `migrate baseline VERSION`.
struct Baseline: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Mark an existing database as being at VERSION: files up to it will never run.")

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var directory: DirectoryOptions
    @OptionGroup var lock: LockOptions

    @Argument(help: "The version the existing schema corresponds to.")
    var version: Int64

    @Option(help: "Description recorded for the baseline.")
    var description = "baseline"

    func run() async throws {
        let migrator = makeMigrator(connection: self.connection, directory: self.directory, lock: self.lock)
        try await self.connection.withConnection { connection in
            try await migrator.baseline(version: self.version, description: self.description, on: connection)
        }
        Output.line("Baselined at version \(self.version).")
    }
}
