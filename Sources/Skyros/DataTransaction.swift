import Foundation
import SkyrosPostgres
import SkyrosStore
import SkyrosStack

/// An interactive transaction: reads that lock rows, entity writes and raw statements, all on one connection
/// inside one PostgreSQL transaction, committed when the body of `DataStack/transaction(isolation:maxAttempts:_:)`
/// returns and rolled back when it throws or its task is cancelled.
///
/// Everything runs at once, in the transaction: a read sees the transaction's own writes, and a write takes
/// its row locks immediately. Reads go to the database, never to the main context's cache, and put nothing in
/// it (the transaction may roll back).
///
/// ```swift
/// try await stack.transaction { tx in
///     guard let job = try await tx.first(
///         FetchDescriptor<Job>(predicate: #Predicate { $0.state == "queued" }, sortBy: [SortDescriptor(\.id)]),
///         lock: .forUpdate(.skipLocked))
///     else { return }
///     var done = job
///     done.state = "done"
///     try await tx.update(done)
/// }
/// ```
///
/// Use a transaction from one task at a time (its statements share one connection); it cannot be used after
/// its body returned.
public final class DataTransaction: Sendable {
    private struct State: Sendable {
        /// The entity writes, in order (rolled back ones removed), announced at commit.
        var changes: [RowChange] = []
        /// The versions this transaction read or wrote, guarding its updates and deletes.
        var versions: [RowKey: Int64] = [:]
        /// Rows raw statements returned as entities (evicted from the cache at the end).
        var rawRows: [RowChange] = []
        /// Whether a raw statement ran: what it changed is not known, so the stack is not named as the writer.
        var ranRawStatements = false
        var savepoints = 0
        var ended = false
    }

    /// The isolation level the transaction runs at.
    public let isolation: IsolationLevel
    private let connection: PGConnection
    private let store: PostgresStore
    private let core: StackCore
    private let state = Locked(State())

    init(connection: PGConnection, store: PostgresStore, core: StackCore, isolation: IsolationLevel) {
        self.connection = connection
        self.store = store
        self.core = core
        self.isolation = isolation
    }

    // MARK: Reads

    /// The rows matching `descriptor` as this transaction sees them, locked as `lock` says until it ends.
    ///
    /// ```swift
    /// let batch = try await tx.fetch(FetchDescriptor<Job>(fetchLimit: 10), lock: .forUpdate(.skipLocked))
    /// ```
    /// - Parameters:
    ///   - descriptor: predicate, sort and window, as for a context's fetch.
    ///   - lock: the row lock to take (`nil`: none, a plain read).
    /// - Throws: `QueryError` for an untranslatable predicate; `PGError`: SQLSTATE `55P03`
    ///   (``SQLState/lockNotAvailable``) for ``RowLock/Waiting/noWait`` on a row another transaction holds,
    ///   `40001`/`40P01` for a serialization failure or deadlock (see `maxAttempts`).
    public func fetch<T: Entity>(_ descriptor: FetchDescriptor<T>, lock: RowLock? = nil) async throws -> [T] {
        try self.checkOpen()
        let rows = try await self.store.fetch(descriptor, lock: lock, on: self.connection)
        try self.remember(rows.map { ($0.value, $0.version) })
        return rows.map(\.value)
    }

    /// The first row matching `descriptor`, locked as `lock` says; `nil` when none (with
    /// ``RowLock/Waiting/skipLocked``: when every matching row is held by another transaction).
    ///
    /// ```swift
    /// let next = try await tx.first(FetchDescriptor<Job>(sortBy: [SortDescriptor(\.id)]), lock: .forUpdate(.skipLocked))
    /// ```
    /// - Throws: as ``fetch(_:lock:)``.
    public func first<T: Entity>(_ descriptor: FetchDescriptor<T>, lock: RowLock? = nil) async throws -> T? {
        var descriptor = descriptor
        descriptor.fetchLimit = 1
        return try await self.fetch(descriptor, lock: lock).first
    }

