import Logging
import SkyrosPostgres

/// Applies versioned SQL migrations to a PostgreSQL schema, safely from any number of processes at once.
///
/// Each migration runs in its own transaction together with its history row, so it is applied entirely or
/// not at all. A session advisory lock, polled against a deadline, serialises concurrent migrators before the
/// history table is created or read. Edited, deleted and out-of-order files are refused with a message naming
/// the file.
///
/// ```swift
/// let migrator = SchemaMigrator(
///     source: .directory(path: "migrations"),
///     configuration: .init(schema: "app"),
///     logger: logger)
/// let report = try await migrator.migrate(database: try PGConfiguration(url: url))
/// for step in report.completed { print(step.migration.fileName, step.duration) }
/// ```
///
/// ## Topics
/// - ``migrate(database:to:progress:)``
/// - ``migrate(on:to:dryRun:progress:)``
/// - ``rollback(steps:on:dryRun:progress:)``
/// - ``plan(on:to:)``
/// - ``status(on:)``
/// - ``verify(on:)``
/// - ``baseline(version:description:on:)``
/// - ``repair(on:dryRun:)``
/// - ``NewerMigrationsPolicy``
public struct SchemaMigrator: Sendable {
    /// What the migrator does when the history holds versions newer than every migration file.
    ///
    /// During a rolling deploy a newer build's instances apply `4_author_bio.sql` while the previous build's
    /// instances (files 1–3) still start. Under ``tolerate`` (the default) those start: when every one of their
    /// files is applied with its recorded checksum — they are a prefix of the history — the newer versions are
    /// logged at `notice` and listed in ``MigrationReport/newerApplied``, and nothing runs. ``refuse`` fails
    /// instead, as for a wrong migrations directory. Either way an edited applied file is refused.
    ///
    /// ```swift
    /// var configuration = SchemaMigrator.Configuration(schema: "app")
    /// configuration.newerAppliedMigrations = .refuse     // e.g. in CI: the files must cover the database
    /// ```
    public struct NewerMigrationsPolicy: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable { case tolerate, refuse }
        private let base: Base
        private init(_ base: Base) { self.base = base }
        public var description: String { self.base.rawValue }

