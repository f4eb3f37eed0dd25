import SkyrosPostgres
import SkyrosStore

extension StackCore {
    /// Applies other writers' commits to the cache. A truncated table (``LoggedRowChange/isTruncate``) drops
    /// every cached row of it. A cached row that an update announced whole
    /// (``AnnouncedRow``), cached at exactly the version that update replaced, is refreshed to the new value
    /// and version: the next read of it — an observer's re-run among them — is served from memory instead of
    /// a round trip. Any other changed row is dropped (a row cached at another version may be older or newer
    /// than the announcement: it is read again when needed). Rows with a queued local change stay visible as
    /// this process wrote them, and are marked: when that change commits, the row is evicted rather than
    /// cached (the other process may have committed after it). Reads in flight retry, so they do not put back
    /// what they read before the change.
    ///
    /// `readAgain` holds rows read after the entries committed (``readAgain(_:on:)``): each refreshes its row
    /// like an announced one, if the row is still cached at the version it had when it was read again.
    /// - Returns: the number of rows refreshed.
    package func applyRemote(_ entries: [ChangeLogEntry], readAgain: [RowKey: RemoteRefresh] = [:]) -> Int {
        var refreshes = self.refreshes(for: entries)
        for (key, refresh) in readAgain where refreshes[key] == nil { refreshes[key] = refresh }
        return self.state.withLock { state -> Int in
            for entry in entries {
                for change in entry.changes {
                    if change.isTruncate {
                        state.view.cache.removeAll(inTable: change.table)
                        for key in state.view.pending.keys where key.table == change.table {
                            state.view.remoteChangedWhilePending.insert(key)
                        }
                        continue
                    }
                    let key = change.key
                    if state.view.pending[key] != nil {
                        state.view.remoteChangedWhilePending.insert(key)
                    } else if refreshes[key] == nil {
                        state.view.cache.remove(key)
                    }
                }
            }
            var refreshed = 0
            for (key, refresh) in refreshes where state.view.pending[key] == nil {
                if state.view.cache.peek(key)?.version == refresh.base {
                    state.view.cache.put(key, value: refresh.value, version: refresh.version, bytes: refresh.bytes)
                    refreshed += 1
                } else {
                    state.view.cache.remove(key)
                }
            }
            state.view.finishedCommits += 1
            return refreshed
        }
    }

    /// The refreshes `entries` allow: for each row cached at the version its first change replaced, when every
    /// change of it announces its row. Decoded outside the lock (``applyRemote(_:)`` applies each only if the
    /// row is still cached at that version). Empty at once when no change announces a row — as for every
    /// entry read from the log, which never stores rows, however large a catch-up.
    private func refreshes(for entries: [ChangeLogEntry]) -> [RowKey: RemoteRefresh] {
        guard entries.contains(where: { $0.changes.contains { $0.b != nil } }) else { return [:] }
        // Each changed row with its changes, in commit order.
        var changes: [RowKey: [(change: LoggedRowChange, xid: String)]] = [:]
        for entry in entries {
            for change in entry.changes { changes[change.key, default: []].append((change, entry.xid)) }
        }
        let cached = self.state.withLock { state -> [(key: RowKey, type: any Entity.Type, version: Int64)] in
            changes.compactMap { key, list in
                guard let base = list.first?.change.b, state.view.pending[key] == nil, let entry = state.view.cache.peek(key),
                    entry.version == base
                else { return nil }
                return (key, type(of: entry.value), base)
            }
        }
        let measure = self.measuresBytes
        var refreshes: [RowKey: RemoteRefresh] = [:]
        for row in cached {
            refreshes[row.key] = RemoteRefresh(changes[row.key] ?? [], as: row.type, from: row.version, measure: measure)
        }
        return refreshes
    }

    /// Reads `keys` again through `session` (a change feed's listener, on its thread), for those cached with no
    /// queued local change: refreshes for ``applyRemote(_:readAgain:)``, based on the version cached now. A row
    /// that fails to read or decode, or no longer exists, is left out (it is evicted as usual).
    package func readAgain(_ keys: [RowKey], on session: ListenerSession) -> [RowKey: RemoteRefresh] {
        let cached = self.state.withLock { state in
            keys.compactMap { key -> (key: RowKey, type: any Entity.Type, version: Int64)? in
                guard state.view.pending[key] == nil, let entry = state.view.cache.peek(key) else { return nil }
                return (key, type(of: entry.value), entry.version)
            }
        }
        guard !cached.isEmpty else { return [:] }
        let measure = self.measuresBytes
        var refreshes: [RowKey: RemoteRefresh] = [:]
        for row in cached {
            guard let read = row.type.readAgain(id: row.key.id, from: self.store, on: session, measure: measure) else { continue }
            refreshes[row.key] = RemoteRefresh(base: row.version, value: read.value, version: read.version, bytes: read.bytes)
        }
        return refreshes
    }

