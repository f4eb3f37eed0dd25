import SkyrosPostgres
import SkyrosStore

/// What readers of the main context see, as a value: the row cache, and the changes saved into the main
/// context that are still queued for commit (overlaid on every read).
///
/// Mutated under the stack's lock (``StackState``) by reads that fill the cache, by saves (``addPending(_:commit:)``),
/// by settled commits (``succeed(_:result:reread:)``, ``fail(_:)``) and by other processes' changes.
struct StackView: Sendable {
    struct PendingEntry: Sendable {
        let commit: UInt64
        let row: PendingRow
    }

    var cache: RowCache
    /// Queued changes per row, oldest first; the last one is what readers see.
    var pending: [RowKey: [PendingEntry]] = [:]
    var pendingCountByTable = TableCounts()
    /// Rows another process changed while they had a queued local change: when that change commits, its
    /// value may be older than the other process's, so the row is evicted rather than cached.
    var remoteChangedWhilePending: Set<RowKey> = []
    /// The versions recent commits gave the rows they wrote (see ``BaseVersion/pending(commit:)``).
    var settled = SettledVersions()
    /// Bumped whenever a commit finishes (either way) or other processes' changes arrive: a read that
    /// overlaps one retries or skips caching.
    var finishedCommits: UInt64 = 0
    /// Tables whose stored rows a `BEFORE` trigger may make differ from what this stack wrote: its own writes to
    /// them are read back rather than cached as sent.
    var rewritingTables: Set<String> = []

    init(cacheLimit: CacheLimit) {
        self.cache = RowCache(limit: cacheLimit)
    }

    /// The latest queued change of each row of `table`.
    func pendingRows(ofTable table: String) -> [RowKey: PendingEntry] {
        guard self.pendingCountByTable[table] > 0 else { return [:] }
        var rows: [RowKey: PendingEntry] = [:]
        for (key, entries) in self.pending where key.table == table {
            if let last = entries.last { rows[key] = last }
        }
        return rows
    }

    /// Makes a save's rows visible to readers (pinned in the cache until they commit).
    mutating func addPending(_ slots: [ResolvedSlot], commit: UInt64) {
        for case .row(let row) in slots {
            let entry = PendingEntry(commit: commit, row: row)
            if let slot = self.pending.index(forKey: row.key) {
                self.pending.values[slot].append(entry)
            } else {
                self.pending[row.key] = [entry]
                self.cache.pin(row.key)
            }
            self.pendingCountByTable[row.key.table] += 1
        }
    }

    /// Drops every queued change and cached row (the store was destroyed).
    mutating func clear() {
        self.pending = [:]
        self.pendingCountByTable = TableCounts()
        self.cache.removeAll()
    }