    /// The row with `id`, locked as `lock` says; `nil` when it does not exist.
    ///
    /// ```swift
    /// guard let account = try await tx.object(Account.self, id: id, lock: .forUpdate) else { return }
    /// ```
    /// - Throws: as ``fetch(_:lock:)``.
    public func object<T: Entity>(_ type: T.Type, id: T.ID, lock: RowLock? = nil) async throws -> T? {
        try self.checkOpen()
        guard let row = try await self.store.object(type, id: id, lock: lock, on: self.connection) else { return nil }
        try self.remember([(row.value, row.version)])
        return row.value
    }

    /// The number of rows matching `descriptor` as this transaction sees them.
    ///
    /// ```swift
    /// let open = try await tx.count(FetchDescriptor<Job>(predicate: #Predicate { $0.state == "queued" }))
    /// ```
    /// - Throws: `QueryError`, `PGError`.
    public func count<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> Int {
        try self.checkOpen()
        return try await self.store.count(descriptor, on: self.connection)
    }

    // MARK: Writes

    /// Inserts a row now, in the transaction. An ``DatabaseGenerated/identity`` key of `0` gets its id from the
    /// stack's allocator first.
    ///
    /// ```swift
    /// let entry = try await tx.insert(LedgerEntry(id: UUID(), account: id, amount: -25))
    /// ```
    /// - Returns: the row as inserted (with its id).
    /// - Throws: `ColumnValueError` for a value its column cannot hold; `PGError` (`.uniqueViolation`, …).
    @discardableResult
    public func insert<T: Entity>(_ value: T) async throws -> T {
        let value = try self.core.admittedForTransaction(value)
        var changes = ChangeSet()
        changes.insert(value)
        try await self.apply(changes, table: T.tableName)
        return value
    }

    /// Writes every column of the row with `value.id` now. When this transaction read the row (or wrote it),
    /// the update is guarded by that version: a row changed since fails with a version conflict (a row read
    /// with a ``RowLock`` cannot have changed).
    ///
    /// ```swift
    /// var account = try await tx.object(Account.self, id: id, lock: .forUpdate)!
    /// account.balance -= 25
    /// try await tx.update(account)
    /// ```
    /// - Throws: `StoreError.notFound`, `StoreError.versionConflict`, `ColumnValueError`, `PGError`.
    public func update<T: Entity>(_ value: T) async throws {
        let value = try self.core.admittedForTransaction(value)
        let plan = try EntityPlan<T>.shared
        let key = try RowKey(value)
        let expected = self.state.withLock { $0.versions[key] }
        var changes = ChangeSet()
        changes.update(value, changedColumns: plan.columnNames.indices.filter { !plan.isKeyColumn($0) }.map { plan.columnNames[$0] }, expectedVersion: expected)
        try await self.apply(changes, table: T.tableName)
    }

    /// Inserts the row, or overwrites every column of the stored row with its primary key, now
    /// (`INSERT … ON CONFLICT (id) DO UPDATE`).
    ///
    /// ```swift
    /// try await tx.upsert(Setting(id: "theme", value: "dark"))
    /// ```
    /// - Throws: `ColumnValueError`, `PGError`.
    public func upsert<T: Entity>(_ value: T) async throws {
        let value = try self.core.admittedForTransaction(value)
        var changes = ChangeSet()
        changes.upsert(value)
        try await self.apply(changes, table: T.tableName)
    }

    /// Deletes the row with `value`'s id now (see ``delete(_:id:)``).
    ///
    /// ```swift
    /// try await tx.delete(job)
    /// ```
    /// - Returns: whether a row was deleted.
    @discardableResult
    public func delete<T: Entity>(_ value: T) async throws -> Bool {
        try await self.delete(T.self, id: value.id)
    }

