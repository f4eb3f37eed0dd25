import SkyrosPostgres

extension StackCore {
    /// Drops rows another process changed from the cache. Rows with a queued local change stay visible as
    /// this process wrote them, and are marked: when that change commits, the row is evicted rather than
    /// cached (the other process may have committed after it). Reads in flight retry, so they do not put
    /// back what they read before the change.
    func evictRemote(_ keys: [RowKey]) {
        self.state.withLock { state in
            for key in keys {
                if state.pending[key] == nil {
                    state.cache.remove(key)
                } else {
                    state.remoteChangedWhilePending.insert(key)
                }
            }
            state.finishedCommits += 1
        }
    }

    /// Drops every cached row (the change log had a gap); rows with queued local changes stay visible and are
    /// marked like ``evictRemote(_:)`` marks them.
    func flushRemote() {
        self.state.withLock { state in
            state.cache.removeAll()
            for key in state.pending.keys { state.remoteChangedWhilePending.insert(key) }
            state.finishedCommits += 1
        }
    }
}

/// Tells the stack's observers that a save made rows of some tables visible in the main context, or that a
/// failed commit reverted them.
final class SaveNotifier: Sendable {
    /// The closure inside a struct: a bare closure stored in a generic container is reabstracted on every
    /// `inout` access, and the thunks pile up (each `withLock { $0 }` added two layers to the stored value,
    /// making every call slower than the last).
    private struct Handler {
        let call: @Sendable ([ResolvedSlot]) -> Void
    }

    private let handler = Locked<Handler?>(nil)

    func set(_ handler: @escaping @Sendable ([ResolvedSlot]) -> Void) { self.handler.withLock { $0 = Handler(call: handler) } }

    /// Saved (or reverted) slots: wakes the observers of their tables.
    func saved(_ slots: [ResolvedSlot]) {
        guard !slots.isEmpty, let handler = self.handler.withLock({ $0 })?.call else { return }
        handler(slots)
    }

    /// The tables `slots` write.
    static func tables(of slots: [ResolvedSlot]) -> Set<String> {
        Set(slots.map { slot in
            switch slot {
            case .row(let row): row.key.table
            case .deleteWhere(let operation): operation.table
            }
        })
    }
}
