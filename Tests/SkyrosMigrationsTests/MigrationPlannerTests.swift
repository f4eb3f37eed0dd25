import Foundation
import Testing

@testable import SkyrosMigrations

@Suite("Planner")
struct MigrationPlannerTests {
    let files: [SchemaMigration]

    init() throws {
        self.files = try (1...4).map { version in
            try SchemaMigration(
                version: Int64(version), description: "step \(version)", up: "CREATE TABLE t\(version) (id int);",
                down: version == 2 ? nil : "DROP TABLE t\(version);")
        }
    }

    func applied(_ migration: SchemaMigration, checksum: String? = nil) -> AppliedMigration {
        AppliedMigration(
            version: migration.version, description: migration.description, fileName: migration.fileName,
            checksum: checksum ?? migration.checksum, isBaseline: false, appliedAt: Date(),
            executionTime: .milliseconds(1), appliedBy: "test")
    }

    @Test func freshDatabasePlansEverythingInOrder() {
        let plan = MigrationPlanner.plan(migrations: self.files, applied: [], target: nil, allowOutOfOrder: false)
        #expect(plan.pending.map(\.version) == [1, 2, 3, 4])
        #expect(plan.issues.isEmpty)
        #expect(plan.statuses.map(\.state) == [.pending, .pending, .pending, .pending])
    }

    @Test func targetStopsAtVersion() {
        let plan = MigrationPlanner.plan(
            migrations: self.files, applied: [self.applied(self.files[0])], target: 3, allowOutOfOrder: false)
        #expect(plan.pending.map(\.version) == [2, 3])
    }

    @Test func editedAppliedFileIsAnIssue() {
        let plan = MigrationPlanner.plan(
            migrations: self.files, applied: [self.applied(self.files[0], checksum: "0000")], target: nil,
            allowOutOfOrder: false)
        #expect(plan.issues.map(\.kind) == [.checksumMismatch])
        #expect(plan.issues.first?.fileName == "1_step_1.sql")
        #expect(plan.statuses.first?.state == .checksumMismatch)
    }

    @Test func deletedAppliedFileAndUnknownVersionAreIssues() {
        var gone = self.applied(self.files[0])
        gone.version = 0
        gone.fileName = "0_gone.sql"
        var ahead = self.applied(self.files[0])
        ahead.version = 99
        ahead.fileName = "99_future.sql"
        let plan = MigrationPlanner.plan(
            migrations: self.files, applied: [gone, ahead], target: nil, allowOutOfOrder: true)
        #expect(Set(plan.issues.map(\.kind)) == [.missingFile, .unknownAppliedVersion])
        #expect(plan.issues.map(\.fileName) == ["0_gone.sql", "99_future.sql"])
    }

    @Test func olderNewFileIsRefusedUnlessAllowed() {
        let applied = [self.applied(self.files[0]), self.applied(self.files[2])]
        let strict = MigrationPlanner.plan(migrations: self.files, applied: applied, target: nil, allowOutOfOrder: false)
        #expect(strict.issues.map(\.kind) == [.outOfOrder])
        #expect(strict.issues.first?.version == 2)
        let lenient = MigrationPlanner.plan(migrations: self.files, applied: applied, target: nil, allowOutOfOrder: true)
        #expect(lenient.issues.isEmpty)
        #expect(lenient.pending.map(\.version) == [2, 4])
    }

    @Test func baselineHidesOlderFiles() {
        let baseline = AppliedMigration(
            version: 2, description: "baseline", fileName: "", checksum: nil, isBaseline: true, appliedAt: Date(),
            executionTime: .zero, appliedBy: "test")
        let plan = MigrationPlanner.plan(migrations: self.files, applied: [baseline], target: nil, allowOutOfOrder: false)
        #expect(plan.pending.map(\.version) == [3, 4])
        #expect(plan.issues.isEmpty)
        #expect(plan.statuses.map(\.state) == [.belowBaseline, .baseline, .pending, .pending])
    }

    @Test func rollbackTakesNewestFirstAndRefusesIrreversible() throws {
        let applied = self.files.prefix(3).map { self.applied($0) }
        let one = try MigrationPlanner.rollback(migrations: self.files, applied: Array(applied), steps: 1)
        #expect(one.map(\.version) == [3])
        let error = #expect(throws: MigrationError.self) {
            try MigrationPlanner.rollback(migrations: self.files, applied: Array(applied), steps: 2)
        }
        #expect(error?.kind == .irreversible)
        #expect(error?.fileName == "2_step_2.sql")
    }

    /// An older build during a rolling deploy: every file applied, the history goes further.
    @Test func newerAppliedVersionsAreToleratedWhenTheFilesAreAPrefix() {
        let applied = self.files.map { self.applied($0) }
        let older = Array(self.files.prefix(3))
        let plan = MigrationPlanner.plan(migrations: older, applied: applied, target: nil, allowOutOfOrder: false)
        #expect(plan.issues.isEmpty)
        #expect(plan.pending.isEmpty)
        #expect(plan.newerApplied.map(\.version) == [4])
        #expect(plan.statuses.map(\.state) == [.applied, .applied, .applied, .newerThanFiles])

        let refused = MigrationPlanner.plan(
            migrations: older, applied: applied, target: nil, allowOutOfOrder: false, newerApplied: .refuse)
        #expect(refused.issues.map(\.kind) == [.unknownAppliedVersion])
        #expect(refused.newerApplied.isEmpty)
    }

    @Test func newerAppliedVersionsAreRefusedWhenTheFilesAreNotAPrefix() {
        // File 3 was never applied, yet 4 was: these files are not where the history came from.
        let applied = [self.applied(self.files[0]), self.applied(self.files[1]), self.applied(self.files[3])]
        let plan = MigrationPlanner.plan(
            migrations: Array(self.files.prefix(3)), applied: applied, target: nil, allowOutOfOrder: true)
        #expect(plan.issues.map(\.kind) == [.unknownAppliedVersion])
        #expect(plan.newerApplied.isEmpty)
        // No files at all is no prefix (a wrong, empty directory).
        let none = MigrationPlanner.plan(migrations: [], applied: applied, target: nil, allowOutOfOrder: false)
        #expect(Set(none.issues.map(\.kind)) == [.unknownAppliedVersion])
    }

    @Test func anEditInsideThePrefixIsStillAnIssue() {
        var applied = self.files.map { self.applied($0) }
        applied[1].checksum = "0000"
        let plan = MigrationPlanner.plan(
            migrations: Array(self.files.prefix(3)), applied: applied, target: nil, allowOutOfOrder: false)
        #expect(plan.issues.map(\.kind) == [.checksumMismatch])
        #expect(plan.issues.first?.fileName == "2_step_2.sql")
    }
}
