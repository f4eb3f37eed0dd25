import Foundation
import SkyrosPostgres

/// What a stack's commit queue needs of a store: the seam between the queue (SkyrosStack) and the stores.
///
/// The queue commits groups of change sets in order. It plans each group as data, a ``GroupPlan`` (what each
/// set writes and in which order, which expected versions come from earlier sets of the group), and each store
/// interprets the plan. PostgreSQL sends a group as one transaction (one pipeline, or a savepoint per set), records its commit ids in a commit log so that a retry after a lost reply applies
/// nothing twice, and lets the queue's drain hold one connection between groups. The in-memory store applies the
/// sets one after another and has no commit log, no connection and nothing to prepare ahead: its
/// implementations say so (`nil`, `false`, or running the body directly).
package protocol GroupCommitStore: Store {
    /// Commits one group as `plan` says: its sets in order, each committed or failed as a whole; a set's
    /// versions that come from earlier sets of the group (``GroupPlan/changeSet(at:after:)``) are filled in once
    /// those ran. `prepared`: the group built ahead by ``prepareGroup(_:hook:)``.
    /// - Throws: errors that stop the whole group (on PostgreSQL: connection lost, `COMMIT` failing); the
    ///   outcome of each set is otherwise in the returned ``GroupOutcome``.
    func commitGroup(_ plan: GroupPlan, hook: (any CommitTransactionHook)?, prepared: PreparedGroup?) async throws -> GroupOutcome

    /// Builds a group ahead, while the group before it is on the server; `nil` when it cannot (a set takes a
    /// version an earlier set of the group writes, an operation that cannot be pipelined, or a store that
    /// sends nothing).
    func prepareGroup(_ plan: GroupPlan, hook: (any CommitTransactionHook)?) -> PreparedGroup?

    /// Which of `ids` committed (the commit log, read after an attempt whose outcome is unknown). A store that
    /// never loses an outcome (in memory) has none to report.
    func committedIDs(_ ids: [UUID], since first: UUID) async throws -> Set<UUID>

    /// Whether `error` is a deferred constraint that failed the group's `COMMIT` (its sets are then committed
    /// again one by one, so that only the sets that break it fail).
    func failedAtCommit(_ error: any Error) -> Bool

    /// The operation that inserts `rows` of one entity as a set of plain inserts, when the store takes such a
    /// set straight from the values encoded at enqueue (`make` builds it for the store's schema); `nil` to have
    /// the set built as a ``ChangeSet``.
    func directInsert(rows: Int, make: (_ schema: String?) throws -> MergeableInsert) -> [GroupOperation]?

    /// ``Store/findOrCreate(_:)``, announcing a row it creates through `hook` in the creating transaction.
    func findOrCreate<T: Entity>(_ value: T, announcing hook: (any CommitTransactionHook)?) async throws
        -> (value: Versioned<T>, created: Bool)

    /// Runs a drain of the commit queue, holding one connection for it when the store has connections (its
    /// thread is then the task's executor). `leased`: one ``leaseIdleConnection()`` gave. The body gets
    /// whether to hand the connection back between two groups (another task waits for one), and whether it
    /// may linger on the connection's thread for the next set.
    func withDrainConnection(leased: PGConnection?, _ body: (_ handOver: () -> Bool, _ lingers: Bool) async -> Void) async

    /// Whether a durable write starts a drain before its set is queued (the store has connections to lease
    /// meanwhile).
    var drainsAhead: Bool { get }

    /// An idle connection leased at once for a drain about to start, or `nil`.
    func leaseIdleConnection() -> PGConnection?

    /// The row `id` of `type` read through `session` (a listener's, on its thread) as the store reads it;
    /// `nil` when it does not exist, fails to read or decode, or the store has no sessions.
    func readAgain<T: Entity>(_ type: T.Type, id: PGValue, on session: ListenerSession) -> Versioned<T>?

    /// `count` new ids from the sequence of `T`'s ``DatabaseGenerated/identity`` key, in one round trip
    /// (PostgreSQL: `nextval` of the column's sequence, `count` times in one statement).
    func allocateIdentities<T: Entity>(_ type: T.Type, count: Int) async throws -> [Int64]
}

