import Foundation
import SkyrosPostgres

/// Work added to every group-commit transaction of a stack, after its change sets and before `COMMIT` (a
/// change log, one `pg_notify`). Throwing aborts the whole group: a transient `PGError` is retried
/// with the group, any other error fails every set of it.
package protocol CommitTransactionHook: Sendable {
    /// Called once per group transaction with the results of the sets that succeeded, in commit order.
    func willCommit(batch: [ChangeSetResult], on connection: PGConnection) async throws

    /// The same work as one statement, for a group sent as a single pipeline, given the rows the group writes
    /// (a version is `nil` where only the server knows it yet); `nil` when there is nothing to do. Throwing
    /// sends the group down the savepoint path, which calls ``willCommit(batch:on:)`` instead.
    func pipelinedStatement(announcing changes: [RowChange]) throws -> PGQuery?

    /// The tables among `tables` that need ``prepare(tables:)`` before a transaction writes them (none by
    /// default).
    func tablesNeedingPreparation(_ tables: Set<String>) -> Set<String>

    /// Readies `tables` before a transaction writes them (the change feed installs the capture on a table this
    /// stack writes for the first time). Throwing fails the writes.
    func prepare(tables: Set<String>) async throws
}

extension CommitTransactionHook {
    package func tablesNeedingPreparation(_ tables: Set<String>) -> Set<String> { [] }
    package func prepare(tables: Set<String>) async throws {}
}

extension PostgresStore {
    /// The idempotency log: one row per committed group transaction, written in that transaction — the range of
    /// commit ids it covers and the ids inside that range whose sets failed (rolled back to their savepoint).
    /// A stack's commit ids are consecutive in queue order (``UUID/init(commitPrefix:sequence:)``), so a group
    /// needs one row however many sets it holds (one row per set was a quarter of the server's work per queued
    /// write).
    static let commitLogTable = "skyros_commit_groups"

    var quotedCommitLog: String {
        if let schema = self.schema { return "\(quoteIdentifier(schema)).\(quoteIdentifier(Self.commitLogTable))" }
        return quoteIdentifier(Self.commitLogTable)
    }

    /// Creates the commit log when missing and prunes entries older than a week. Serialised by an advisory lock:
    /// several processes start at once, and concurrent `CREATE TABLE IF NOT EXISTS` can still fail (on the
    /// table's row type, `42710`) for all but one of them.
    package func createCommitLogIfNeeded() async throws {
        let table = self.quotedCommitLog
        try await self.pool.withTransaction { connection in
            _ = try await connection.query("SELECT pg_advisory_xact_lock(hashtext(\(table)))")
            _ = try await connection.execute(script: """
                CREATE TABLE IF NOT EXISTS \(table) (first_id uuid PRIMARY KEY, last_id uuid NOT NULL, \
                failed uuid[] NOT NULL DEFAULT '{}', committed_at timestamptz NOT NULL DEFAULT now());
                DELETE FROM \(table) WHERE committed_at < now() - interval '7 days'
                """)
        }
    }

    /// The statement recording that the sets `committed` of a group attempt whose sets were `attempted` (both in
    /// queue order) commit with the running transaction; `nil` when none did.
    func recordCommitted(_ committed: [UUID], attempted: [UUID]) throws -> PGQuery? {
        guard let first = committed.first, let last = committed.last else { return nil }
        if committed.count == attempted.count {
            return PGQuery(
                unsafeSQL: "INSERT INTO \(self.quotedCommitLog) (first_id, last_id) VALUES ($1, $2)",
                binds: [try PGValue(first), try PGValue(last)])
        }
        let succeeded = Set(committed)
        let failed = attempted.filter {
            !succeeded.contains($0) && $0.commitSequence > first.commitSequence && $0.commitSequence < last.commitSequence
        }
        return PGQuery(
            unsafeSQL: "INSERT INTO \(self.quotedCommitLog) (first_id, last_id, failed) VALUES ($1, $2, $3::uuid[])",
            binds: [try PGValue(first), try PGValue(last), try PGValue(failed)])
    }