    /// Deletes the row with `id` now; guarded, like ``update(_:)``, by the version this transaction read.
    ///
    /// ```swift
    /// try await tx.delete(Job.self, id: 42)
    /// ```
    /// - Returns: whether a row was deleted (`false` when none had that id).
    /// - Throws: `StoreError.versionConflict`, `PGError`.
    @discardableResult
    public func delete<T: Entity>(_ type: T.Type, id: T.ID) async throws -> Bool {
        let key = try RowKey(type, id: id)
        let expected = self.state.withLock { $0.versions[key] }
        var changes = ChangeSet()
        changes.delete(type, id: id, expectedVersion: expected)
        return try await self.apply(changes, table: T.tableName) > 0
    }

    /// Runs one change set's statements in the transaction and records what they wrote.
    /// - Returns: the number of rows written.
    @discardableResult
    private func apply(_ changes: ChangeSet, table: String) async throws -> Int {
        try self.checkOpen()
        if let hook = self.core.transactionHook {
            let unprepared = hook.tablesNeedingPreparation([table])
            if !unprepared.isEmpty { try await hook.prepare(tables: unprepared) }
        }
        let written = try await self.store.apply(changes, on: self.connection).changes
        self.state.withLock { state in
            for change in written {
                let key = RowKey(table: change.table, id: change.id)
                if let version = change.version { state.versions[key] = version } else { state.versions[key] = nil }
                state.changes.append(change)
            }
        }
        return written.count
    }

    // MARK: Savepoints

    /// Runs `body` under a savepoint: when it throws, only what it did is rolled back (its writes and the
    /// locks it took), and the error is rethrown; the transaction goes on.
    ///
    /// ```swift
    /// try await stack.transaction { tx in
    ///     try await tx.insert(order)
    ///     do {
    ///         try await tx.savepoint { tx in try await tx.insert(coupon) }   // a duplicate is not fatal
    ///     } catch let error as PGError where error.sqlState == .uniqueViolation {}
    /// }
    /// ```
    /// - Throws: `body`'s error (after rolling back to the savepoint), `PGError`.
    @discardableResult
    public nonisolated(nonsending) func savepoint<R>(_ body: (DataTransaction) async throws -> R) async throws -> R {
        try self.checkOpen()
        let (name, marks) = self.state.withLock { state in
            state.savepoints += 1
            return ("skyros_savepoint_\(state.savepoints)", (state.changes.count, state.rawRows.count, state.versions))
        }
        _ = try await self.connection.query(PGQuery(unsafeSQL: "SAVEPOINT \(name)"))
        do {
            let value = try await body(self)
            _ = try await self.connection.query(PGQuery(unsafeSQL: "RELEASE SAVEPOINT \(name)"))
            return value
        } catch {
            // Runs even in a cancelled task (the outer transaction rolls back then anyway).
            _ = try? await self.connection.cleanUp(PGQuery(unsafeSQL: "ROLLBACK TO SAVEPOINT \(name)"))
            _ = try? await self.connection.cleanUp(PGQuery(unsafeSQL: "RELEASE SAVEPOINT \(name)"))
            self.state.withLock { state in
                state.changes.removeSubrange(marks.0...)
                state.rawRows.removeSubrange(marks.1...)
                state.versions = marks.2
            }
            throw error
        }
    }

    // MARK: Raw SQL

    /// Runs a statement written by hand in the transaction and decodes its rows into entities (columns matched
    /// by name; extra columns, a window function's, are ignored). Values are bound parameters: interpolate them.
    ///
    /// ```swift
    /// let claimed = try await tx.fetch(Job.self, sql: """
    ///     UPDATE jobs SET state = 'running' WHERE id IN (
    ///         SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT \(10) FOR UPDATE SKIP LOCKED)
    ///     RETURNING *
    ///     """)
    /// ```
    /// The rows bypass the main context's cache (the transaction may roll back); when it ends, the rows returned
    /// are dropped from the cache. What such a statement changes is announced to every stack, this one included,
    /// by the change capture (see the Transactions article): rows it changed that it did not return reach this
    /// stack's cache through the change feed, not by the time the transaction returns.
    /// - Throws: `EntityMappingError` when one of the entity's columns is missing; `PGError`.
    public func fetch<T: Entity>(_ type: T.Type, sql: PGQuery) async throws -> [T] {
        try self.checkOpen()
        self.state.withLock { $0.ranRawStatements = true }
        let rows = try RawRowDecoding.entities(type, from: try await self.connection.query(sql))
        let plan = try EntityPlan<T>.shared
        let touched = try rows.map { row in
            RowChange(entity: plan.entityName, table: T.tableName, id: try plan.idValue(row.value.id), kind: .updated, version: row.version)
        }
        self.state.withLock { state in
            state.rawRows += touched
            for (row, change) in zip(rows, touched) {
                if let version = row.version { state.versions[RowKey(table: change.table, id: change.id)] = version }
            }
        }
        return rows.map(\.value)
    }

