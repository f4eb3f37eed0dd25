@testable import SkyrosStack
import Testing

/// Every transition of the commit queue's bookkeeping, without a driver, a clock or a server.
@Suite struct CommitQueueStateMachineTests {
    struct TestCommit: QueueableCommit, Equatable, Sendable {
        let id: UInt64
        let bytes: Int
    }

    /// `Int` waiters: each writer waiting for room is a number.
    typealias Machine = CommitQueueStateMachine<TestCommit, Int>

    static func machine(commits: Int = 100, bytes: Int = 1_000_000, batch: Int = 4) -> Machine {
        Machine(limits: .init(maximumQueuedCommits: commits, maximumQueuedBytes: bytes, maximumBatchCount: batch))
    }

    /// Queues a commit of `bytes`; its id and whether the caller starts a drain, or `nil` when refused.
    @discardableResult
    static func enqueue(_ machine: inout Machine, bytes: Int = 10) -> (id: UInt64, startDrain: Bool)? {
        switch machine.enqueue({ TestCommit(id: $0, bytes: bytes) }) {
        case .refused: return nil
        case .queued(let id, let startDrain): return (id, startDrain)
        }
    }

    /// The ids of the group `step` sends, and whether it is the group built ahead; `nil` for any other step.
    static func sent(_ step: Machine.Step) -> (ids: [UInt64], usesAhead: Bool)? {
        guard case .send(let batch, let usesAhead) = step else { return nil }
        return (batch.map(\.id), usesAhead)
    }

    // `#expect` cannot call a mutating method on the value it checks: these take the machine `inout`.
    static func waitForRoom(_ machine: inout Machine, _ waiter: Int) -> Bool { machine.waitForRoom(waiter) }
    static func release(_ machine: inout Machine) -> Bool { machine.release() }
    static func claimDrainAhead(_ machine: inout Machine) -> Bool { machine.claimDrainAhead() }
    static func settled(_ machine: inout Machine, _ batch: [TestCommit], clearRunning: Bool = true) -> [Int] {
        machine.settled(batch, clearRunning: clearRunning)
    }

    static func isStop(_ step: Machine.Step) -> Bool { if case .stop = step { true } else { false } }
    static func isLinger(_ step: Machine.Step) -> Bool { if case .linger = step { true } else { false } }
    static func isSettleFirst(_ step: Machine.Step) -> Bool { if case .settleFirst = step { true } else { false } }

    // MARK: Enqueue

    @Test func enqueuedCommitsGetConsecutiveIdsAndOnlyTheFirstStartsADrain() throws {
        var machine = Self.machine()
        #expect(!machine.draining && machine.last == nil)
        let first = try #require(Self.enqueue(&machine, bytes: 5))
        #expect(first.id == 1 && first.startDrain)
        #expect(machine.draining)
        let second = try #require(Self.enqueue(&machine, bytes: 7))
        #expect(second.id == 2 && !second.startDrain)   // a drain runs already
        let third = try #require(Self.enqueue(&machine, bytes: 11))
        #expect(third.id == 3 && !third.startDrain)
        #expect(machine.queuedCount == 3)
        #expect(machine.unfinishedCount == 3 && machine.unfinishedBytes == 23)
        #expect(machine.last == TestCommit(id: 3, bytes: 11))
        // The drain ends when nothing is left; the next commit starts another, numbered on.
        _ = Self.sent(machine.nextStep(hasUnsettled: false, mayLinger: false, ahead: nil))
        #expect(Self.isStop(machine.nextStep(hasUnsettled: false, mayLinger: false, ahead: nil)))
        #expect(!machine.draining)
        let fourth = try #require(Self.enqueue(&machine))
        #expect(fourth.id == 4 && fourth.startDrain)
    }