    /// Drops every cached row (the change log had a gap); rows with queued local changes stay visible and are
    /// marked like ``applyRemote(_:)`` marks them.
    package func flushRemote() {
        self.state.withLock { state in
            state.view.cache.removeAll()
            for key in state.view.pending.keys { state.view.remoteChangedWhilePending.insert(key) }
            state.view.finishedCommits += 1
        }
    }
}

/// Tells the stack's observers that a save made rows visible in the main context, or that a
/// failed commit reverted them.
package final class SaveNotifier: Sendable {
    /// The closure inside a struct: a bare closure stored in a generic container is reabstracted on every
    /// `inout` access, and the thunks pile up (each `withLock { $0 }` added two layers to the stored value,
    /// making every call slower than the last).
    private struct Handler {
        let call: @Sendable ([ResolvedSlot]) -> Void
    }

    private let handler = Locked<Handler?>(nil)

    package func set(_ handler: @escaping @Sendable ([ResolvedSlot]) -> Void) { self.handler.withLock { $0 = Handler(call: handler) } }

    /// Saved (or reverted) slots: wakes the observers of their rows and tables.
    func saved(_ slots: [ResolvedSlot]) {
        guard !slots.isEmpty, let handler = self.handler.withLock({ $0 })?.call else { return }
        handler(slots)
    }
}

/// A cached row brought up to date from the rows other processes' updates announced, or read again after them.
package struct RemoteRefresh: Sendable {
    /// The cached version the refresh replaces.
    let base: Int64
    let value: any Entity
    let version: Int64
    let bytes: Int

    init(base: Int64, value: any Entity, version: Int64, bytes: Int) {
        (self.base, self.value, self.version, self.bytes) = (base, value, version, bytes)
    }

    /// Follows a row's changes from its cached version `base`: each must be an update announcing its row,
    /// made on top of the version the one before produced. `nil` when any is not (the row is evicted).
    init?(_ changes: [(change: LoggedRowChange, xid: String)], as type: any Entity.Type, from base: Int64, measure: Bool) {
        var version = base
        var last: (value: any Entity, version: Int64, bytes: Int)?
        for (change, xid) in changes {
            guard let row = change.announcedRow, row.base == version,
                let next = type.announced(row.values, layout: row.layout, version: change.v, xid: xid, measure: measure)
            else { return nil }
            version = next.version
            last = next
        }
        guard let last else { return nil }
        (self.base, self.value, self.version, self.bytes) = (base, last.value, last.version, last.bytes)
    }
}

extension Entity {
    /// This entity's row `id` read through `session` as the store reads it, with its version and its size for
    /// the cache; `nil` when it does not exist or fails to read or decode.
    static func readAgain(
        id: PGValue, from store: any GroupCommitStore, on session: ListenerSession, measure: Bool
    ) -> (value: any Entity, version: Int64, bytes: Int)? {
        guard let row = store.readAgain(Self.self, id: id, on: session) else { return nil }
        return (row.value, row.version, measure ? approximateSize(of: EntityKind<Self>().encode(row.value)) : 0)
    }

    /// A value of this entity from a row another process's update announced, with its new version and its
    /// size for the cache. `nil` when that process's column layout differs from this one's (a rolling deploy),
    /// or the values do not decode.
    ///
    /// The new version: the announced one for a version column; for `xmin`, the announcing transaction's id
    /// modulo 2³² (announced rows come only from pipelined group commits, which use no savepoints).
    static func announced(
        _ values: [PGValue], layout: String, version: Int64?, xid: String, measure: Bool
    ) -> (value: any Entity, version: Int64, bytes: Int)? {
        guard let plan = try? EntityPlan<Self>.shared, plan.layout == layout, values.count == plan.columnNames.count
        else { return nil }
        // The change's version when it carries one: a version column's value, or (logical decoding) the `xmin`
        // its writer's transaction gave the row, since the entry's transaction is then the relay's.
        let newVersion: Int64
        if let version {
            newVersion = version
        } else if plan.versionColumn != nil {
            return nil
        } else {
            guard let xid = UInt64(xid) else { return nil }
            newVersion = Int64(xid % (1 << 32))
        }
        guard let value = try? RowDecoder(plan: plan).decode(values: values) else { return nil }
        return (value, newVersion, measure ? approximateSize(of: values) : 0)
    }
}
