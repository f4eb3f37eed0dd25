import Foundation
import SkyrosStore

/// What a `DataStack/shutdown(timeout:)` whose deadline passed left uncommitted.
///
/// ```swift
/// let report = await stack.shutdown(timeout: .seconds(10))
/// for write in report.uncommitted { logger.error("not committed: \(write)") }
/// ```
public struct ShutdownReport: Sendable, CustomStringConvertible {
    /// Sets that were still queued at the deadline: not committed, reverted, their callers got
    /// ``DataStackError`` `.stackShutDown`.
    public var uncommitted: [UncommittedWrite]
    /// The group being committed at the deadline: its transaction was still running (or retrying), so each
    /// set's outcome is the one its caller receives; look up ``UncommittedWrite/commitID`` in the
    /// `skyros_commit_groups` table to know for sure (a row whose `first_id`–`last_id` range holds the id,
    /// not listed in its `failed`; see the CommitQueue article).
    public var inFlight: [UncommittedWrite]

    /// Whether everything committed before the deadline.
    public var isComplete: Bool { self.uncommitted.isEmpty && self.inFlight.isEmpty }

    public var description: String {
        if self.isComplete { return "every queued write committed" }
        return "\(self.uncommitted.count) queued writes not committed, \(self.inFlight.count) in flight: "
            + (self.uncommitted + self.inFlight).map(\.description).joined(separator: "; ")
    }
}

/// One saved write (change set) that did not commit, named by its commit id and its rows.
public struct UncommittedWrite: Sendable, Hashable, CustomStringConvertible {
    /// The idempotency key the set would have been recorded under in `skyros_commit_groups`.
    public var commitID: UUID
    /// The rows it changed, as "table id" (plus "delete where on table" entries).
    public var rows: [String]

    init(_ commit: QueuedCommit) {
        self.commitID = commit.commitID
        self.rows = commit.slots.map { slot in
            switch slot {
            case .row(let row): "\(row.key.table) \(row.key.id.text ?? "NULL")"
            case .setWrite(let operation): operation.label ?? "\(operation.updates ? "update" : "delete") where on \(operation.table)"
            }
        }
    }

    public var description: String { "commit \(self.commitID) (\(self.rows.joined(separator: ", ")))" }
}