    @Test func enqueueIsRefusedAfterShutdownAndAfterInvalidate() {
        var shutDown = Self.machine()
        Self.enqueue(&shutDown)
        _ = shutDown.shutdown()
        #expect(!shutDown.accepting)
        #expect(Self.enqueue(&shutDown) == nil)
        #expect(shutDown.queuedCount == 1 && shutDown.last?.id == 1)   // what was queued still commits

        var invalidated = Self.machine()
        Self.enqueue(&invalidated)
        _ = invalidated.invalidate()
        #expect(!invalidated.accepting)
        #expect(Self.enqueue(&invalidated) == nil)
        #expect(invalidated.queuedCount == 0)
    }

    // MARK: Room

    @Test func aQueueFullByCountRegistersWaitersAndSettlingFreesRoomAndReturnsThem() throws {
        var machine = Self.machine(commits: 2)
        #expect(machine.hasRoom)
        #expect(!Self.waitForRoom(&machine, 100))          // room: not registered, the caller goes on
        Self.enqueue(&machine)
        #expect(machine.hasRoom)
        Self.enqueue(&machine)
        #expect(!machine.hasRoom)
        #expect(Self.waitForRoom(&machine, 1))
        #expect(Self.waitForRoom(&machine, 2))
        let group = try #require(Self.sent(machine.nextStep(hasUnsettled: false, mayLinger: false, ahead: nil)))
        #expect(group.ids == [1, 2])
        #expect(!machine.hasRoom)                          // sent is not settled: still counted
        let batch = [TestCommit(id: 1, bytes: 10)]
        #expect(Self.settled(&machine, batch, clearRunning: false) == [1, 2])
        #expect(machine.unfinishedCount == 1 && machine.unfinishedBytes == 10)
        #expect(machine.hasRoom)
        #expect(!Self.waitForRoom(&machine, 3))
        #expect(Self.settled(&machine, [TestCommit(id: 2, bytes: 10)]) == [])   // the waiters were handed out once
        #expect(machine.unfinishedCount == 0 && machine.unfinishedBytes == 0)
    }

    @Test func aQueueFullByBytesRegistersWaitersUntilSettled() throws {
        var machine = Self.machine(commits: 100, bytes: 100)
        Self.enqueue(&machine, bytes: 60)
        #expect(machine.hasRoom)                           // 60 < 100
        Self.enqueue(&machine, bytes: 40)
        #expect(!machine.hasRoom)                          // 100 is the bound, not below it
        #expect(machine.unfinishedBytes == 100)
        #expect(Self.waitForRoom(&machine, 7))
        let group = try #require(Self.sent(machine.nextStep(hasUnsettled: false, mayLinger: false, ahead: nil)))
        #expect(Self.settled(&machine, [TestCommit(id: 1, bytes: 60)], clearRunning: false) == [7])
        #expect(machine.unfinishedBytes == 40 && machine.hasRoom)
        #expect(group.ids == [1, 2])
    }

    @Test func aQueueThatStoppedAcceptingHasRoomSoWritersFindOutWhenTheyQueue() {
        var machine = Self.machine(commits: 1)
        Self.enqueue(&machine)
        #expect(!machine.hasRoom)
        _ = machine.shutdown()
        #expect(machine.hasRoom)
        #expect(!Self.waitForRoom(&machine, 1))
    }

    // MARK: Next step

    @Test func anEmptyQueueStopsTheDrainOrLingersOrSettlesFirst() {
        var machine = Self.machine()
        #expect(Self.claimDrainAhead(&machine))
        // Something committed and not settled: settle before stopping.
        #expect(Self.isSettleFirst(machine.nextStep(hasUnsettled: true, mayLinger: true, ahead: nil)))
        #expect(machine.draining)
        // Accepting, not held, allowed to: linger (still draining).
        #expect(Self.isLinger(machine.nextStep(hasUnsettled: false, mayLinger: true, ahead: nil)))
        #expect(machine.draining)
        // Not allowed to linger: stop, and the drain is no longer marked running.
        #expect(Self.isStop(machine.nextStep(hasUnsettled: false, mayLinger: false, ahead: nil)))
        #expect(!machine.draining)
        // Held: no linger even when allowed.
        machine.hold()
        #expect(Self.isStop(machine.nextStep(hasUnsettled: false, mayLinger: true, ahead: nil)))
        // Shut down: no linger either.
        var shut = Self.machine()
        _ = shut.shutdown()
        #expect(Self.isStop(shut.nextStep(hasUnsettled: false, mayLinger: true, ahead: nil)))
        #expect(!shut.draining)
    }