    /// Runs a statement written by hand in the transaction and decodes its rows into `type`: a value the client
    /// decodes natively (`Int`, `String`, `UUID`, …) from the first column, any other `Decodable` with a key per
    /// column.
    ///
    /// ```swift
    /// struct Depth: Decodable { var state: String; var jobs: Int }
    /// let depth = try await tx.fetch(Depth.self, sql: "SELECT state, count(*)::int8 AS jobs FROM jobs GROUP BY state")
    /// ```
    /// - Parameters:
    ///   - type: the type each row decodes into.
    ///   - sql: the statement; interpolated values are bound as parameters.
    ///   - keyStrategy: how a key names its column (`.convertToSnakeCase`: `createdAt` reads `created_at`).
    /// - Throws: `EntityMappingError` naming a key without a column; `PGError`.
    public func fetch<T: Decodable>(
        _ type: T.Type, sql: PGQuery, keyStrategy: ColumnKeyStrategy = .useCodingKeys
    ) async throws -> [T] {
        try self.checkOpen()
        self.state.withLock { $0.ranRawStatements = true }
        return try RawRowDecoding.values(type, from: try await self.connection.query(sql), keyStrategy: keyStrategy)
    }

    /// Runs a statement written by hand in the transaction (values bound as parameters).
    ///
    /// ```swift
    /// let purged = try await tx.execute("DELETE FROM jobs WHERE state = 'done' AND finished_at < \(cutoff)")
    /// ```
    /// What it changes reaches this stack's cache and observers, and every other stack's, through the change
    /// capture and the change feed (as a commit of psql would), not by the time the transaction returns.
    /// - Returns: the number of rows the statement affected.
    /// - Throws: `PGError`.
    @discardableResult
    public func execute(_ sql: PGQuery) async throws -> Int {
        try self.checkOpen()
        self.state.withLock { $0.ranRawStatements = true }
        return try await self.connection.query(sql).affectedRows
    }

    // MARK: Lifecycle (the stack's)

    private func checkOpen() throws {
        if self.state.withLock({ $0.ended }) {
            throw DataStackError(code: .contextInvalidated, message: "the transaction has ended: use it only inside its body")
        }
    }

    /// Records the versions of rows read.
    private func remember<T: Entity>(_ rows: [(T, Int64)]) throws {
        guard !rows.isEmpty else { return }
        let keys = try rows.map { try RowKey($0.0) }
        self.state.withLock { state in
            for (key, row) in zip(keys, rows) { state.versions[key] = row.1 }
        }
    }

    /// Ends the body's use of the transaction. Returns what goes before `COMMIT` (in its round trip): the
    /// statement naming the stack as the writer of the entity writes (the change feed's hook), unless a raw
    /// statement ran: then the capture announces the transaction to every stack, this one included.
    func endBody() throws -> [PGQuery] {
        let (changes, raw) = self.state.withLock { state in
            state.ended = true
            return (state.changes, state.ranRawStatements)
        }
        guard !changes.isEmpty, !raw, let hook = self.core.transactionHook,
            let statement = try hook.pipelinedStatement(announcing: changes)
        else { return [] }
        return [statement]
    }

    /// Every row this transaction wrote or returned from a raw statement (for the cache, once it ended).
    func touchedRows() -> (changes: [RowChange], all: [RowChange]) {
        self.state.withLock { state in
            state.ended = true
            return (state.changes, state.changes + state.rawRows)
        }
    }
}
