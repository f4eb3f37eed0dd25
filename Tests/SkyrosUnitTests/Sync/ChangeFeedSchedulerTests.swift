import Testing

@testable import SkyrosSync

/// The change feed's scheduling state (``ChangeFeedScheduler``), driven with explicit instants: when hints
/// start the trailing read's timer, when a read that advances the horizon is due, and what a read resets.
@Suite("Change feed scheduler")
struct ChangeFeedSchedulerTests {
    let start = ContinuousClock.now
    let interval = Duration.seconds(1)

    func scheduler(hintsPerRead: Int = 100) -> ChangeFeedScheduler {
        ChangeFeedScheduler(hintsPerHorizonRead: hintsPerRead, horizonReadInterval: self.interval, now: self.start)
    }

    @Test("The first hint of a run starts the trailing timer; later ones do not until it ends")
    func trailingTimerStartsOncePerRun() {
        var scheduler = self.scheduler()
        let result1 = scheduler.hintArrived(now: self.start + .milliseconds(10))
        #expect(result1)
        let result2 = scheduler.hintArrived(now: self.start + .milliseconds(20))
        #expect(!result2)
        #expect(scheduler.trailingScheduled)
        // A read started after the last hint: the timer ends, and the next hint starts it again.
        scheduler.readStarted(now: self.start + .milliseconds(30))
        let result3 = scheduler.trailingTimerFired(now: self.start + .seconds(1))
        #expect(result3 == .end)
        #expect(!scheduler.trailingScheduled)
        let result4 = scheduler.hintArrived(now: self.start + .seconds(2))
        #expect(result4)
    }

    @Test("The trailing timer reads once the last read is an interval old, and waits while one runs")
    func trailingTimerReadsWhenDue() {
        var scheduler = self.scheduler()
        _ = scheduler.hintArrived(now: self.start + .milliseconds(100))
        // The last read (at start) is younger than the interval.
        let result5 = scheduler.trailingTimerFired(now: self.start + .milliseconds(900))
        #expect(result5 == .wait)
        let result6 = scheduler.trailingTimerFired(now: self.start + .milliseconds(1100))
        #expect(result6 == .read)
        #expect(scheduler.horizonReadRunning)
        // While it runs, the timer waits; once it ends, the read started after the hint ends the timer.
        let result7 = scheduler.trailingTimerFired(now: self.start + .seconds(3))
        #expect(result7 == .wait)
        scheduler.readStarted(now: self.start + .milliseconds(1200))
        scheduler.readSucceeded(now: self.start + .milliseconds(1250))
        scheduler.horizonReadFinished()
        let result8 = scheduler.trailingTimerFired(now: self.start + .seconds(4))
        #expect(result8 == .end)
    }

    @Test("Own hints are skipped up to the bound; a read resets it")
    func ownHintsAreSkippedUpToTheBound() {
        var scheduler = self.scheduler(hintsPerRead: 3)
        let now = self.start + .milliseconds(10)
        #expect(scheduler.skipOwnHint(now: now) == false)
        #expect(scheduler.skipOwnHint(now: now) == false)
        // The third reaches the bound: a horizon read is due (marked running, so not claimed twice).
        #expect(scheduler.skipOwnHint(now: now) == true)
        #expect(scheduler.horizonReadRunning)
        #expect(scheduler.skipOwnHint(now: now) == nil)
        scheduler.readSucceeded(now: now)
        scheduler.horizonReadFinished()
        #expect(scheduler.skippedSinceRead == 0)
        #expect(scheduler.skipOwnHint(now: now) == false)
    }

    @Test("A horizon read is due an interval after the last read, once hints arrived")
    func horizonReadDueAfterTheInterval() {
        var scheduler = self.scheduler()
        let result9 = scheduler.tookHintEntry(now: self.start + .milliseconds(500))
        #expect(result9 == false)
        let result10 = scheduler.tookHintEntry(now: self.start + .milliseconds(1500))
        #expect(result10 == true)
        // Claimed once: the next hint does not start another while it runs.
        let result11 = scheduler.tookHintEntry(now: self.start + .milliseconds(1600))
        #expect(result11 == false)
        scheduler.horizonReadFinished()
        let result12 = scheduler.tookHintEntry(now: self.start + .milliseconds(1700))
        #expect(result12 == true)
    }

    @Test("Hint entries are taken without a read up to twice the bound; then the log must be read")
    func hintEntriesAreBounded() {
        var scheduler = self.scheduler(hintsPerRead: 2)
        let now = self.start + .milliseconds(1)
        for _ in 0..<4 {
            #expect(scheduler.takesHintEntries)
            _ = scheduler.tookHintEntry(now: now)
        }
        #expect(!scheduler.takesHintEntries)
        scheduler.readSucceeded(now: now)
        #expect(scheduler.takesHintEntries)
        #expect(scheduler.hintsSinceRead == 0)
    }

    @Test("A stopped scheduler starts no timer")
    func stoppedStartsNoTimer() {
        var scheduler = self.scheduler()
        scheduler.stop()
        let result13 = scheduler.hintArrived(now: self.start + .milliseconds(5))
        #expect(!result13)
        #expect(scheduler.stopped)
    }
}
