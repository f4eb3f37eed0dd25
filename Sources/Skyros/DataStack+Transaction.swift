import Foundation
import SkyrosPostgres
import SkyrosStore
import SkyrosStack
import SkyrosObservation

extension DataStack {
    /// Runs `body` in one PostgreSQL transaction on one connection of the stack's pool: reads that lock rows,
    /// entity writes and raw statements run at once, in order, and `COMMIT` follows when `body` returns.
    /// When `body` throws, or its task is cancelled, the transaction rolls back and nothing of it is visible.
    ///
    /// ```swift
    /// // Check the balance, then debit: no other transaction changes the account in between.
    /// try await stack.transaction(isolation: .readCommitted) { tx in
    ///     guard var account = try await tx.object(Account.self, id: id, lock: .forUpdate) else { return }
    ///     guard account.balance >= amount else { throw PaymentError.insufficientFunds }
    ///     account.balance -= amount
    ///     try await tx.update(account)
    ///     try await tx.insert(LedgerEntry(id: UUID(), account: id, amount: -amount))
    /// }
    /// ```
    ///
    /// Ordering with queued writes: the transaction first waits until every write queued before the call (by
    /// `write {}` or a context's save) has committed or failed, so it reads them; writes queued while it runs
    /// commit on their own connections, independently of it (one that changes a row it locked waits for it to
    /// end: do not wait for such a write's commit inside `body`). Read-your-writes: inside `body`, reads see the
    /// transaction's own writes; the main context and this stack's observers see them once `transaction`
    /// returns (the rows it wrote are dropped from the cache, and observers of their tables and rows re-run);
    /// other stacks learn of them through the change feed, like any commit of this stack.
    ///
    /// - Parameters:
    ///   - isolation: `.readCommitted` (PostgreSQL's default), `.repeatableRead` or `.serializable`.
    ///   - maxAttempts: how many times to run `body` in all when the transaction fails with a serialization
    ///     failure (SQLSTATE `40001`) or a deadlock (`40P01`), each time in a new transaction after a short,
    ///     growing, randomised pause; 1 (the default) runs it once. `body` must then be safe to run again.
    ///   - body: the transaction's work; its value is returned after `COMMIT`.
    /// - Returns: `body`'s value.
    /// - Throws: `body`'s error; `PGError` (the `COMMIT`'s, `55P03` for a `NOWAIT` lock, `40001`/`40P01` once
    ///   the attempts are used up, `.queryCancelled` when the task was cancelled); `DataStackError`
    ///   `.unsupportedByStore` on the in-memory store.
    @discardableResult
    public func transaction<R>(
        isolation: IsolationLevel = .readCommitted, maxAttempts: Int = 1, _ body: (DataTransaction) async throws -> R
    ) async throws -> R {
        guard let store = self.postgresStore else {
            throw DataStackError(
                code: .unsupportedByStore, message: "interactive transactions need PostgreSQL; the in-memory store has no row locks")
        }
        let attempts = max(1, maxAttempts)
        var attempt = 1
        while true {
            do {
                return try await self.runTransaction(on: store, isolation: isolation, body)
            } catch let error as PGError where attempt < attempts && Self.isRetryable(error) {
                self.logger.debug(
                    "transaction retried",
                    metadata: ["skyros.transaction.attempt": "\(attempt)", "skyros.transaction.sqlstate": "\(error.sqlState.map { "\($0)" } ?? "")"])
                let ceiling = min(200, 5 << min(attempt, 5))
                try await Task.sleep(for: .milliseconds(Int.random(in: 1...ceiling)))
                attempt += 1
            }
        }
    }

    /// Whether a transaction that failed with `error` may succeed when run again: a serialization failure or a
    /// deadlock.
    static func isRetryable(_ error: PGError) -> Bool {
        error.sqlState == .serializationFailure || error.sqlState == .deadlockDetected
            || error.kind == .serializationFailure || error.kind == .deadlock
    }

    private func runTransaction<R>(
        on store: PostgresStore, isolation: IsolationLevel, _ body: (DataTransaction) async throws -> R
    ) async throws -> R {
        let core = self.core
        await core.waitForQueuedWrites()
        try Task.checkCancellation()
        var transaction: DataTransaction?
        do {
            let value = try await store.pool.withConnection { connection in
                try await connection.execute(script: "BEGIN ISOLATION LEVEL \(isolation.rawValue)")
                do {
                    let tx = DataTransaction(connection: connection, store: store, core: core, isolation: isolation)
                    transaction = tx
                    let value = try await body(tx)
                    // The statement naming this stack as the writer travels with COMMIT: one round trip.
                    let announcement = try tx.endBody()
                    if announcement.isEmpty {
                        try await connection.execute(script: "COMMIT")
                    } else {
                        try await connection.pipeline(announcement + ["COMMIT"])
                    }
                    return value
                } catch {
                    // Sent even in a cancelled task (see `PGConnection.rollback()`); nothing when none is open.
                    _ = try? await connection.rollback()
                    throw error
                }
            }
            self.transactionEnded(transaction, core: core, committed: true)
            return value
        } catch {
            self.transactionEnded(transaction, core: core, committed: false)
            throw error
        }
    }

