import Foundation
import SkyrosPostgres
import SkyrosStore

/// What an interactive transaction and a raw statement need of the stack: the order with queued writes, the
/// admission of written values, the change feed's hook, and the main context's cache after they ran.
extension StackCore {
    /// Waits until every write queued before this call has committed or failed (the commit queue's last ticket),
    /// so that a transaction or raw statement that starts next sees them. Returns at once when none is queued.
    package func waitForQueuedWrites() async { await self.flush() }

    /// `value` as a transaction writes it: with an identity key allocated when its entity has one and its id is
    /// `0`, checked against its columns (``ColumnDoor``).
    /// - Throws: ``DataStackError`` `.noIdentityAvailable`; `ColumnValueError`.
    package func admittedForTransaction<T: Entity>(_ value: T) throws -> T {
        try self.door.admit(self.assigningIdentity(value)).value
    }

    /// The work the change feed adds to commit transactions (naming this stack as the writer; installing the
    /// capture on a table before its first write), when it runs.
    package var transactionHook: (any CommitTransactionHook)? { self.state.withLock { $0.hook } }

    /// The number of commits (local or remote) that settled so far: a read that began before it changed must
    /// not put what it read into the cache (see ``cacheRows(_:readSince:)``).
    package var settledCount: UInt64 { self.state.withLock { $0.view.finishedCommits } }

    /// Caches rows read outside the main context (a raw statement), each at its version, as a fetch caches
    /// what it reads: only when no commit settled since `settled` (``settledCount``, taken before the read) and
    /// the row has no queued local change.
    /// - Returns: how many rows were cached.
    @discardableResult
    package func cacheRows<T: Entity>(_ rows: [(value: T, version: Int64)], readSince settled: UInt64) throws -> Int {
        let measure = self.measuresBytes
        let keyed = try rows.map { row in
            (key: try RowKey(row.value), row: row, bytes: measure ? approximateSize(of: EntityKind<T>().encode(row.value)) : 0)
        }
        return self.state.withLock { state -> Int in
            guard state.view.finishedCommits == settled else { return 0 }
            var cached = 0
            for entry in keyed where state.view.pending[entry.key] == nil {
                state.view.cache.put(entry.key, value: entry.row.value, version: entry.row.version, bytes: entry.bytes)
                cached += 1
            }
            return cached
        }
    }

    /// Applies an interactive transaction's writes to the main context once it ended: each written row is
    /// dropped from the cache (the next read reads it as committed), and reads in flight retry, as for another
    /// writer's commit (``applyRemote(_:readAgain:)``). Rows with a queued local change stay visible as queued.
    /// - Returns: the changes as one change-log entry of `origin`, for the observers; `nil` when none.
    @discardableResult
    package func transactionEnded(_ changes: [RowChange], origin: UUID) -> ChangeLogEntry? {
        guard !changes.isEmpty else { return nil }
        let entry = ChangeLogEntry(position: 0, xid: "0", origin: origin, changes: changes.map { change in
            var change = change
            change.row = nil   // never refresh from a transaction's values: evict, and read as committed
            return LoggedRowChange(change)
        })
        _ = self.applyRemote([entry])
        return entry
    }
}
