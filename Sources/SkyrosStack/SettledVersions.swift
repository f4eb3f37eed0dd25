import DequeModule
import SkyrosStore

/// The versions this stack's recent commits gave the rows they wrote, kept apart from the cache (whose entries
/// go when evicted, merged, or changed by another process): a change read from one of those commits while it
/// was queued (``BaseVersion/pending(commit:)``) is guarded by exactly that version. Each row keeps its latest
/// commit's only, so a change read from an older one (the row changed since) finds none and conflicts.
/// Bounded: the oldest records go first.
struct SettledVersions: Sendable {
    private var versions: [RowKey: (commit: UInt64, version: Int64)] = [:]
    /// Records in the order made, for the bound (a record replaced since is skipped when its turn comes).
    private var order: Deque<(key: RowKey, commit: UInt64)> = []
    static let limit = 50_000

    mutating func record(_ key: RowKey, commit: UInt64, version: Int64) {
        self.versions[key] = (commit, version)
        self.order.append((key, commit))
        if self.order.count > Self.limit {
            let oldest = self.order.removeFirst()
            if self.versions[oldest.key]?.commit == oldest.commit { self.versions[oldest.key] = nil }
        }
    }

    /// The version `commit` gave the row, if it is the row's latest commit recorded.
    func version(of key: RowKey, writtenBy commit: UInt64) -> Int64? {
        guard let record = self.versions[key], record.commit == commit else { return nil }
        return record.version
    }
}
