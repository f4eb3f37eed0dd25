import Foundation
import SkyrosStore
import SkyrosStack

/// A reader's position in the change log, correct although log positions are not assigned in commit order.
///
/// A read's snapshot tells which transactions had finished when it was taken: every one below its `xmax` except
/// those it lists as in progress (`pg_snapshot_xip`). Their entries, if committed, were visible to that read.
/// So the next read fetches only the entries of the others — transactions at or above `xmax`, and those that
/// were in progress — and drops the positions it has already delivered (from hints).
///
/// An earlier cursor kept only the snapshot's `xmin` and re-read every entry above it. A transaction left open
/// anywhere on the server holds `xmin` back, so while it ran every read (about once a second while hints
/// arrive) returned the whole tail of the log written since it began, and the cursor remembered all of it.
/// Now a read returns the entries committed since the last one plus those of transactions still open then.
struct ChangeCursor: Sendable {
    /// The last read's snapshot `xmin`: every entry not yet delivered has a transaction id at least this (used to
    /// tell whether pruning removed entries this reader never saw); `nil` before the first read.
    private(set) var horizon: UInt64?
    /// The last read's snapshot `xmax`: transactions from this id on had not started when it was taken.
    private var readFrom: UInt64?
    /// The transactions the last read's snapshot saw in progress (below ``readFrom``).
    private var running: Set<UInt64> = []
    /// Entries delivered (from hints) that the next read may return again: position → xid.
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

    /// What the next read fetches: entries whose transaction id is at least `from` (`nil` before the first read:
    /// from the reading snapshot's `xmin`, so a new reader starts from now), or one of `running`.
    struct Window: Sendable, Equatable {
        var from: String?
        var running: [String]
    }

    var window: Window {
        Window(from: self.readFrom.map { String($0) }, running: self.running.sorted().map { String($0) })
    }

    /// The horizon as text.
    var horizonText: String? { self.horizon.map { String($0) } }

    /// Whether the entry at `position` was already delivered (a hint for it needs no read).
    func hasDelivered(_ position: Int64) -> Bool { self.delivered[position] != nil }

    /// Whether the last read saw every entry of transaction `xid` (it had finished when the read's snapshot
    /// was taken).
    private func hasSeen(_ xid: UInt64) -> Bool {
        guard let readFrom = self.readFrom else { return false }
        return xid < readFrom && !self.running.contains(xid)
    }

    /// Records an entry that arrived in its hint, before any read returned it.
    /// - Returns: whether it is new (not delivered by a read or an earlier hint).
    mutating func deliverFromHint(position: Int64, xid: String) -> Bool {
        guard let xid = UInt64(xid), self.horizon != nil, !self.hasSeen(xid), self.delivered[position] != xid else {
            return false
        }
        self.delivered[position] = xid
        return true
    }

    /// Folds in one read of the log: the entries of ``window``, and the reading snapshot's `xmin`, `xmax` and
    /// transactions in progress (`running`; `xmax` defaults to `xmin`, a snapshot with none in progress), with
    /// the pruning watermark and the log's identity.
    mutating func advance(
        entries: [ChangeLogEntry], xmin: String, xmax: String? = nil, running: [String] = [], prunedThrough: String,
        logID: UUID? = nil
    ) -> Outcome {
        let xmin = UInt64(xmin) ?? 0
        let xmax = xmax.flatMap { UInt64($0) } ?? xmin
        let running = Set(running.compactMap { UInt64($0) })
        let pruned = UInt64(prunedThrough) ?? 0
        func startOver() -> Outcome {
            self.delivered = [:]
            for entry in entries { self.delivered[entry.position] = UInt64(entry.xid) ?? 0 }
            self.prunedThrough = pruned
            self.take(xmin: xmin, xmax: xmax, running: running)
            return .gap
        }
        if let logID, let known = self.logID, logID != known {
            // A new log: what was delivered from the old one says nothing about it, and the rows it described
            // are gone. Start over from this read.
            self.logID = logID
            return startOver()
        }
        if let logID { self.logID = logID }
        if let horizon = self.horizon, xmin < horizon {
            // A snapshot's xmin never goes down on one server (it is the oldest transaction id still running,
            // and ids are handed out in increasing order). It did: the server is a standby promoted without the
            // last commits it never received, or a restored backup. Its new transactions reuse ids below the
            // horizon, which every read and hint would skip, while the rows this stack cached from the lost
            // commits are gone. Start over from this read, as for a new log.
            return startOver()
        }
        // Keyed by position and xid: a rebuilt store restarts the positions. An entry of a transaction the last
        // snapshot saw finish was delivered by the read before (a read wider than ``window`` returns it again).
        let fresh = entries.filter {
            guard let xid = UInt64($0.xid) else { return true }
            return self.delivered[$0.position] != xid && !self.hasSeen(xid)
        }
        // Remembered until a snapshot has seen their transactions finish (at once, for a read's own snapshot,
        // unless it names no `xmax`).
        for entry in fresh { self.delivered[entry.position] = UInt64(entry.xid) ?? 0 }
        let lost = self.horizon.map { horizon in self.prunedThrough.map { pruned > $0 && pruned >= horizon } ?? false } ?? false
        self.prunedThrough = pruned
        self.take(xmin: max(self.horizon ?? xmin, xmin), xmax: max(self.readFrom ?? xmax, xmax), running: running)
        return lost ? .gap : .entries(fresh)
    }

    /// ``advance(entries:xmin:xmax:running:prunedThrough:logID:)`` with a read's snapshot.
    mutating func advance(
        entries: [ChangeLogEntry], snapshot: ChangeLog.ReadSnapshot, prunedThrough: String, logID: UUID? = nil
    ) -> Outcome {
        self.advance(
            entries: entries, xmin: snapshot.xmin, xmax: snapshot.xmax, running: snapshot.running,
            prunedThrough: prunedThrough, logID: logID)
    }

    /// Moves to a read's snapshot, forgetting the delivered entries it saw.
    private mutating func take(xmin: UInt64, xmax: UInt64, running: Set<UInt64>) {
        self.horizon = xmin
        self.readFrom = xmax
        self.running = running
        self.delivered = self.delivered.filter { !self.hasSeen($0.value) }
    }
}
