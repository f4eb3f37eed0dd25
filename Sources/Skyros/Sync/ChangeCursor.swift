import Foundation

/// A reader's position in the change log, correct although log positions are not assigned in commit order.
///
/// Every transaction whose id is below a snapshot's `xmin` had finished when the snapshot was taken, so its
/// entry (if committed) was visible to that read. The cursor keeps that `xmin` as its *horizon*: the next read
/// re-reads every entry with `xid >= horizon` (the safety window of transactions that were still running) and
/// drops the positions it has already delivered.
struct ChangeCursor: Sendable {
    /// Every entry with a smaller transaction id has been delivered (`xid8` as text); `nil` before the first read.
    private(set) var horizon: UInt64?
    /// Delivered entries at or above the horizon: position → xid.
    private var delivered: [Int64: UInt64] = [:]
    /// The pruning watermark when last checked.
    private var prunedThrough: UInt64?
    /// The identity of the log last read.
    private var logID: UUID?

    /// What one read means for the reader.
    enum Outcome: Sendable, Equatable {
        /// Entries not delivered before, in position order.
        case entries([ChangeLogEntry])
        /// Entries the reader never saw were pruned, the log itself was replaced (the store was destroyed
        /// and rebuilt), or the server's transaction ids went back (a failover that lost commits, a restored
        /// backup): the reader must drop what it caches and refetch.
        case gap
    }

    var horizonText: String? { self.horizon.map { String($0) } }

    /// Whether the entry at `position` was already delivered (a hint for it needs no read).
    func hasDelivered(_ position: Int64) -> Bool { self.delivered[position] != nil }

    /// Records an entry that arrived in its hint, before any read returned it.
    /// - Returns: whether it is new (not delivered by a read or an earlier hint, not below the horizon).
    mutating func deliverFromHint(position: Int64, xid: String) -> Bool {
        guard let xid = UInt64(xid), let horizon = self.horizon, xid >= horizon, self.delivered[position] != xid else {
            return false
        }
        self.delivered[position] = xid
        return true
    }

    /// Folds in one read of the log (all entries with `xid >= horizon`, the snapshot's `xmin`, the watermark).
    mutating func advance(entries: [ChangeLogEntry], xmin: String, prunedThrough: String, logID: UUID? = nil) -> Outcome {
        let xmin = UInt64(xmin) ?? 0
        let pruned = UInt64(prunedThrough) ?? 0
        if let logID, let known = self.logID, logID != known {
            // A new log: what was delivered from the old one says nothing about it, and the rows it described
            // are gone. Start over from this read.
            self.logID = logID
            self.delivered = [:]
            self.prunedThrough = pruned
            self.horizon = xmin
            for entry in entries { self.delivered[entry.position] = UInt64(entry.xid) ?? 0 }
            return .gap
        }
        if let logID { self.logID = logID }
        if let horizon = self.horizon, xmin < horizon {
            // A snapshot's xmin never goes down on one server (it is the oldest transaction id still running,
            // and ids are handed out in increasing order). It did: the server is a standby promoted without the
            // last commits it never received, or a restored backup. Its new transactions reuse ids below the
            // horizon, which every read (`xid >= horizon`) and hint would skip, while the rows this stack cached
            // from the lost commits are gone. Start over from this read, as for a new log.
            self.delivered = [:]
            self.prunedThrough = pruned
            self.horizon = xmin
            for entry in entries { self.delivered[entry.position] = UInt64(entry.xid) ?? 0 }
            return .gap
        }
        defer {
            self.prunedThrough = pruned
            if let horizon = self.horizon { self.horizon = max(horizon, xmin) } else { self.horizon = xmin }
            let horizon = self.horizon ?? 0
            self.delivered = self.delivered.filter { $0.value >= horizon }
        }
        // Keyed by position and xid: a rebuilt store restarts the positions.
        let fresh = entries.filter { self.delivered[$0.position] != UInt64($0.xid) }
        for entry in fresh { self.delivered[entry.position] = UInt64(entry.xid) ?? 0 }
        if let horizon = self.horizon, let known = self.prunedThrough, pruned > known, pruned >= horizon {
            return .gap
        }
        return .entries(fresh)
    }
}