    @Test func aGroupTakesAtMostTheBatchCountInSaveOrder() throws {
        var machine = Self.machine(batch: 2)
        for _ in 1...5 { Self.enqueue(&machine) }
        var groups: [[UInt64]] = []
        while let group = Self.sent(machine.nextStep(hasUnsettled: false, mayLinger: false, ahead: nil)) {
            #expect(!group.usesAhead)
            #expect(machine.running.map(\.id) == group.ids)
            groups.append(group.ids)
        }
        #expect(groups == [[1, 2], [3, 4], [5]])
        #expect(machine.queuedCount == 0 && !machine.draining)
        #expect(machine.unfinishedCount == 5)              // sent, not settled
    }

    @Test func anUnsettledGroupIsSettledFirstUnlessTheQueueStartsWithTheGroupBuiltAhead() throws {
        var machine = Self.machine(batch: 4)
        for _ in 1...5 { Self.enqueue(&machine) }
        // No group built ahead: the previous group settles first, and nothing is taken.
        #expect(Self.isSettleFirst(machine.nextStep(hasUnsettled: true, mayLinger: false, ahead: nil)))
        #expect(machine.queuedCount == 5)
        // A group built ahead that does not start at the head is ignored.
        let stale = Machine.Ahead(firstCommit: 3, count: 2)
        #expect(Self.isSettleFirst(machine.nextStep(hasUnsettled: true, mayLinger: false, ahead: stale)))
        #expect(machine.queuedCount == 5)
        // One that starts at the head is sent with its own count, even before the previous group settles.
        let ahead = Machine.Ahead(firstCommit: 1, count: 2)
        let group = try #require(Self.sent(machine.nextStep(hasUnsettled: true, mayLinger: false, ahead: ahead)))
        #expect(group.ids == [1, 2] && group.usesAhead)
        #expect(machine.running.map(\.id) == [1, 2])
        // The same (now stale) one again is ignored: a full group from the head, not built ahead.
        let rest = try #require(Self.sent(machine.nextStep(hasUnsettled: false, mayLinger: false, ahead: ahead)))
        #expect(rest.ids == [3, 4, 5] && !rest.usesAhead)
    }

