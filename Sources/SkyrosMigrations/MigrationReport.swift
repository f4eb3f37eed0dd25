import Foundation

/// Which way a migration runs.
public enum MigrationDirection: String, Sendable, Hashable {
    /// Applying the up section.
    case up
    /// Reverting with the down section.
    case down
}

/// What ``SchemaMigrator/migrate(on:to:dryRun:progress:)`` or ``SchemaMigrator/rollback(steps:on:dryRun:progress:)``
/// did (or, for a dry run, would do).
public struct MigrationReport: Sendable {
    /// One migration that ran.
    public struct Step: Sendable, Hashable {
        /// The migration.
        public var migration: SchemaMigration
        /// Up or down.
        public var direction: MigrationDirection
        /// Time spent running its statements and recording it.
        public var duration: Duration
    }

    /// Up for `migrate`, down for `rollback`.
    public var direction: MigrationDirection
    /// The migrations selected to run, in order. For a dry run nothing ran; see ``SchemaMigration/up`` /
    /// ``SchemaMigration/down`` for the SQL.
    public var planned: [SchemaMigration]
    /// The migrations that ran, in order (empty for a dry run).
    public var completed: [Step]
    /// Whether this was a dry run.
    public var isDryRun: Bool
    /// How long the migrator waited for the migration lock.
    public var lockWait: Duration
    /// The highest applied version afterwards (for a dry run: currently), or `nil` for an empty history.
    public var currentVersion: Int64?
    /// Applied versions newer than every file, tolerated because these files are a prefix of the history (a
    /// newer build applied them; see ``SchemaMigrator/NewerMigrationsPolicy``). Empty going down.
    public var newerApplied: [AppliedMigration] = []
}

/// Progress reported while the migrator works (the `migrate` tool prints one line per migration).
public enum MigrationEvent: Sendable {
    /// Another migrator holds the lock; this one polls until it is free or the wait times out.
    case waitingForLock
    /// The lock was acquired after waiting this long.
    case lockAcquired(waited: Duration)
    /// A migration is about to run.
    case started(SchemaMigration, MigrationDirection)
    /// A migration ran and was recorded (or, going down, its record was removed).
    case finished(MigrationReport.Step)
}

/// The state of one version, as shown by `migrate status`.
public struct MigrationStatus: Sendable, Hashable {
    /// The state of a version.
    public enum State: String, Sendable, Hashable {
        /// Applied, and the file is unchanged.
        case applied
        /// Not applied yet.
        case pending
        /// Not applied, and older than the newest applied migration (`up` refuses it without allowOutOfOrder).
        case outOfOrder = "pending (out of order)"
        /// Applied, but the file changed since.
        case checksumMismatch = "applied, file changed"
        /// Applied, but no file has this version.
        case missingFile = "applied, file missing"
        /// Applied by a newer build: newer than every file, and every file is applied (tolerated under
        /// ``SchemaMigrator/NewerMigrationsPolicy/tolerate``).
        case newerThanFiles = "applied, newer than these files"
        /// The baseline row.
        case baseline
        /// A file at or below the baseline version: treated as already present in the database.
        case belowBaseline = "below baseline"
    }

    /// The version.
    public var version: Int64
    /// The description (from the file, or from the history when the file is missing).
    public var description: String
    /// The file name (from the history when the file is missing).
    public var fileName: String
    /// When it was applied, if it was.
    public var appliedAt: Date?
    /// The state.
    public var state: State
}

/// The result of comparing the files with the history, before anything runs.
public struct MigrationPlan: Sendable {
    /// Every migration file, by version.
    public var migrations: [SchemaMigration]
    /// The history rows, by version.
    public var applied: [AppliedMigration]
    /// The migrations `up` would apply, in order.
    public var pending: [SchemaMigration]
    /// Disagreements between files and history (``SchemaMigrator/migrate(on:to:dryRun:progress:)`` refuses when not
    /// empty).
    public var issues: [MigrationIssue]
    /// Each version's state, for display.
    public var statuses: [MigrationStatus]
    /// Applied versions newer than every file that are tolerated (not in ``issues``): these files are a prefix of
    /// the history, as during a rolling deploy when a newer build migrated first.
    public var newerApplied: [AppliedMigration]
}

/// An applied migration whose recorded checksum ``SchemaMigrator/repair(on:dryRun:)`` replaced with its file's.
public struct MigrationRepair: Sendable, Hashable {
    /// The version.
    public var version: Int64
    /// The file, as it is now.
    public var fileName: String
    /// The checksum recorded when it was applied (or at the previous repair).
    public var oldChecksum: String?
    /// The checksum of the file on disk, now recorded.
    public var newChecksum: String
}
