/// Compares migration files with the history table. Pure: no database, unit-tested on its own.
enum MigrationPlanner {
    /// Builds the plan for applying pending migrations up to `target` (inclusive; `nil` for all).
    ///
    /// Applied versions newer than every file are tolerated under ``SchemaMigrator/NewerMigrationsPolicy/tolerate``
    /// when these files are a prefix of the history: every file is applied (or at or below the baseline), so
    /// the database is exactly where a newer build of the same history left it. They are then listed in
    /// ``MigrationPlan/newerApplied`` instead of ``MigrationPlan/issues``. An edited file inside the prefix is
    /// still a ``MigrationIssue/Kind/checksumMismatch`` issue, so the migrator still refuses.
    static func plan(
        migrations: [SchemaMigration], applied: [AppliedMigration], target: Int64?, allowOutOfOrder: Bool,
        newerApplied policy: SchemaMigrator.NewerMigrationsPolicy = .tolerate
    ) -> MigrationPlan {
        let appliedByVersion = Dictionary(applied.map { ($0.version, $0) }, uniquingKeysWith: { first, _ in first })
        let baseline = applied.filter(\.isBaseline).map(\.version).max()
        let newestApplied = applied.filter { !$0.isBaseline }.map(\.version).max()
        let newestFile = migrations.map(\.version).max()
        let fileVersions = Set(migrations.map(\.version))

        var issues: [MigrationIssue] = []
        var statuses: [MigrationStatus] = []
        var pending: [SchemaMigration] = []
        var newerApplied: [AppliedMigration] = []
        let filesArePrefix = !migrations.isEmpty && migrations.allSatisfy { migration in
            appliedByVersion[migration.version] != nil || baseline.map { migration.version <= $0 } ?? false
        }

        for row in applied where !row.isBaseline && !fileVersions.contains(row.version) {
            if let newestFile, row.version > newestFile, policy == .tolerate, filesArePrefix {
                newerApplied.append(row)
                statuses.append(
                    MigrationStatus(
                        version: row.version, description: row.description, fileName: row.fileName,
                        appliedAt: row.appliedAt, state: .newerThanFiles))
                continue
            }
            if let newestFile, newestFile > row.version {
                issues.append(
                    MigrationIssue(
                        kind: .missingFile, version: row.version, fileName: row.fileName,
                        message: "version \(row.version) is applied but its file is missing; restore the file "
                            + "(applied migrations must never be deleted)"))
            } else {
                issues.append(
                    MigrationIssue(
                        kind: .unknownAppliedVersion, version: row.version, fileName: row.fileName,
                        message: "version \(row.version) is applied but no file has it: the database is ahead of "
                            + "these migration files (wrong --dir, or an older checkout?)"
                            + (policy == .refuse
                                ? "" : "; tolerated only when every file here is applied, which is not the case")))
            }
            statuses.append(
                MigrationStatus(
                    version: row.version, description: row.description, fileName: row.fileName,
                    appliedAt: row.appliedAt, state: .missingFile))
        }
        for row in applied where row.isBaseline {
            statuses.append(
                MigrationStatus(
                    version: row.version, description: row.description.isEmpty ? "baseline" : row.description,
                    fileName: "", appliedAt: row.appliedAt, state: .baseline))
        }

        for migration in migrations {
            if let row = appliedByVersion[migration.version], !row.isBaseline {
                var state = MigrationStatus.State.applied
                if row.checksum != migration.checksum {
                    state = .checksumMismatch
                    issues.append(
                        MigrationIssue(
                            kind: .checksumMismatch, version: migration.version, fileName: migration.fileName,
                            message: "the file changed after it was applied (checksum \(Self.short(row.checksum)) "
                                + "recorded, \(Self.short(migration.checksum)) on disk); revert the edit and put "
                                + "the change in a new migration"))
                }
                statuses.append(
                    MigrationStatus(
                        version: migration.version, description: migration.description,
                        fileName: migration.fileName, appliedAt: row.appliedAt, state: state))
                continue
            }
            if appliedByVersion[migration.version] != nil { continue }  // the baseline row itself
            if let baseline, migration.version <= baseline {
                statuses.append(
                    MigrationStatus(
                        version: migration.version, description: migration.description,
                        fileName: migration.fileName, appliedAt: nil, state: .belowBaseline))
                continue
            }
            var state = MigrationStatus.State.pending
            if let newestApplied, migration.version < newestApplied {
                state = .outOfOrder
                if !allowOutOfOrder {
                    issues.append(
                        MigrationIssue(
                            kind: .outOfOrder, version: migration.version, fileName: migration.fileName,
                            message: "this new file is older than the newest applied version \(newestApplied); "
                                + "give it a newer version, or pass --allow-out-of-order"))
                }
            }
            statuses.append(
                MigrationStatus(
                    version: migration.version, description: migration.description, fileName: migration.fileName,
                    appliedAt: nil, state: state))
            if target.map({ migration.version <= $0 }) ?? true {
                pending.append(migration)
            }
        }
        statuses.sort { $0.version < $1.version }
        issues.sort { $0.version < $1.version }
        return MigrationPlan(
            migrations: migrations, applied: applied, pending: pending, issues: issues, statuses: statuses,
            newerApplied: newerApplied)
    }

    /// The migrations to revert for `down --steps`: the `steps` newest applied (non-baseline) versions, newest
    /// first, with their files.
    /// - Throws: ``MigrationError`` when a file is missing, changed, or has no down section.
    static func rollback(migrations: [SchemaMigration], applied: [AppliedMigration], steps: Int) throws -> [SchemaMigration] {
        let files = Dictionary(migrations.map { ($0.version, $0) }, uniquingKeysWith: { first, _ in first })
        let rows = applied.filter { !$0.isBaseline }.sorted { $0.version > $1.version }.prefix(steps)
        return try rows.map { row in
            guard let migration = files[row.version] else {
                throw MigrationError(
                    kind: .refused, message: "cannot roll back version \(row.version): its file is missing",
                    fileName: row.fileName, version: row.version)
            }
            guard migration.checksum == row.checksum else {
                throw MigrationError(
                    kind: .refused,
                    message: "cannot roll back: the file changed after it was applied (checksum mismatch)",
                    fileName: migration.fileName, version: migration.version)
            }
            guard migration.isReversible else {
                throw MigrationError(
                    kind: .irreversible,
                    message: "cannot roll back: the migration has no -- migrate:down section",
                    fileName: migration.fileName, version: migration.version)
            }
            return migration
        }
    }

    private static func short(_ checksum: String?) -> String {
        checksum.map { String($0.prefix(12)) } ?? "none"
    }
}
