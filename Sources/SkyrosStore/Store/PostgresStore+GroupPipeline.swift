import Foundation
import SkyrosPostgres

/// How many group commits a ``PostgresStore`` sent as one pipeline, and how many took the savepoint path
/// (an operation that cannot be pipelined, or a set that failed).
package struct GroupCommitPaths: Sendable, Equatable {
    package var onePipeline = 0
    package var savepoints = 0
}

extension PostgresStore {
    /// Inserts merged into one statement stay below this many rows (and below the bind limit).
    static let mergedInsertRowLimit = 1_000
    /// Merged inserts of up to this many rows return their version (`RETURNING xmin`); larger ones read the
    /// transaction's id with one query per group.
    static let returnedVersionRowLimit = 8

    /// A group ready to be sent as one pipeline (see ``prepareGroupPipeline(_:hook:)``).
    package struct PreparedGroup: Sendable {
        /// The sets' operations, in order.
        fileprivate let sets: [[GroupOperation]]
        fileprivate let statements: [GroupStatement]
        fileprivate let queries: [PGQuery]
        /// The index of the query reading the transaction's id, when a merged insert needs it as its rows' version.
        fileprivate let xidQuery: Int?
    }

    /// The version of the rows a transaction inserts when their entity has no version column: their `xmin`,
    /// the top-level transaction's id (no savepoints on this path). One query per group instead of
    /// `RETURNING xmin` on every inserted row.
    static let transactionIDQuery = PGQuery(unsafeSQL: "SELECT txid_current() % 4294967296")

    /// Builds a group to be sent as one pipeline — its writes (consecutive inserts into the same table merged
    /// into multi-row `INSERT`s, across sets), the commit-log row, the hook's statement — so the whole group
    /// costs one round trip (see ``GroupOperation``). No `BEGIN` or `COMMIT`: a pipeline's statements up to its
    /// sync are one implicit transaction, which commits at the sync only if every statement succeeded (an error
    /// at that commit, such as a deferred constraint, fails the pipeline like a statement's). Built apart from
    /// sending: the commit queue builds the next group while the current one is on the server.
    /// A set of plain inserts encoded when queued (``PlannedSet/Writes/inserts(_:changes:)``) goes in as its
    /// operations, without converting its change set.
    /// - Returns: `nil` when an operation cannot be pipelined, a set failed to plan, or a set takes a version an
    ///   earlier set of the group writes (known only once it ran): the savepoint path runs the group.
    package func prepareGroupPipeline(_ plan: GroupPlan, hook: (any CommitTransactionHook)?) -> PreparedGroup? {
        guard !plan.dependsOnItself else { return nil }
        let ids = plan.ids
        var sets: [[GroupOperation]] = []
        sets.reserveCapacity(ids.count)
        for index in ids.indices {
            var operations: [GroupOperation]
            if let made = plan.sets[index].directOperations {
                operations = made
            } else {
                guard let changes = try? plan.changeSet(at: index, after: []) else { return nil }
                if let expected = changes.expectedGeneration, expected != self.generation { return nil }
                operations = []
                operations.reserveCapacity(changes.operations.count)
                for operation in changes.operations {
                    guard
                        let groupOperation = try? operation.change.groupOperation(schema: self.schema, copyThreshold: self.copyThreshold)
                    else { return nil }
                    operations.append(groupOperation)
                }
            }
            // Too large for one statement: the savepoint path splits it.
            for case .insert(let insert) in operations where insert.rows.count * insert.columnCount > PostgresWriteContext.maximumBinds {
                return nil
            }
            sets.append(operations)
        }
        let statements = Self.groupStatements(sets)
        let hookStatement: PGQuery?
        let record: PGQuery?
        do {
            hookStatement = try hook?.pipelinedStatement(announcing: sets.flatMap { $0.flatMap(\.announced) })
            record = try self.recordCommitted(ids, attempted: ids)
        } catch {
            return nil
        }
        var queries: [PGQuery] = []
        queries.reserveCapacity(statements.count + 3)
        for statement in statements { queries.append(statement.query) }
        var xidQuery: Int?
        if statements.contains(where: \.needsTransactionID) {
            xidQuery = queries.count
            queries.append(Self.transactionIDQuery)
        }
        if let record { queries.append(record) }
        if let hookStatement { queries.append(hookStatement) }
        return PreparedGroup(sets: sets, statements: statements, queries: queries, xidQuery: xidQuery)
    }

    /// Sends a prepared group.
    /// - Returns: the committed group, its rows not yet mapped to results (see ``SentGroup``); `nil` when the
    ///   pipeline failed for a reason confined to a set (a constraint, a guard): nothing was committed, and the
    ///   savepoint path (``applyGroup(_:hook:prepared:)``) runs the group again, isolating the failing set.
    /// - Throws: errors that stop the group (``stopsGroup(_:)``): nothing of it is known to be committed; and a
    ///   constraint that failed at the commit (``failedAtCommit(_:)``): nothing was committed, and the savepoint
    ///   path would fail at its own `COMMIT` the same way.
    func send(_ prepared: PreparedGroup) async throws -> SentGroup? {
        let rows: [PGRows]
        do {
            rows = try await self.withCommitLease { connection in
                do {
                    return try await connection.pipeline(prepared.queries)
                } catch {
                    // The pipeline's sync ended its implicit transaction, unless the connection broke first.
                    try? await connection.rollback()
                    throw error
                }
            }
        } catch {
            if Self.stopsGroup(error) || Self.failedAtCommit(error) { throw error }
            return nil
        }
        self.groupCommitPaths.withLock { $0.onePipeline += 1 }
        try await self.runFaultAfterCommit()
        return SentGroup(prepared: prepared, rows: rows)
    }

