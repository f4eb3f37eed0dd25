import Foundation
import Logging
import SkyrosPostgres
import SkyrosStore

/// A change set in the commit queue: one save's slots, in save order (a class: the queue, a group and the
/// settlement pass it around, one reference each).
package final class QueuedCommit: QueueableCommit, Sendable {
    package let id: UInt64
    let slots: [ResolvedSlot]
    let ticket: CommitTicket
    /// The idempotency key recorded in the commit log in the commit's own transaction.
    let commitID: UUID
    let policy: MergePolicy
    /// Approximate row bytes, counted against ``CommitQueueConfiguration/maximumQueuedBytes``.
    package let bytes: Int
    /// Each slot's approximate row size (0 for a deletion), measured once at enqueue for the cache.
    let slotBytes: [Int]
    /// Each slot's column values, encoded once at enqueue (`nil` for a deletion): the size above, and the
    /// values an insert binds.
    let slotValues: [[PGValue]?]
    /// The writing task's trace, when it had one: the group commit's span goes under it.
    let trace: CommitTrace?
    /// The logger the writer passed for this write's own records (its failure), when it passed one: a
    /// request's logger, so the record carries the request's id.
    let logger: Logger?

    init(
        id: UInt64, slots: [ResolvedSlot], ticket: CommitTicket, commitID: UUID, policy: MergePolicy, bytes: Int,
        slotBytes: [Int], slotValues: [[PGValue]?], trace: CommitTrace? = nil,
        logger: Logger? = nil
    ) {
        self.id = id
        self.slots = slots
        self.ticket = ticket
        self.commitID = commitID
        self.policy = policy
        self.bytes = bytes
        self.slotBytes = slotBytes
        self.slotValues = slotValues
        self.trace = trace
        self.logger = logger
    }
}
