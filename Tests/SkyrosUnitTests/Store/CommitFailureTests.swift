@testable import SkyrosStore
import SkyrosPostgres
import Testing

/// How the PostgreSQL store reads a failed group's error (no server: the errors are built by hand).
@Suite struct CommitFailureTests {
    /// A commit-log conflict on the savepoint path (an earlier attempt of the same sets committed) is not a
    /// deferred constraint: the sets are not committed again one by one.
    @Test func aCommitLogConflictIsNotTakenForADeferredConstraint() {
        let conflict = PGError(
            kind: .uniqueViolation, sqlState: .uniqueViolation, message: "duplicate key", table: PostgresStore.commitLogTable,
            constraint: "skyros_commit_groups_pkey")
        #expect(!PostgresStore.failedAtCommit(conflict))
        let deferred = PGError(
            kind: .uniqueViolation, sqlState: .uniqueViolation, message: "duplicate key", table: "stack_notes",
            constraint: "stack_notes_title_once")
        #expect(PostgresStore.failedAtCommit(deferred))
        var indexed = deferred
        indexed.statementIndex = 2
        #expect(!PostgresStore.failedAtCommit(indexed))
    }
}