    @Test func aGroupBuiltAheadWithMoreSetsThanAreQueuedIsIgnored() throws {
        var machine = Self.machine(batch: 4)
        for _ in 1...2 { Self.enqueue(&machine) }
        let group = try #require(Self.sent(
            machine.nextStep(hasUnsettled: false, mayLinger: false, ahead: Machine.Ahead(firstCommit: 1, count: 3))))
        #expect(group.ids == [1, 2] && !group.usesAhead)
    }

    @Test func settlingAnEarlierGroupLeavesTheRunningLaterOne() throws {
        var machine = Self.machine(batch: 2)
        for _ in 1...3 { Self.enqueue(&machine) }
        let first = try #require(Self.sent(machine.nextStep(hasUnsettled: false, mayLinger: false, ahead: nil)))
        let second = try #require(Self.sent(
            machine.nextStep(hasUnsettled: true, mayLinger: false, ahead: Machine.Ahead(firstCommit: 3, count: 1))))
        #expect(first.ids == [1, 2] && second.ids == [3] && second.usesAhead)
        _ = machine.settled(first.ids.map { TestCommit(id: $0, bytes: 10) })
        #expect(machine.running.map(\.id) == [3])          // the later group still runs
        _ = machine.settled([TestCommit(id: 3, bytes: 10)], clearRunning: false)
        #expect(machine.running.map(\.id) == [3])          // not cleared when told not to
        #expect(machine.unfinishedCount == 0)
    }

    @Test func aLongQueueDrainsInOrderAcrossCompaction() throws {
        var machine = Self.machine(commits: 1_000, batch: 3)
        for _ in 1...200 { Self.enqueue(&machine) }
        var ids: [UInt64] = []
        while true {
            if let next = machine.nextGroup.first { #expect(next.id == UInt64(ids.count + 1)) }
            guard let group = Self.sent(machine.nextStep(hasUnsettled: false, mayLinger: false, ahead: nil)) else { break }
            ids += group.ids
            if ids.count == 150 {                          // more commits while the head was compacted away
                for _ in 1...10 { Self.enqueue(&machine) }
            }
        }
        #expect(ids == Array(1...210))
    }

    // MARK: Hold and release

    @Test func aHeldQueueSendsNothingAndReleaseStartsADrain() throws {
        var machine = Self.machine()
        machine.hold()
        #expect(machine.held)
        let queued = try #require(Self.enqueue(&machine))
        #expect(!queued.startDrain && !machine.draining)   // held: no drain
        #expect(machine.nextGroup.isEmpty)
        #expect(Self.isStop(machine.nextStep(hasUnsettled: false, mayLinger: true, ahead: nil)))
        #expect(machine.queuedCount == 1)
        #expect(Self.release(&machine))                          // the caller starts the drain
        #expect(!machine.held && machine.draining)
        #expect(!Self.release(&machine))                         // one runs already
        let group = try #require(Self.sent(machine.nextStep(hasUnsettled: false, mayLinger: false, ahead: nil)))
        #expect(group.ids == [1])
    }

    @Test func holdingARunningDrainStopsItAtItsNextStep() throws {
        var machine = Self.machine()
        #expect(try #require(Self.enqueue(&machine)).startDrain)
        machine.hold()
        #expect(Self.isSettleFirst(machine.nextStep(hasUnsettled: true, mayLinger: false, ahead: nil)))
        #expect(Self.isStop(machine.nextStep(hasUnsettled: false, mayLinger: false, ahead: nil)))
        #expect(!machine.draining && machine.queuedCount == 1)
        #expect(Self.release(&machine))
    }

    @Test func releaseOfAnEmptyQueueStartsNoDrain() {
        var machine = Self.machine()
        machine.hold()
        #expect(!Self.release(&machine))
        #expect(!machine.held && !machine.draining)
    }

    // MARK: Claiming a drain ahead

    @Test func aDrainClaimedAheadIsClaimedOnceAndNotWhileHeldOrShut() throws {
        var machine = Self.machine()
        #expect(Self.claimDrainAhead(&machine))
        #expect(machine.draining)
        #expect(!Self.claimDrainAhead(&machine))
        #expect(try #require(Self.enqueue(&machine)).startDrain == false)   // the claimed drain takes it
        let group = try #require(Self.sent(machine.nextStep(hasUnsettled: false, mayLinger: false, ahead: nil)))
        #expect(group.ids == [1])
        #expect(Self.isStop(machine.nextStep(hasUnsettled: false, mayLinger: false, ahead: nil)))

        var held = Self.machine()
        held.hold()
        #expect(!Self.claimDrainAhead(&held) && !held.draining)

        var shut = Self.machine()
        _ = shut.shutdown()
        #expect(!Self.claimDrainAhead(&shut) && !shut.draining)
    }

    // MARK: What a drain looks at

    @Test func nextGroupEndsLingerAndGroupIsShortDescribeTheQueueWithoutTakingFromIt() {
        var machine = Self.machine(batch: 3)
        #expect(machine.nextGroup.isEmpty)
        #expect(!machine.endsLinger)
        #expect(machine.groupIsShort)
        for _ in 1...2 { Self.enqueue(&machine) }
        #expect(machine.nextGroup.map(\.id) == [1, 2])
        #expect(machine.endsLinger)                         // something was queued
        #expect(machine.groupIsShort)                       // 2 < 3
        for _ in 1...2 { Self.enqueue(&machine) }
        #expect(machine.nextGroup.map(\.id) == [1, 2, 3])  // at most one group
        #expect(!machine.groupIsShort)
        #expect(machine.queuedCount == 4)                   // nothing taken

        var held = Self.machine()
        held.hold()
        #expect(held.endsLinger)
        var shut = Self.machine()
        _ = shut.shutdown()
        #expect(shut.endsLinger)
    }

    // MARK: Shutdown, deadline, invalidation

    @Test func shutdownWithADeadlineStopsAcceptingThenAbandonsWhatIsQueuedAndReportsTheGroupInFlight() throws {
        var machine = Self.machine(commits: 5, batch: 2)
        machine.hold()                                      // a rebuilt store's first moments
        for _ in 1...5 { Self.enqueue(&machine) }
        #expect(Self.waitForRoom(&machine, 41) && Self.waitForRoom(&machine, 42))
        #expect(!machine.draining)

        let shutdown = machine.shutdown()
        #expect(!machine.accepting && !machine.held)        // the hold is released: what is queued commits
        #expect(shutdown.startDrain && machine.draining)
        #expect(shutdown.waiters == [41, 42])
        #expect(shutdown.last == TestCommit(id: 5, bytes: 10))
        #expect(Self.enqueue(&machine) == nil)
        #expect(Self.settled(&machine, []) == [])                  // the waiters were handed to the shutdown

        let inFlight = try #require(Self.sent(machine.nextStep(hasUnsettled: false, mayLinger: true, ahead: nil)))
        #expect(inFlight.ids == [1, 2])
        #expect(!machine.abandoned)

        let abandoned = machine.deadlinePassed()
        #expect(machine.abandoned && machine.held)
        #expect(abandoned.queued.map(\.id) == [3, 4, 5])
        #expect(abandoned.inFlight.map(\.id) == [1, 2])
        #expect(machine.queuedCount == 0 && machine.nextGroup.isEmpty)
        // Nothing more is sent; the drain stops once the group in flight settled.
        #expect(Self.isSettleFirst(machine.nextStep(hasUnsettled: true, mayLinger: true, ahead: nil)))
        _ = machine.settled(inFlight.ids.map { TestCommit(id: $0, bytes: 10) })
        #expect(machine.running.isEmpty)
        #expect(Self.isStop(machine.nextStep(hasUnsettled: false, mayLinger: true, ahead: nil)))
        #expect(!machine.draining)
    }

    @Test func shutdownWhileADrainRunsStartsNoOtherAndAnEmptyQueueHasNoLastCommit() throws {
        var machine = Self.machine()
        #expect(try #require(Self.enqueue(&machine)).startDrain)
        let shutdown = machine.shutdown()
        #expect(!shutdown.startDrain && shutdown.waiters.isEmpty && shutdown.last?.id == 1)

        var empty = Self.machine()
        let emptyShutdown = empty.shutdown()
        #expect(!emptyShutdown.startDrain && emptyShutdown.last == nil)
        #expect(empty.deadlinePassed().queued.isEmpty)
    }

    @Test func invalidateReturnsTheQueuedCommitsAndTheWaiters() throws {
        var machine = Self.machine(commits: 4, batch: 2)
        for _ in 1...4 { Self.enqueue(&machine) }
        #expect(Self.waitForRoom(&machine, 9))
        let sent = try #require(Self.sent(machine.nextStep(hasUnsettled: false, mayLinger: false, ahead: nil)))
        #expect(sent.ids == [1, 2])
        let invalidated = machine.invalidate()
        #expect(invalidated.queued.map(\.id) == [3, 4])
        #expect(invalidated.waiters == [9])
        #expect(!machine.accepting && machine.queuedCount == 0)
        #expect(machine.nextGroup.isEmpty)
        #expect(Self.settled(&machine, []) == [])                  // the waiters were handed out
        #expect(Self.enqueue(&machine) == nil)
    }
}