    /// A committed set: its rows leave the queue and enter the cache with the versions PostgreSQL gave them.
    /// `reread`: gets the slots of rows evicted instead because the stored row is not, or may not be, the value
    /// written (the store won a conflict, an update kept another writer's columns, another process's change,
    /// or no version known), which observers were shown while the set was queued.
    mutating func succeed(_ commit: QueuedCommit, result: ChangeSetResult, reread: inout [ResolvedSlot]) {
        let changes = result.changes
        // Most sets write a row or two: a linear search beats building a dictionary for them.
        let written: [RowKey: RowChange]? =
            changes.count > 8 ? Dictionary(changes.map { (RowKey(table: $0.table, id: $0.id), $0) }, uniquingKeysWith: { $1 }) : nil
        func change(for key: RowKey) -> RowChange? {
            if let written { return written[key] }
            return changes.last { $0.table == key.table && $0.id == key.id }
        }
        for (index, slot) in commit.slots.enumerated() {
            guard case .row(let row) = slot else { continue }
            let remoteChanged = !self.remoteChangedWhilePending.isEmpty && self.remoteChangedWhilePending.contains(row.key)
            let stillPending = self.unqueue(row.key, commit: commit.id)
            if let value = row.value {
                let written = change(for: row.key)
                if let version = written?.version { self.settled.record(row.key, commit: commit.id, version: version) }
                // An update that may have kept another writer's columns says whether it did; without a report, an
                // update under a merging policy is taken to have.
                let merged = written?.isStoredAsWritten.map { !$0 } ?? Self.mayHaveMerged(row, policy: commit.policy)
                let rewritten = !self.rewritingTables.isEmpty && self.rewritingTables.contains(row.key.table)
                // For an entity whose columns the database sets, the row stored: the values written with the ones the
                // write returned (`nil` when it returned none: read it again).
                var stored: (any Entity)? = value
                let hasReadBack = row.kind.hasReadBack
                if hasReadBack {
                    stored = written?.readBack.flatMap { readBack in commit.slotValues[index].flatMap { row.kind.stored($0, readBack: readBack) } }
                }
                if let version = written?.version, let stored, !merged, !remoteChanged, !rewritten {
                    self.cache.put(row.key, value: stored, version: version, bytes: commit.slotBytes[index], pinned: stillPending)
                    // Observers were shown the values the app gave to the columns the database sets.
                    if hasReadBack { reread.append(slot) }
                } else {
                    // Not written (the store won a conflict), its version is unknown, the stored row holds
                    // another writer's columns (merged) or what a trigger made of it (rewritten), or another
                    // process changed it meanwhile (before or after this commit: no telling): read it again, and
                    // so do observers, which were shown the value written.
                    self.cache.remove(row.key)
                    reread.append(slot)
                }
            } else {
                self.cache.remove(row.key)
            }
        }
        // Rows a set-based delete removed (they are not among the slots).
        for change in changes where change.kind == .deleted {
            self.cache.remove(RowKey(table: change.table, id: change.id))
        }
        // Rows a foreign key's delete rule changed (the in-memory store reports them): evicted, and the observers
        // of their tables look again.
        for change in result.cascaded { self.cache.remove(RowKey(table: change.table, id: change.id)) }
        for table in Set(result.cascaded.map(\.table)) { reread.append(.setWrite(PendingSetWrite(table: table, updates: true, emit: { _ in }))) }
        // A set-based update changed rows in ways only the database knows (`views + 1`): the cached rows of its
        // table go, and observers (shown the rows as they were while it was queued) look again. A set committed
        // unseen (its reply lost): which rows its deletes by predicate removed is not known either.
        for case .setWrite(let operation) in commit.slots where operation.updates || result.isUnseen {
            self.cache.removeAll(inTable: operation.table)
            if operation.updates { reread.append(.setWrite(operation)) }
        }
    }

    /// Whether the stored row may differ from the value written: an update under a policy that keeps the
    /// other writer's changes to columns this one did not change.
    private static func mayHaveMerged(_ row: PendingRow, policy: MergePolicy) -> Bool {
        guard case .updated = row.state, !row.pinsVersion else { return false }
        return policy == .contextWins || policy == .mergeByProperty
    }

    /// Reverts a failed commit from the main context: its queued changes vanish and its rows leave the cache
    /// (they may be stale: the usual cause is a version conflict).
    mutating func fail(_ commit: QueuedCommit) {
        for case .row(let row) in commit.slots {
            self.unqueue(row.key, commit: commit.id)
            self.cache.remove(row.key)
        }
    }

    /// Removes a commit's queued change of a row. Returns whether the row still has queued changes (of later
    /// commits).
    @discardableResult
    private mutating func unqueue(_ key: RowKey, commit: UInt64) -> Bool {
        guard let slot = self.pending.index(forKey: key),
            let index = self.pending.values[slot].firstIndex(where: { $0.commit == commit })
        else { return self.pending[key] != nil }
        // Mutated in place (one hash lookup; a copy out and back would also copy the array).
        self.pending.values[slot].remove(at: index)
        self.pendingCountByTable[key.table] -= 1
        guard self.pending.values[slot].isEmpty else { return true }
        self.pending.remove(at: slot)
        if !self.remoteChangedWhilePending.isEmpty {
            // The row's last queued change is done (its caller checked the mark first).
            self.remoteChangedWhilePending.remove(key)
        }
        self.cache.unpin(key)
        return false
    }
}

/// Everything a stack's lock guards: the readers' view, the commit queue's state machine, and the work
/// added to every group-commit transaction. One lock, so a save appears to readers and joins the queue
/// at once, and a group's outcomes reach the cache and free its room at once.
struct StackState: Sendable {
    var view: StackView
    var queue: CommitQueueStateMachine<QueuedCommit, OneShotWaiter>
    var hook: (any CommitTransactionHook)?
}
