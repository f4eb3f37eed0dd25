import Foundation
import SkyrosPostgres
import SkyrosStore
@testable import SkyrosSync
import Testing

/// When the relay writes its next batch: at once after an idle moment, once per window under a steady stream, at
/// once again while a whole batch waits.
@Suite struct RelayPacingTests {
    private let start = ContinuousClock.now

    @Test func aCommitReachingAnIdleRelayIsWrittenAtOnce() {
        var pacing = RelayPacing(window: .milliseconds(10))
        #expect(pacing.nextBatchDue(queued: 1) == nil)
        pacing.started(at: self.start)
        // Nothing arrived while that batch was written: the next commit is idle traffic, not a stream.
        pacing.finished(queuedBehind: 0)
        #expect(pacing.nextBatchDue(queued: 1) == nil)
    }

    @Test func underAStreamTheNextBatchWaitsOneWindowAfterThePreviousStarted() {
        var pacing = RelayPacing(window: .milliseconds(10))
        pacing.started(at: self.start)
        pacing.finished(queuedBehind: 3)
        #expect(pacing.nextBatchDue(queued: 3) == self.start + .milliseconds(10))
        #expect(pacing.nextBatchDue(queued: 500) == self.start + .milliseconds(10))
        // The stream stops: the batch after the one that found nothing behind it is due at once again.
        pacing.started(at: self.start + .milliseconds(10))
        pacing.finished(queuedBehind: 0)
        #expect(pacing.nextBatchDue(queued: 1) == nil)
    }

    @Test func aBacklogOfAWholeBatchDrainsWithoutWaiting() {
        var pacing = RelayPacing(window: .milliseconds(10))
        pacing.started(at: self.start)
        pacing.finished(queuedBehind: RelayQueue.batchLimit)
        #expect(pacing.nextBatchDue(queued: RelayQueue.batchLimit) == nil)
        #expect(pacing.nextBatchDue(queued: RelayQueue.batchLimit - 1) == self.start + .milliseconds(10))
    }

    @Test func aZeroWindowNeverWaits() {
        var pacing = RelayPacing(window: .zero)
        pacing.started(at: self.start)
        pacing.finished(queuedBehind: 5)
        #expect(pacing.nextBatchDue(queued: 5) == self.start)
    }
}

/// The relay's queue keeps a keepalive's position that came while transactions before it were still to be written,
/// and hands it to the writer once they are: the server sends its next keepalive only much later.
@Suite struct RelayQueueKeepaliveTests {
    private func transaction(_ end: UInt64) -> RelayedTransaction {
        RelayedTransaction(endLSN: LSN(end), committedAt: PGTimestamp(rawValue: 0), origin: UUID(), changes: [])
    }

    @Test func anIdleQueueConfirmsAKeepaliveAtOnce() {
        let queue = RelayQueue()
        #expect(queue.idleOrKeep(LSN(100)) == LSN(100))
        #expect(queue.finishedBatch() == nil)
    }

    @Test func aKeepaliveDuringAWriteIsConfirmedOnceTheQueueIsEmpty() {
        let queue = RelayQueue()
        queue.append(self.transaction(10))
        let batch = queue.takeBatch()
        #expect(batch?.count == 1)
        #expect(queue.idleOrKeep(LSN(50)) == nil)            // being written
        queue.append(self.transaction(60))                     // arrived after the keepalive
        #expect(queue.idleOrKeep(LSN(40)) == nil)            // an older keepalive does not lower it
        #expect(queue.finishedBatch() == nil)                  // one still queued
        _ = queue.takeBatch()
        #expect(queue.finishedBatch() == LSN(50))
        #expect(queue.finishedBatch() == nil)                  // handed over once
    }
}
