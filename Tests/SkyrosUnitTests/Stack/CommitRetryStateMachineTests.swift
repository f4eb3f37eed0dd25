import SkyrosPostgres
@testable import SkyrosStack
import Testing

/// The attempts at committing one group: backoff, the log checks between attempts, one-by-one commits, giving
/// up — time enters only as `elapsed`.
@Suite struct CommitRetryStateMachineTests {
    typealias Machine = CommitRetryStateMachine
    typealias Failure = CommitRetryStateMachine.Failure

    static let policy = RetryPolicy(initialDelay: .milliseconds(100), maximumDelay: .seconds(1), budget: .seconds(30))
    static let transient = Failure(transient: true)
    static let ambiguous = Failure(transient: true, mayHaveCommitted: true)
    static let permanent = Failure()

    @Test func theFirstAttemptSendsTheGroupBuiltAhead() {
        let machine = Machine(policy: Self.policy)
        #expect(machine.next == .send(usePrepared: true))
        #expect(machine.attempt == 0)
    }

    @Test func aTransientFailureRetriesAfterTheInitialDelayAndTheRetryChecksTheLogFirst() {
        var machine = Machine(policy: Self.policy)
        let action = machine.failed(Self.transient, remaining: 3, abandoned: false, elapsed: .milliseconds(5))
        #expect(action == .retry(after: .milliseconds(100), attempt: 1))
        #expect(machine.attempt == 1)
        #expect(machine.next == .checkLog)
        #expect(machine.next == .checkLog)                 // asking does not change it
        machine.logChecked()
        #expect(machine.next == .send(usePrepared: false)) // a retry builds its group again
    }

    @Test func theBackoffDoublesAndIsCappedAtTheMaximumDelay() {
        var machine = Machine(policy: Self.policy)
        var actions: [Machine.Action] = []
        for _ in 1...7 {
            actions.append(machine.failed(Self.transient, remaining: 2, abandoned: false, elapsed: .seconds(1)))
            machine.logChecked()
        }
        let delays: [Duration] = [.milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800), .seconds(1), .seconds(1), .seconds(1)]
        #expect(actions == delays.enumerated().map { .retry(after: $1, attempt: $0 + 1) })
    }

    @Test func aLongAttemptCountStaysCapped() {
        var machine = Machine(policy: RetryPolicy(initialDelay: .milliseconds(1), maximumDelay: .seconds(3_600), budget: .seconds(30)))
        var last: Machine.Action?
        for _ in 1...40 { last = machine.failed(Self.transient, remaining: 1, abandoned: false, elapsed: .zero) }
        // The doubling stops at the cap (2^22 ms > 3600 s): no overflow.
        #expect(last == .retry(after: .seconds(3_600), attempt: 40))
    }

    @Test func retryingStopsOnceTheMaximumDurationHasElapsed() {
        var machine = Machine(policy: Self.policy)
        #expect(machine.failed(Self.transient, remaining: 1, abandoned: false, elapsed: .seconds(29)) == .retry(after: .milliseconds(100), attempt: 1))
        machine.logChecked()
        #expect(machine.failed(Self.transient, remaining: 1, abandoned: false, elapsed: .seconds(30)) == .giveUp(askLogFirst: false))
        #expect(machine.attempt == 1)

        var late = Machine(policy: Self.policy)
        #expect(late.failed(Self.transient, remaining: 1, abandoned: false, elapsed: .seconds(45)) == .giveUp(askLogFirst: false))
    }

    @Test func aPermanentFailureGivesUpAtOnce() {
        var machine = Machine(policy: Self.policy)
        #expect(machine.failed(Self.permanent, remaining: 4, abandoned: false, elapsed: .zero) == .giveUp(askLogFirst: false))
        #expect(machine.attempt == 0)
    }

    /// A transient failure that may have committed (the connection broke around `COMMIT`): the retry reads the
    /// log first. When the attempt after it fails for good, the log need not be asked again — unless no read of
    /// the log since resolved that ambiguous attempt.
    @Test func aRetryAfterAnAmbiguousCommitAsksTheLogBeforeGivingUpOnlyWhenTheLogWasNotRead() {
        var checked = Machine(policy: Self.policy)
        #expect(checked.failed(Self.ambiguous, remaining: 2, abandoned: false, elapsed: .zero) == .retry(after: .milliseconds(100), attempt: 1))
        #expect(checked.next == .checkLog)
        checked.logChecked()
        #expect(checked.next == .send(usePrepared: false))
        #expect(checked.failed(Self.permanent, remaining: 2, abandoned: false, elapsed: .seconds(1)) == .giveUp(askLogFirst: false))

        var unchecked = Machine(policy: Self.policy)
        #expect(unchecked.failed(Self.ambiguous, remaining: 2, abandoned: false, elapsed: .zero) == .retry(after: .milliseconds(100), attempt: 1))
        #expect(unchecked.failed(Self.permanent, remaining: 2, abandoned: false, elapsed: .seconds(1)) == .giveUp(askLogFirst: true))

        // An ambiguous failure that is not worth retrying asks the log once, too.
        var once = Machine(policy: Self.policy)
        #expect(once.failed(Failure(mayHaveCommitted: true), remaining: 1, abandoned: false, elapsed: .zero) == .giveUp(askLogFirst: true))
        // So does an ambiguous failure when the time is up.
        var timedOut = Machine(policy: Self.policy)
        #expect(timedOut.failed(Self.ambiguous, remaining: 1, abandoned: false, elapsed: .seconds(31)) == .giveUp(askLogFirst: true))
    }

    @Test func anAbandonedGroupGivesUpInsteadOfRetryingOrCommittingOneByOne() {
        var machine = Machine(policy: Self.policy)
        #expect(machine.failed(Self.transient, remaining: 3, abandoned: true, elapsed: .zero) == .giveUp(askLogFirst: false))
        #expect(machine.failed(Failure(failedAtCommit: true), remaining: 3, abandoned: true, elapsed: .zero) == .giveUp(askLogFirst: false))
        #expect(machine.attempt == 0)

        var ambiguous = Machine(policy: Self.policy)
        #expect(ambiguous.failed(Self.ambiguous, remaining: 3, abandoned: false, elapsed: .zero) == .retry(after: .milliseconds(100), attempt: 1))
        #expect(ambiguous.failed(Self.transient, remaining: 3, abandoned: true, elapsed: .zero) == .giveUp(askLogFirst: true))
    }

    @Test func aFailureAtCommitCommitsTheRemainingSetsOneByOneWhenThereIsMoreThanOne() {
        var machine = Machine(policy: Self.policy)
        #expect(machine.failed(Failure(failedAtCommit: true), remaining: 2, abandoned: false, elapsed: .zero) == .commitOneByOne)
        #expect(machine.failed(Failure(failedAtCommit: true, transient: true), remaining: 5, abandoned: false, elapsed: .zero) == .commitOneByOne)
        #expect(machine.attempt == 0 && machine.next == .send(usePrepared: true))   // not an attempt of the group

        // One set left: its own failure.
        #expect(machine.failed(Failure(failedAtCommit: true), remaining: 1, abandoned: false, elapsed: .zero) == .giveUp(askLogFirst: false))
        #expect(machine.failed(Failure(failedAtCommit: true, transient: true), remaining: 1, abandoned: false, elapsed: .zero)
            == .retry(after: .milliseconds(100), attempt: 1))
    }
}