    /// After the transaction ended: the rows it wrote or returned from raw statements leave the cache (also
    /// after a rollback or a `COMMIT` whose outcome is unknown: the next read reads them as committed), and,
    /// when it committed, the observers of those rows and tables re-run.
    private func transactionEnded(_ transaction: DataTransaction?, core: StackCore, committed: Bool) {
        guard let transaction else { return }
        let rows = transaction.touchedRows()
        guard let entry = core.transactionEnded(rows.all, origin: self.sync.origin), committed, !rows.changes.isEmpty else { return }
        self.sync.observers.changed(ObservedChanges(remote: [entry]))
    }

    // MARK: Raw SQL

    /// Runs a statement written by hand (a CTE, a window function, full-text search) on the stack's pool and
    /// decodes its rows into entities: the entity's columns matched by name, extra columns ignored. Values are
    /// bound parameters: interpolate them.
    ///
    /// ```swift
    /// // The two newest tickets of every project.
    /// let newest = try await stack.fetch(Ticket.self, sql: """
    ///     SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY project ORDER BY created_at DESC) AS rank
    ///                    FROM tickets) AS ranked
    ///     WHERE rank <= \(2)
    ///     """)
    /// ```
    ///
    /// Like a transaction, it first waits until the writes queued before it have committed, so it sees them.
    /// It reads committed rows; its result is not overlaid with later queued writes. The cache: a row that
    /// carries its version (the entity's version column, which `SELECT *` includes, or `xmin` for an entity
    /// versioned by `xmin`: select it) is cached at that version, as a fetch caches what it reads, so the main
    /// context and the statement agree afterwards; a row without a version leaves the cache alone.
    /// - Throws: `EntityMappingError` when one of the entity's columns is missing from the result; `PGError`;
    ///   `DataStackError` `.unsupportedByStore` on the in-memory store.
    public func fetch<T: Entity>(_ type: T.Type, sql: PGQuery) async throws -> [T] {
        let store = try self.sqlStore()
        let core = self.core
        await core.waitForQueuedWrites()
        let settled = core.settledCount
        let rows = try RawRowDecoding.entities(type, from: try await store.pool.withConnection { try await $0.query(sql) })
        try core.cacheRows(rows.compactMap { row in row.version.map { (row.value, $0) } }, readSince: settled)
        return rows.map(\.value)
    }

    /// Runs a statement written by hand on the stack's pool and decodes its rows into `type`: a value the client
    /// decodes natively (`Int`, `String`, `UUID`, `Date`, …) from the first column; any other `Decodable` with a
    /// key per column (columns no key reads are ignored). The cache is not touched.
    ///
    /// ```swift
    /// struct Ranked: Decodable { var id: Int; var title: String; var rank: Int }
    /// let ranked = try await stack.fetch(Ranked.self, sql: """
    ///     SELECT id, title, row_number() OVER (PARTITION BY project ORDER BY id) AS rank FROM tickets
    ///     """)
    /// let total = try await stack.fetch(Int.self, sql: "SELECT count(*) FROM tickets").first ?? 0
    /// ```
    /// - Parameters:
    ///   - type: the type each row decodes into.
    ///   - sql: the statement; interpolated values are bound as parameters.
    ///   - keyStrategy: how a key names its column (`.convertToSnakeCase`: `createdAt` reads `created_at`).
    /// - Throws: `EntityMappingError` naming a key without a column; `PGError`; `DataStackError`
    ///   `.unsupportedByStore` on the in-memory store.
    public func fetch<T: Decodable>(
        _ type: T.Type, sql: PGQuery, keyStrategy: ColumnKeyStrategy = .useCodingKeys
    ) async throws -> [T] {
        let store = try self.sqlStore()
        await self.core.waitForQueuedWrites()
        return try RawRowDecoding.values(type, from: try await store.pool.withConnection { try await $0.query(sql) }, keyStrategy: keyStrategy)
    }

    private func sqlStore() throws -> PostgresStore {
        guard let store = self.postgresStore else {
            throw DataStackError(code: .unsupportedByStore, message: "raw SQL needs PostgreSQL; the in-memory store runs no SQL")
        }
        return store
    }
}