    /// Applies change sets in one transaction, each under its own savepoint, and records the id of every set
    /// that succeeded in the commit log in the same transaction.
    ///
    /// - Parameters:
    ///   - plan: the sets, in order, with their commit ids. A set planned as failed fails alone; a set's versions
    ///     that come from earlier sets are filled in once those ran.
    ///   - hook: runs after the sets, before `COMMIT`.
    ///   - prepared: the group's pipeline when it was built ahead (``prepareGroupPipeline(_:hook:)``).
    /// - Returns: one result per set (a group sent as one pipeline maps its rows to them when they are read); a
    ///   failed set was rolled back alone.
    /// - Throws: errors that stop the whole group (connection lost, a failing hook, `COMMIT` failing); then
    ///   nothing of the group is known to be committed: ask ``committedIDs(_:since:)``. A deferred constraint
    ///   failing at the commit (``failedAtCommit(_:)``) is thrown straight from the pipeline: the savepoint path
    ///   cannot isolate it.
    package func applyGroup(
        _ plan: GroupPlan, hook: (any CommitTransactionHook)?, prepared: PreparedGroup? = nil
    ) async throws -> GroupOutcome {
        let ids = plan.ids
        if let group = prepared ?? self.prepareGroupPipeline(plan, hook: hook),
            let sent = try await self.send(group)
        {
            return .sent(sent)
        }
        self.groupCommitPaths.withLock { $0.savepoints += 1 }
        let results = try await self.withCommitLease { leased in
            try await leased.withTransaction { connection in
                var results: [Result<ChangeSetResult, any Error>] = []
                results.reserveCapacity(ids.count)
                var committed: [UUID] = []
                // The savepoint of a set that succeeded is released together with the next SAVEPOINT (one round
                // trip); the last one stays open until COMMIT, which commits it with the rest.
                var releasePending = false
                // Consecutive sets made only of pipelinable statements, not yet sent.
                var segment: [(index: Int, changes: ChangeSet, statements: [[PipelinedStatement]])] = []

                /// One set under its own savepoint, its statements one by one.
                func applyAlone(_ index: Int, _ changes: ChangeSet) async throws {
                    _ = try await connection.execute(
                        script: releasePending
                            ? "RELEASE SAVEPOINT skyros_change_set; SAVEPOINT skyros_change_set" : "SAVEPOINT skyros_change_set")
                    releasePending = false
                    do {
                        let result = try await self.apply(changes, on: connection)
                        releasePending = true
                        results.append(.success(result))
                        committed.append(ids[index])
                    } catch {
                        if Self.stopsGroup(error) { throw error }
                        _ = try await connection.execute(
                            script: "ROLLBACK TO SAVEPOINT skyros_change_set; RELEASE SAVEPOINT skyros_change_set")
                        results.append(.failure(error))
                    }
                }

                /// The pending segment in one pipeline under one savepoint; when a statement fails, the segment is
                /// rolled back and its sets are applied one by one, each under its own savepoint.
                func sendSegment() async throws {
                    guard !segment.isEmpty else { return }
                    let sets = segment
                    segment = []
                    _ = try await connection.execute(
                        script: releasePending
                            ? "RELEASE SAVEPOINT skyros_change_set; SAVEPOINT skyros_segment" : "SAVEPOINT skyros_segment")
                    releasePending = false
                    var queries = sets.flatMap { $0.statements.flatMap { $0.map(\.query) } }
                    queries.append(PGQuery(unsafeSQL: "RELEASE SAVEPOINT skyros_segment"))
                    let rows: [PGRows]
                    do {
                        rows = try await connection.pipeline(queries)
                    } catch {
                        if Self.stopsGroup(error) { throw error }
                        _ = try await connection.execute(script: "ROLLBACK TO SAVEPOINT skyros_segment; RELEASE SAVEPOINT skyros_segment")
                        for set in sets { try await applyAlone(set.index, set.changes) }
                        return
                    }
                    var cursor = 0
                    for set in sets {
                        var operations: [[RowChange]] = []
                        for statements in set.statements {
                            var changes: [RowChange] = []
                            for statement in statements {
                                changes += try statement.decode(rows[cursor])
                                cursor += 1
                            }
                            operations.append(changes)
                        }
                        results.append(.success(ChangeSetResult(operations: operations)))
                        committed.append(ids[set.index])
                    }
                }

                for index in ids.indices {
                    // Its versions may come from sets of the unsent segment: they run first.
                    if plan.setsNeeded(before: index) > results.count { try await sendSegment() }
                    let changes: ChangeSet
                    do {
                        changes = try plan.changeSet(at: index, after: results)
                    } catch {
                        results.append(.failure(error))
                        continue
                    }
                    if let statements = self.pipelinedStatements(changes, on: connection) {
                        segment.append((index, changes, statements))
                        continue
                    }
                    try await sendSegment()
                    try await applyAlone(index, changes)
                }
                try await sendSegment()
                if let record = try self.recordCommitted(committed, attempted: ids) {
                    _ = try await connection.query(record)
                }
                if let hook {
                    let succeeded = results.compactMap { try? $0.get() }
                    try await hook.willCommit(batch: succeeded, on: connection)
                }
                return results
            }
        }
        try await self.runFaultAfterCommit()
        return .results(results)
    }