        /// Start when these files are a prefix of the history, with a `notice` naming the newer versions.
        public static let tolerate = NewerMigrationsPolicy(.tolerate)
        /// Refuse with ``MigrationIssue/Kind/unknownAppliedVersion`` whenever the history is ahead of the files.
        public static let refuse = NewerMigrationsPolicy(.refuse)
    }


    /// Where the history lives and how migrations run.
    public struct Configuration: Sendable, Hashable {
        /// The schema migrations run in when nobody names one: `public`, PostgreSQL's own default.
        ///
        /// The library and the command read this one value: a configuration made without a schema,
        /// `DataStack.start` for a store that names none, and the `migrate` command without `--schema` or
        /// `DATABASE_SCHEMA`. So `swift run migrate status` run beside an app that migrates at start reads the
        /// history the app wrote.
        ///
        /// ```swift
        /// let configuration = SchemaMigrator.Configuration()
        /// assert(configuration.schema == SchemaMigrator.Configuration.defaultSchema)   // "public"
        /// ```
        public static let defaultSchema = "public"

        /// The schema holding the history table and receiving the migrations' objects (`search_path` is set to
        /// it while migrating; it is created if missing). Default ``defaultSchema`` (`public`).
        public var schema: String
        /// The history table's name. Default `skyros_schema_migrations`.
        public var historyTable: String
        /// How long to wait for another migrator's lock before failing. Default 5 minutes.
        public var lockWaitTimeout: Duration
        /// Apply pending files older than the newest applied version instead of refusing. Default `false`.
        public var allowOutOfOrder: Bool
        /// `lock_timeout` for every migration without a `-- migrate:lock-timeout` directive (e.g. `"5s"`).
        public var lockTimeout: String?
        /// `statement_timeout` for every migration without a `-- migrate:statement-timeout` directive.
        public var statementTimeout: String?
        /// Recorded in `applied_by`; `nil` records the database user (`current_user`).
        public var appliedBy: String?
        /// Applied versions newer than every file: tolerated (the default, for rolling deploys) or refused.
        /// See ``SchemaMigrator/NewerMigrationsPolicy``.
        public var newerAppliedMigrations: NewerMigrationsPolicy

        /// Creates a configuration; every argument has a default.
        public init(
            schema: String = Configuration.defaultSchema, historyTable: String = "skyros_schema_migrations",
            lockWaitTimeout: Duration = .seconds(300), allowOutOfOrder: Bool = false,
            lockTimeout: String? = nil, statementTimeout: String? = nil, appliedBy: String? = nil,
            newerAppliedMigrations: NewerMigrationsPolicy = .tolerate
        ) {
            self.schema = schema
            self.historyTable = historyTable
            self.lockWaitTimeout = lockWaitTimeout
            self.allowOutOfOrder = allowOutOfOrder
            self.lockTimeout = lockTimeout
            self.statementTimeout = statementTimeout
            self.appliedBy = appliedBy
            self.newerAppliedMigrations = newerAppliedMigrations
        }
    }

    /// Where the migrations come from.
    public let source: MigrationSource
    /// The configuration.
    public let configuration: Configuration
    let logger: Logger
    private var history: MigrationHistory {
        MigrationHistory(schema: self.configuration.schema, table: self.configuration.historyTable)
    }

    /// Creates a migrator. Nothing is read until a method runs.
    /// - Parameters:
    ///   - source: the migration files.
    ///   - configuration: schema, history table, timeouts.
    ///   - logger: receives debug/info records (never SQL parameter values); a no-op logger by default.
    public init(
        source: MigrationSource, configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "skyros.migrations", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.source = source
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "skyros.migrations.schema"] = "\(configuration.schema)"
        self.logger = logger
    }

    /// Loads and parses the migrations, sorted by version.
    /// - Throws: ``MigrationError`` naming the bad file.
    public func migrations() throws -> [SchemaMigration] { try self.source.load() }

    /// Opens a direct connection, applies every pending migration, and closes the connection.
    ///
    /// This is the call for service start-up (`DataStack.start` uses it). Use a direct connection, not one
    /// through a transaction-mode pooler: the migration lock is a session lock.
    /// ```swift
    /// try await SchemaMigrator(source: .bundle(.module)).migrate(database: configuration)
    /// ```
    /// - Throws: ``MigrationError``, or `PGError` when the connection cannot be opened.
    @discardableResult
    public func migrate(
        database: PGConfiguration, to target: Int64? = nil,
        progress: (@Sendable (MigrationEvent) -> Void)? = nil
    ) async throws -> MigrationReport {
        let migrations = try self.migrations()  // fail on a bad file before connecting
        let connection = try await PGConnection.connect(to: database, logger: self.logger)
        do {
            let report = try await self.migrate(
                migrations, on: connection, to: target, dryRun: false, progress: progress)
            await connection.close()
            return report
        } catch {
            await connection.close()
            throw error
        }
    }

    /// Applies pending migrations in version order, each in its own transaction with its history row.
    ///
    /// Refuses (throws ``MigrationError/Kind/refused``, changing nothing) when an applied file changed, an
    /// applied version has no file, or a pending file is older than the newest applied one (unless
    /// ``Configuration/allowOutOfOrder``). A transactional migration containing a statement that cannot run in
    /// a transaction is refused before anything runs.
    /// - Parameters:
    ///   - connection: a direct connection, outside a transaction. Its `search_path` is restored afterwards.
    ///   - target: apply versions up to and including this one; `nil` for all.
    ///   - dryRun: only plan: take the lock, read the history, create nothing and run nothing.
    ///   - progress: called as the migrator waits for the lock and runs each migration.
    /// - Returns: what ran (or would run).
    /// - Throws: ``MigrationError`` naming the file (and line, for a failing statement).
    @discardableResult
    public func migrate(
        on connection: PGConnection, to target: Int64? = nil, dryRun: Bool = false,
        progress: (@Sendable (MigrationEvent) -> Void)? = nil
    ) async throws -> MigrationReport {
        try await self.migrate(
            try self.migrations(), on: connection, to: target, dryRun: dryRun, progress: progress)
    }

    private func migrate(
        _ migrations: [SchemaMigration], on connection: PGConnection, to target: Int64?, dryRun: Bool,
        progress: (@Sendable (MigrationEvent) -> Void)?
    ) async throws -> MigrationReport {
        try await self.withSession(on: connection, createHistory: !dryRun, progress: progress) { session in
            let applied = try await self.history.read(on: connection)
            let plan = MigrationPlanner.plan(
                migrations: migrations, applied: applied, target: target,
                allowOutOfOrder: self.configuration.allowOutOfOrder,
                newerApplied: self.configuration.newerAppliedMigrations)
            if !plan.issues.isEmpty {
                throw Self.refusal(plan.issues)
            }
            if let newest = plan.newerApplied.last {
                self.logger.notice(
                    """
                    the database is ahead of these migration files: \(plan.newerApplied.count) newer applied \
                    migration(s), up to \(newest.fileName); every file here is applied, so a newer build migrated \
                    first (rolling deploy): continuing
                    """,
                    metadata: [
                        "skyros.migrations.newer": "\(plan.newerApplied.map(\.fileName))",
                        "skyros.migrations.file_version": "\(migrations.last?.version ?? 0)",
                    ])
            }
            for migration in plan.pending {
                try MigrationRunner.checkTransactional(
                    migration, direction: .up, serverVersion: session.serverVersion)
            }
            var report = MigrationReport(
                direction: .up, planned: plan.pending, completed: [], isDryRun: dryRun,
                lockWait: session.lockWait, currentVersion: applied.map(\.version).max(),
                newerApplied: plan.newerApplied)
            if dryRun { return report }
            let runner = MigrationRunner(history: self.history, configuration: self.configuration, logger: self.logger)
            for migration in plan.pending {
                try await Self.checkSession(session.backendPID, on: connection)
                progress?(.started(migration, .up))
                let duration = try await Self.traced(migration, direction: .up, on: connection) {
                    try await runner.run(migration, direction: .up, on: connection)
                }
                let step = MigrationReport.Step(migration: migration, direction: .up, duration: duration)
                report.completed.append(step)
                report.currentVersion = max(report.currentVersion ?? migration.version, migration.version)
                self.logger.info(
                    "applied migration",
                    metadata: ["skyros.migrations.file": "\(migration.fileName)", "skyros.migrations.duration": "\(duration)"])
                progress?(.finished(step))
            }
            return report
        }
    }

    /// Reverts the `steps` newest applied migrations, newest first, each in its own transaction with the
    /// removal of its history row.
    ///
    /// ```swift
    /// try await migrator.rollback(steps: 1, on: connection)
    /// ```
    /// - Throws: ``MigrationError`` of kind ``MigrationError/Kind/irreversible`` (no down section),
    ///   ``MigrationError/Kind/refused`` (file missing or changed), or ``MigrationError/Kind/statementFailed``.
    @discardableResult
    public func rollback(
        steps: Int = 1, on connection: PGConnection, dryRun: Bool = false,
        progress: (@Sendable (MigrationEvent) -> Void)? = nil
    ) async throws -> MigrationReport {
        guard steps >= 1 else {
            throw MigrationError(kind: .invalidArgument, message: "steps must be at least 1 (got \(steps))")
        }
        let migrations = try self.migrations()
        return try await self.withSession(on: connection, createHistory: false, progress: progress) { session in
            var applied = try await self.history.read(on: connection)
            let toRevert = try MigrationPlanner.rollback(migrations: migrations, applied: applied, steps: steps)
            for migration in toRevert {
                try MigrationRunner.checkTransactional(
                    migration, direction: .down, serverVersion: session.serverVersion)
            }
            var report = MigrationReport(
                direction: .down, planned: toRevert, completed: [], isDryRun: dryRun, lockWait: session.lockWait,
                currentVersion: applied.map(\.version).max())
            if dryRun { return report }
            let runner = MigrationRunner(history: self.history, configuration: self.configuration, logger: self.logger)
            for migration in toRevert {
                try await Self.checkSession(session.backendPID, on: connection)
                progress?(.started(migration, .down))
                let duration = try await Self.traced(migration, direction: .down, on: connection) {
                    try await runner.run(migration, direction: .down, on: connection)
                }
                let step = MigrationReport.Step(migration: migration, direction: .down, duration: duration)
                report.completed.append(step)
                applied.removeAll { $0.version == migration.version }
                report.currentVersion = applied.map(\.version).max()
                self.logger.info("reverted migration", metadata: ["skyros.migrations.file": "\(migration.fileName)"])
                progress?(.finished(step))
            }
            return report
        }
    }

    /// Compares the files with the history without taking the lock or changing anything.
    /// - Parameters:
    ///   - connection: a connection to the database whose history is read.
    ///   - target: limit ``MigrationPlan/pending`` to versions up to this one.
    public func plan(on connection: PGConnection, to target: Int64? = nil) async throws -> MigrationPlan {
        let migrations = try self.migrations()
        let applied = try await self.history.read(on: connection)
        return MigrationPlanner.plan(
            migrations: migrations, applied: applied, target: target,
            allowOutOfOrder: self.configuration.allowOutOfOrder,
            newerApplied: self.configuration.newerAppliedMigrations)
    }

    /// Every version's state (applied, pending, changed, missing…), by version. Read-only.
    ///
    /// ```swift
    /// for row in try await migrator.status(on: connection) { print(row.version, row.state.rawValue) }
    /// ```
    public func status(on connection: PGConnection) async throws -> [MigrationStatus] {
        try await self.plan(on: connection).statuses
    }

    /// The disagreements between files and history: checksum drift, applied versions missing on disk,
    /// unknown applied versions (newer ones only under ``NewerMigrationsPolicy/refuse``, or when these files are
    /// not a prefix of the history), and (unless allowed) out-of-order files. Empty when all is well. Read-only.
    public func verify(on connection: PGConnection) async throws -> [MigrationIssue] {
        try await self.plan(on: connection).issues
    }

    /// Marks an existing database as being at `version`: files up to it are treated as already applied and
    /// never run. Only possible while the history is empty.
    ///
    /// ```swift
    /// try await migrator.baseline(version: 20240101000000, on: connection)
    /// ```
    /// - Throws: ``MigrationError`` of kind ``MigrationError/Kind/invalidBaseline``.
    public func baseline(version: Int64, description: String = "baseline", on connection: PGConnection) async throws {
        guard version > 0 else {
            throw MigrationError(kind: .invalidBaseline, message: "the baseline version must be positive")
        }
        try await self.withSession(on: connection, createHistory: true, progress: nil) { _ in
            let applied = try await self.history.read(on: connection)
            guard applied.isEmpty else {
                throw MigrationError(
                    kind: .invalidBaseline,
                    message: "cannot baseline: \(self.configuration.schema).\(self.configuration.historyTable) "
                        + "already records \(applied.count) version(s), up to \(applied.map(\.version).max() ?? 0)")
            }
            try await self.history.insertBaseline(
                version: version, description: description, appliedBy: self.configuration.appliedBy, on: connection)
        }
    }

    /// Records the checksum of every applied file that was edited since, so that ``verify(on:)`` and
    /// ``migrate(on:to:dryRun:progress:)`` accept the file as it is now.
    ///
    /// A deliberate step for a deliberate edit (a comment fixed, a statement made re-runnable): the schema is
    /// not changed and the edited statements do not run again. Each repair is kept in the history row's
    /// `repairs` column (`[{"old_checksum", "new_checksum", "repaired_at", "repaired_by"}, …]`), which this
    /// call adds to an older history table (an idempotent `ADD COLUMN IF NOT EXISTS`, invisible to older
    /// readers, which name their columns). Missing files, unknown versions and out-of-order files are not
    /// repaired: restore the file, or use the right directory.
    ///
    /// ```swift
    /// let repairs = try await migrator.repair(on: connection)
    /// for repair in repairs { print(repair.fileName, repair.oldChecksum ?? "-", "→", repair.newChecksum) }
    /// ```
    /// - Parameters:
    ///   - connection: a direct connection (the migration lock is a session lock).
    ///   - dryRun: only report what would be repaired (reads the history; takes no lock).
    /// - Returns: the repaired (or, for a dry run, repairable) migrations, by version.
    /// - Throws: ``MigrationError`` (a bad file, the lock wait, the history table).
    @discardableResult
    public func repair(on connection: PGConnection, dryRun: Bool = false) async throws -> [MigrationRepair] {
        let migrations = try self.migrations()
        if dryRun {
            return Self.repairs(migrations, try await self.history.read(on: connection))
        }
        return try await self.withSession(on: connection, createHistory: false, progress: nil) { _ in
            let repairs = Self.repairs(migrations, try await self.history.read(on: connection))
            guard !repairs.isEmpty else { return [] }
            try await self.history.addRepairsColumn(on: connection)
            try await connection.withTransaction { connection in
                for repair in repairs {
                    try await self.history.recordRepair(
                        repair, repairedBy: self.configuration.appliedBy, on: connection)
                }
            }
            for repair in repairs {
                self.logger.notice(
                    "recorded the new checksum of an edited applied migration",
                    metadata: [
                        "skyros.migrations.file": "\(repair.fileName)",
                        "skyros.migrations.old_checksum": "\(repair.oldChecksum ?? "none")",
                        "skyros.migrations.new_checksum": "\(repair.newChecksum)",
                    ])
            }
            return repairs
        }
    }

    private static func repairs(_ migrations: [SchemaMigration], _ applied: [AppliedMigration]) -> [MigrationRepair] {
        let files = Dictionary(migrations.map { ($0.version, $0) }, uniquingKeysWith: { first, _ in first })
        return applied.compactMap { row in
            guard !row.isBaseline, let file = files[row.version], file.checksum != row.checksum else { return nil }
            return MigrationRepair(
                version: row.version, fileName: file.fileName, oldChecksum: row.checksum, newChecksum: file.checksum)
        }
    }

    // MARK: Session

    private struct Session: Sendable {
        var serverVersion: Int
        var lockWait: Duration
        /// The server process of the session holding the lock (`pg_backend_pid()`).
        var backendPID: Int32
    }

    /// Throws ``MigrationError/Kind/sessionChanged`` unless `connection`'s statements still run in the server
    /// session `pid`. Behind a transaction-pooling proxy each transaction may run on another server connection:
    /// the lock and `search_path` stay behind, and a migration would run unserialised, in the wrong schema.
    /// Checked before the lock is taken (so a pooler that switches sessions is caught without leaving the lock
    /// behind) and before each migration.
    private static func checkSession(_ pid: Int32, on connection: PGConnection) async throws {
        let current = try await connection.query("SELECT pg_backend_pid()").first?.decode(Int32.self, at: 0)
        guard current == pid else {
            throw MigrationError(
                kind: .sessionChanged,
                message: "the migrator's statements ran in server sessions \(pid) and \(current.map(String.init) ?? "?"): "
                    + "the connection goes through a transaction-pooling proxy (PgBouncer pool_mode = transaction?); "
                    + "migrate over a direct URL (DataStackConfiguration.directConnection, migrate --database-url)")
        }
    }

    /// Takes the migration lock, points `search_path` at the schema and (optionally) creates the history table;
    /// runs `body`; then restores `search_path` and releases the lock on every path.
    private func withSession<R: Sendable>(
        on connection: PGConnection, createHistory: Bool, progress: (@Sendable (MigrationEvent) -> Void)?,
        _ body: (Session) async throws -> R
    ) async throws -> R {
        if await connection.isInTransaction {
            throw MigrationError(
                kind: .invalidArgument, message: "the migrator needs a connection that is not inside a transaction")
        }
        let info: PGRows
        do {
            info = try await connection.query(
                "SELECT current_database(), current_setting('search_path'), current_setting('server_version_num')::int, pg_backend_pid()")
        } catch let error as PGError {
            throw MigrationError(kind: .history, message: "cannot read the session settings: \(error.message)",
                underlying: error)
        }
        guard let row = info.first else {
            throw MigrationError(kind: .history, message: "cannot read the session settings")
        }
        let database = try row.decode(String.self, at: 0)
        let originalSearchPath = try row.decode(String.self, at: 1)
        let serverVersion = Int(try row.decode(Int32.self, at: 2))
        let backendPID = try row.decode(Int32.self, at: 3)
        try await Self.checkSession(backendPID, on: connection)

        let lock = MigrationLock(
            database: database, schema: self.configuration.schema, table: self.configuration.historyTable)
        var reportedWait = false
        let lockWait = try await lock.acquire(
            on: connection, timeout: self.configuration.lockWaitTimeout, logger: self.logger,
            waiting: {
                if !reportedWait {
                    reportedWait = true
                    progress?(.waitingForLock)
                }
            })
        if reportedWait { progress?(.lockAcquired(waited: lockWait)) }
        do {
            try await connection.query(
                "SELECT set_config('search_path', \(quoteIdentifier(self.configuration.schema)), false)")
            if createHistory {
                try await self.history.create(on: connection)
            }
            let session = Session(serverVersion: serverVersion, lockWait: lockWait, backendPID: backendPID)
            try await Self.checkSession(backendPID, on: connection)
            let result = try await body(session)
            await self.endSession(on: connection, lock: lock, searchPath: originalSearchPath)
            return result
        } catch {
            await self.endSession(on: connection, lock: lock, searchPath: originalSearchPath)
            throw error
        }
    }

    /// Ends a session on a connection the caller may keep using: its statements run even in a cancelled task
    /// (a lock left held would make every other process's migrator wait until this connection closes).
    private func endSession(on connection: PGConnection, lock: MigrationLock, searchPath: String) async {
        try? await connection.rollback()
        _ = try? await connection.cleanUp("SELECT set_config('search_path', \(searchPath), false)")
        await lock.release(on: connection)
    }

    static func refusal(_ issues: [MigrationIssue]) -> MigrationError {
        let first = issues[0]
        let message = issues.count == 1
            ? "refusing to migrate: \(first.kind.rawValue)"
            : "refusing to migrate: \(issues.count) problems between the files and the history"
        return MigrationError(
            kind: .refused, message: message, fileName: issues.count == 1 ? first.fileName : nil,
            version: first.version, issues: issues)
    }
}