    /// A group committed as one pipeline, with the rows its statements returned. Mapping them to each set's
    /// result is left to whoever reads ``results()``: the commit queue does it while settling the group, beside
    /// the next group's round trip, instead of on the connection's thread between two groups.
    package struct SentGroup: Sendable {
        fileprivate let prepared: PreparedGroup
        fileprivate let rows: [PGRows]

        /// One result per set. Nothing here may fail a set (it is committed): a version that cannot be read
        /// stays unknown (the stack then reads the row again rather than caching it).
        func results() -> [Result<ChangeSetResult, any Error>] {
            let (sets, statements, rows) = (self.prepared.sets, self.prepared.statements, self.rows)
            var changes: [[[RowChange]]] = sets.map { Array(repeating: [], count: $0.count) }
            let xmin = self.prepared.xidQuery.flatMap { (try? rows[$0].first?.decode(Int64.self, at: 0)) ?? nil }
            for (offset, statement) in statements.enumerated() {
                switch statement.kind {
                case .merged(let members, let version):
                    // A version column starts at 1; otherwise the version is the transaction's id (`xmin`), shared
                    // by every row it inserted (no savepoints here).
                    let returned = version == .returned ? (try? rows[offset].first?.decode(Int64.self, at: 0)) ?? nil : nil
                    for (set, operation) in members {
                        guard case .insert(let insert) = sets[set][operation] else { continue }
                        changes[set][operation] = insert.changes(version: insert.fixedVersion ?? returned ?? xmin)
                    }
                case .single(let set, let operation, let decode):
                    changes[set][operation] = (try? decode(rows[offset])) ?? sets[set][operation].announced
                }
            }
            return changes.map { .success(ChangeSetResult(operations: $0)) }
        }
    }

    /// One statement of a pipelined group and how its rows map back to the sets' operations.
    struct GroupStatement: Sendable {
        enum Kind {
            /// A multi-row `INSERT` carrying the rows of these (set, operation) pairs.
            /// `version`: where the rows' version comes from.
            case merged(members: [(set: Int, operation: Int)], version: MergedVersion)
            case single(set: Int, operation: Int, decode: @Sendable (PGRows) throws -> [RowChange])
        }

        var query: PGQuery
        var kind: Kind

        /// Where a merged insert's rows get their version.
        enum MergedVersion: Sendable {
            /// The entity's version column: 1 for a new row.
            case fixed
            /// `RETURNING xmin` (a few rows: cheaper than another statement).
            case returned
            /// The transaction's id, read once per group (many rows: one query instead of a row back per row).
            case transactionID
        }

        /// A merged insert of rows whose version is the transaction's id, read by a query of its own.
        var needsTransactionID: Bool {
            if case .merged(_, .transactionID) = self.kind { return true }
            return false
        }
    }

    /// The group's statements in order: consecutive inserts with the same target merged (under the row and
    /// bind limits), every other operation its own statement.
    static func groupStatements(_ sets: [[GroupOperation]]) -> [GroupStatement] {
        var statements: [GroupStatement] = []
        var sql = ""
        var binds: [PGValue] = []
        var members: [(set: Int, operation: Int)] = []
        var rowCount = 0
        var current: MergeableInsert?

        func flush() {
            guard let insert = current else { return }
            let version: GroupStatement.MergedVersion =
                insert.fixedVersion != nil ? .fixed : rowCount <= Self.returnedVersionRowLimit ? .returned : .transactionID
            statements.append(
                GroupStatement(
                    query: PGQuery(unsafeSQL: version == .returned ? sql + " RETURNING xmin::text::int8" : sql, binds: binds),
                    kind: .merged(members: members, version: version)))
            sql = ""
            binds = []
            members = []
            rowCount = 0
            current = nil
        }

        for (setIndex, set) in sets.enumerated() {
            for (operationIndex, operation) in set.enumerated() {
                switch operation {
                case .nothing:
                    continue
                case .statement(let statement, _):
                    flush()
                    statements.append(
                        GroupStatement(
                            query: statement.query, kind: .single(set: setIndex, operation: operationIndex, decode: statement.decode)))
                case .insert(let insert):
                    if insert.rows.isEmpty { continue }
                    if let open = current,
                        !open.sharesTable(with: insert)
                            || rowCount + insert.rows.count > Self.mergedInsertRowLimit
                            || binds.count + insert.rows.count * insert.columnCount > PostgresWriteContext.maximumBinds
                    {
                        flush()
                    }
                    if current == nil {
                        current = insert
                        sql = insert.statementPrefix
                    }
                    for row in insert.rows {
                        sql += rowCount == 0 ? "(" : ", ("
                        for (column, value) in row.enumerated() {
                            binds.append(value)
                            sql += column == 0 ? "$\(binds.count)" : ", $\(binds.count)"
                        }
                        sql += insert.rowSuffix + ")"
                        rowCount += 1
                    }
                    members.append((setIndex, operationIndex))
                }
            }
        }
        flush()
        return statements
    }
}