extension PostgresStore: GroupCommitStore {
    package func allocateIdentities<T: Entity>(_ type: T.Type, count: Int) async throws -> [Int64] {
        let plan = try EntityPlan<T>.shared
        // pg_get_serial_sequence takes the table as SQL text (quoted, qualified) and the column name as is.
        let query = PGQuery(
            unsafeSQL: "SELECT pg_catalog.nextval(pg_catalog.pg_get_serial_sequence($1, $2)) FROM pg_catalog.generate_series(1, $3)",
            binds: [try PGValue(plan.quotedTable(schema: self.schema)), try PGValue(plan.idColumn), try PGValue(max(1, count))])
        let rows = try await self.pool.withConnection { try await $0.query(query) }
        return try rows.map { try $0.decode(Int64.self, at: 0) }
    }

    package func commitGroup(_ plan: GroupPlan, hook: (any CommitTransactionHook)?, prepared: PreparedGroup?) async throws -> GroupOutcome {
        try await self.applyGroup(plan, hook: hook, prepared: prepared)
    }

    package func prepareGroup(_ plan: GroupPlan, hook: (any CommitTransactionHook)?) -> PreparedGroup? {
        self.prepareGroupPipeline(plan, hook: hook)
    }

    package func failedAtCommit(_ error: any Error) -> Bool { Self.failedAtCommit(error) }

    package func directInsert(rows: Int, make: (String?) throws -> MergeableInsert) -> [GroupOperation]? {
        // From the COPY threshold up a bulk insert goes the savepoint path (COPY).
        guard rows == 1 || rows < self.copyThreshold, let insert = try? make(self.schema) else { return nil }
        return [.insert(insert)]
    }

    package func withDrainConnection(leased: PGConnection?, _ body: (() -> Bool, Bool) async -> Void) async {
        await self.withCommitConnection(leased: leased) {
            await body({ self.commitConnectionIsWanted }, Self.commitConnection != nil)
        }
    }

    package var drainsAhead: Bool { true }

    package func leaseIdleConnection() -> PGConnection? { self.pool.leaseIdleNow() }

    package func readAgain<T: Entity>(_ type: T.Type, id: PGValue, on session: ListenerSession) -> Versioned<T>? {
        guard let plan = try? EntityPlan<T>.shared, let rows = try? session.query(self.selectByID(plan, id: id)) else { return nil }
        return try? RowDecoder(plan: plan).decode(rows).first
    }
}

extension InMemoryStore: GroupCommitStore {
    package func allocateIdentities<T: Entity>(_ type: T.Type, count: Int) async throws -> [Int64] {
        try self.nextIdentities(T.self, count: count)
    }

    /// Applies the sets one after another, each atomically.
    package func commitGroup(_ plan: GroupPlan, hook: (any CommitTransactionHook)?, prepared: PreparedGroup?) async throws -> GroupOutcome {
        var results: [Result<ChangeSetResult, any Error>] = []
        for index in plan.sets.indices {
            do {
                let changes = try plan.changeSet(at: index, after: results)
                results.append(.success(changes.isEmpty ? ChangeSetResult(operations: []) : try await self.apply(changes)))
            } catch {
                results.append(.failure(error))
            }
        }
        return .results(results)
    }

    package func prepareGroup(_ plan: GroupPlan, hook: (any CommitTransactionHook)?) -> PreparedGroup? { nil }

    package func committedIDs(_ ids: [UUID], since first: UUID) async throws -> Set<UUID> { [] }

    package func failedAtCommit(_ error: any Error) -> Bool { false }

    package func directInsert(rows: Int, make: (String?) throws -> MergeableInsert) -> [GroupOperation]? { nil }

    package func findOrCreate<T: Entity>(_ value: T, announcing hook: (any CommitTransactionHook)?) async throws
        -> (value: Versioned<T>, created: Bool)
    {
        try await self.findOrCreate(value)
    }

    package func withDrainConnection(leased: PGConnection?, _ body: (() -> Bool, Bool) async -> Void) async {
        await body({ false }, false)
    }

    package var drainsAhead: Bool { false }

    package func leaseIdleConnection() -> PGConnection? { nil }

    package func readAgain<T: Entity>(_ type: T.Type, id: PGValue, on session: ListenerSession) -> Versioned<T>? { nil }
}

/// A group built ahead as one pipeline (PostgreSQL), sent by ``GroupCommitStore/commitGroup(_:hook:prepared:)``.
package typealias PreparedGroup = PostgresStore.PreparedGroup
