import Logging
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// The one backoff schedule of every retry loop: a pure function of the attempt (and of the jitter's sample).
@Suite struct RetryPolicyTests {
    @Test func delaysGrowByTheMultiplierUpToTheCap() {
        let policy = RetryPolicy(initialDelay: .milliseconds(250), maximumDelay: .seconds(2))
        #expect((1...6).map { policy.delay(afterAttempt: $0) }
            == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(2), .seconds(2)])
        // Attempt 0 (or less) is the first delay.
        #expect(policy.delay(afterAttempt: 0) == .milliseconds(250))
    }

    @Test func anotherMultiplierAndAConstantSchedule() {
        let triple = RetryPolicy(initialDelay: .milliseconds(10), multiplier: 3, maximumDelay: .seconds(1))
        #expect((1...5).map { triple.delay(afterAttempt: $0) }
            == [.milliseconds(10), .milliseconds(30), .milliseconds(90), .milliseconds(270), .milliseconds(810)])
        #expect(triple.delay(afterAttempt: 6) == .seconds(1))
        let constant = RetryPolicy(initialDelay: .milliseconds(100), multiplier: 1, maximumDelay: .milliseconds(100))
        #expect((1...50).allSatisfy { constant.delay(afterAttempt: $0) == .milliseconds(100) })
    }

    @Test func aHugeAttemptNumberStaysAtTheCapWithoutOverflow() {
        let policy = RetryPolicy(initialDelay: .nanoseconds(1), maximumDelay: .seconds(3_600))
        #expect(policy.delay(afterAttempt: .max) == .seconds(3_600))
        #expect(policy.delay(afterAttempt: 10_000) == .seconds(3_600))
    }

    @Test func anInitialDelayAboveTheCapIsTheCap() {
        let policy = RetryPolicy(initialDelay: .seconds(5), maximumDelay: .seconds(1))
        #expect(policy.delay(afterAttempt: 1) == .seconds(1))
        #expect(policy.delay(afterAttempt: 3) == .seconds(1))
    }

    @Test func jitterShortensByUpToItsFractionAndIsPureInItsSample() {
        let policy = RetryPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(8), jitter: 0.25)
        #expect(policy.delay(afterAttempt: 2, sample: 0) == .seconds(2))
        #expect(policy.delay(afterAttempt: 2, sample: 0.5) == .milliseconds(1_750))
        #expect(policy.delay(afterAttempt: 2, sample: 0.999_999) > .milliseconds(1_500))
        #expect(policy.delay(afterAttempt: 2, sample: 0.5) == policy.delay(afterAttempt: 2, sample: 0.5))
        for _ in 0..<200 {
            let delay = policy.jitteredDelay(afterAttempt: 4)
            #expect(delay > .seconds(6) && delay <= .seconds(8))
        }
        // Without jitter the sample does not matter.
        let plain = RetryPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(8))
        #expect(plain.delay(afterAttempt: 3, sample: 0.9) == .seconds(4))
        #expect(plain.jitteredDelay(afterAttempt: 3) == .seconds(4))
    }

    @Test func theBudgetBoundsRetryingAndNoBudgetNever() {
        let bounded = RetryPolicy(initialDelay: .milliseconds(20), maximumDelay: .seconds(1), budget: .seconds(300))
        #expect(bounded.allowsRetry(elapsed: .seconds(299)))
        #expect(!bounded.allowsRetry(elapsed: .seconds(300)))
        let unbounded = RetryPolicy(initialDelay: .milliseconds(20), maximumDelay: .seconds(1))
        #expect(unbounded.allowsRetry(elapsed: .seconds(86_400 * 365)))
    }
}

/// An outage's log lines: the first failure and at most one line per interval at `warning`, one `notice` when it
/// ends. Time is given, so nothing waits.
@Suite struct OutageLogTests {
    struct Failure: Error, CustomStringConvertible {
        var description: String { "connection refused" }
    }

    static func log(interval: Duration = .seconds(10)) -> (OutageLog, RecordingLogHandler) {
        let (logger, handler) = RecordingLogHandler.logger()
        return (OutageLog(logger: logger, event: "group commit", interval: interval), handler)
    }

    @Test func aMinuteOfFailuresEveryHalfSecondLogsSixWarningsAndOneNotice() {
        let (outage, handler) = Self.log()
        let start = ContinuousClock.now
        // 120 failures, one every 500 ms, over 60 s.
        for attempt in 0..<120 {
            outage.failed(Failure(), retryIn: .milliseconds(500), at: start + .milliseconds(500 * attempt))
        }
        outage.recovered(at: start + .seconds(61))
        let warnings = handler.entries.filter { $0.level == .warning }
        // At 0, 10, 20, 30, 40, 50 s (and none at 59.5 s: not 10 s after the one at 50 s).
        #expect(warnings.count == 6)
        #expect(warnings.first?.message.description == "group commit failed; retrying")
        #expect(warnings.first?.metadata[OutageLog.Key.failures]?.description == "1")
        #expect(warnings.first?.metadata[OutageLog.Key.error]?.description == "connection refused")
        #expect(warnings.first?.metadata[OutageLog.Key.retryIn]?.description == "0.5 seconds")
        #expect(warnings.dropFirst().allSatisfy { $0.message.description == "group commit still failing; retrying" })
        // Each later line says how many failures it stands for.
        #expect(warnings[1].metadata[OutageLog.Key.suppressed]?.description == "19")
        #expect(warnings[1].metadata[OutageLog.Key.failures]?.description == "21")
        #expect(warnings[1].metadata[OutageLog.Key.outage]?.description == "10.0 seconds")
        let notices = handler.entries.filter { $0.level == .notice }
        #expect(notices.count == 1)
        #expect(notices.first?.message.description == "group commit recovered")
        #expect(notices.first?.metadata[OutageLog.Key.failures]?.description == "120")
        #expect(notices.first?.metadata[OutageLog.Key.outage]?.description == "61.0 seconds")
        #expect(handler.entries.count == 7)
        #expect(!outage.isFailing)
    }

    @Test func aSuccessWithoutFailuresLogsNothingAndTheNextOutageStartsAfresh() {
        let (outage, handler) = Self.log()
        let start = ContinuousClock.now
        outage.recovered(at: start)
        #expect(handler.entries.isEmpty)
        outage.failed(Failure(), at: start)
        outage.failed(Failure(), at: start + .seconds(1))
        outage.recovered(at: start + .seconds(2))
        // A second outage right after: its first failure is logged again (not rate-limited by the first's).
        outage.failed(Failure(), metadata: ["skyros.stack.sets": "3"], at: start + .seconds(3))
        let levels = handler.entries.map(\.level)
        #expect(levels == [.warning, .notice, .warning])
        #expect(handler.entries[1].metadata[OutageLog.Key.failures]?.description == "2")
        #expect(handler.entries[2].metadata[OutageLog.Key.failures]?.description == "1")
        #expect(handler.entries[2].metadata["skyros.stack.sets"]?.description == "3")
        #expect(outage.isFailing)
    }
}