    /// A set's statements per operation when every operation pipelines; `nil` otherwise (or when the set
    /// would fail before reaching the server: it then fails on its own, with its error).
    private func pipelinedStatements(_ changes: ChangeSet, on connection: PGConnection) -> [[PipelinedStatement]]? {
        if let expected = changes.expectedGeneration, expected != self.generation { return nil }
        let context = PostgresWriteContext(connection: connection, schema: self.schema, copyThreshold: self.copyThreshold)
        var statements: [[PipelinedStatement]] = []
        for operation in changes.operations {
            guard let statement = try? operation.change.pipelined(on: context) else { return nil }
            statements.append([statement])
        }
        return statements
    }

    /// The ids among `ids` whose change sets are committed (after an ambiguous failure of their group).
    /// `first` is the first id of the queued group they belong to: every attempt at it recorded a range inside
    /// the group, so the log is searched from there (an index range scan of at most a group's attempts).
    package func committedIDs(_ ids: [UUID], since first: UUID) async throws -> Set<UUID> {
        if ids.isEmpty { return [] }
        let rows = try await self.withCommitLease { connection in
            try await connection.query(
                PGQuery(
                    unsafeSQL: """
                        SELECT x.id FROM unnest($1::uuid[]) AS x(id) WHERE EXISTS (
                            SELECT 1 FROM \(self.quotedCommitLog) AS g
                            WHERE g.first_id BETWEEN $2 AND x.id AND g.last_id >= x.id AND x.id <> ALL (g.failed))
                        """,
                    binds: [try PGValue(ids), try PGValue(first)]))
        }
        return Set(try rows.map { try $0.decode(UUID.self, at: 0) })
    }

    /// Whether a group's transaction failed at its commit, after every statement succeeded: a
    /// `DEFERRABLE INITIALLY DEFERRED` constraint (SQLSTATE class 23), checked only then. Nothing of the group was
    /// committed, and no savepoint tells which set broke it (they were all released): the commit queue commits
    /// the group's sets one by one instead, so that only the sets that break it fail.
    ///
    /// Errors of Skyros's own tables are not such a failure: on the savepoint path the commit-log row is its own
    /// statement, with no index either, and its primary key conflicting means an earlier attempt of these sets
    /// committed (they must not be applied again one by one).
    package static func failedAtCommit(_ error: any Error) -> Bool {
        guard let error = error as? PGError, error.statementIndex == nil,
            error.sqlState ~= .integrityConstraintViolation
        else { return false }
        return !Self.ownTables.contains(error.table ?? "")
    }

    /// The tables Skyros writes in every group transaction besides the sets' own.
    private static let ownTables: Set<String> = [commitLogTable, changeLogTable, changeLogStateTable]

    /// The change log's tables (written by the stack's change feed in every group transaction).
    package static let changeLogTable = "skyros_change_log"
    package static let changeLogStateTable = "skyros_change_log_state"

    /// Whether an error inside a set stops the whole group (the transaction is unusable or the failure is
    /// transient and the group must be retried).
    static func stopsGroup(_ error: any Error) -> Bool {
        guard let error = error as? PGError else { return false }
        return error.isTransient || error.kind == .connectionClosed
    }
}
