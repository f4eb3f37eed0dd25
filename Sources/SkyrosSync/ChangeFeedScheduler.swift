/// When the change feed reads its log, as a value: hints counted since the last read, whether a read that
/// advances the horizon runs, and the trailing read that follows the last hint of a run.
///
/// Hints deliver entries without moving the feed's horizon; only reads move it. A read to advance it is due
/// once hints arrived and the last read is ``ChangeFeedConfiguration/horizonReadInterval`` old or
/// ``ChangeFeedConfiguration/hintsPerHorizonRead`` hints ago; and a read follows the last hint of a run about
/// one interval after it, so that pruning entries delivered long ago never looks like entries lost.
///
/// Events take the time as an argument and return what to do; ``ChangeFeed`` runs it. Tested without a
/// clock or a server (`ChangeFeedSchedulerTests`).
package struct ChangeFeedScheduler: Sendable {
    package let hintsPerHorizonRead: Int
    package let horizonReadInterval: Duration
    /// This stack's own hints skipped since the last read (bounded, so the re-read window does not grow
    /// without end).
    private(set) package var skippedSinceRead = 0
    /// Entries delivered from hints since the last read (bounded like `skippedSinceRead`).
    private(set) package var hintsSinceRead = 0
    /// A read that advances the horizon runs (or was requested).
    private(set) package var horizonReadRunning = false
    /// The trailing read's timer runs.
    private(set) package var trailingScheduled = false
    private(set) package var stopped = false
    private var lastRead: ContinuousClock.Instant
    private var lastHint: ContinuousClock.Instant
    private var lastReadStarted: ContinuousClock.Instant

    package init(hintsPerHorizonRead: Int, horizonReadInterval: Duration, now: ContinuousClock.Instant) {
        self.hintsPerHorizonRead = hintsPerHorizonRead
        self.horizonReadInterval = horizonReadInterval
        (self.lastRead, self.lastHint, self.lastReadStarted) = (now, now, now)
    }

    /// Whether a read started after the last hint (the trailing read did its work: the horizon is past every
    /// entry hinted so far).
    package var hasReadSinceLastHint: Bool { self.lastReadStarted > self.lastHint }

    /// A hint arrived. Returns whether the caller starts the trailing read's timer (none runs).
    package mutating func hintArrived(now: ContinuousClock.Instant) -> Bool {
        self.lastHint = now
        guard !self.trailingScheduled, !self.stopped else { return false }
        self.trailingScheduled = true
        return true
    }

    package enum TrailingStep: Equatable, Sendable {
        /// A read started after the last hint: the timer ends (the next hint starts it again).
        case end
        /// Not yet (a read runs, or the last one is younger than the interval): wait another interval.
        case wait
        /// Read now (marked as running: report ``horizonReadFinished()``).
        case read
    }

    /// The trailing read's timer fired (one interval after it started or last fired).
    package mutating func trailingTimerFired(now: ContinuousClock.Instant) -> TrailingStep {
        guard self.lastReadStarted <= self.lastHint else {
            self.trailingScheduled = false
            return .end
        }
        guard !self.horizonReadRunning, now - self.lastRead >= self.horizonReadInterval else { return .wait }
        self.horizonReadRunning = true
        return .read
    }

    /// Whether a read to advance the horizon is due (and marks one as running).
    private mutating func claimHorizonRead(now: ContinuousClock.Instant) -> Bool {
        guard !self.horizonReadRunning else { return false }
        let hints = self.hintsSinceRead + self.skippedSinceRead
        guard hints > 0, hints >= self.hintsPerHorizonRead || now - self.lastRead >= self.horizonReadInterval else { return false }
        self.horizonReadRunning = true
        return true
    }

    /// A read that advanced the horizon ended (either way).
    package mutating func horizonReadFinished() { self.horizonReadRunning = false }

    /// This stack's own hint, not delivered yet: skipped unless ``ChangeFeedConfiguration/hintsPerHorizonRead``
    /// were skipped in a row without a read. Returns `nil` when it must not be skipped; else whether a horizon
    /// read is due (started by the caller).
    package mutating func skipOwnHint(now: ContinuousClock.Instant) -> Bool? {
        guard self.skippedSinceRead < self.hintsPerHorizonRead else { return nil }
        self.skippedSinceRead += 1
        return self.claimHorizonRead(now: now)
    }

    /// Whether an entry that arrived in its hint may be taken without reading the log (reads keep failing
    /// after too many).
    package var takesHintEntries: Bool { self.hintsSinceRead < 2 * self.hintsPerHorizonRead }

    /// An entry from a hint was taken. Returns whether a horizon read is due (started by the caller).
    package mutating func tookHintEntry(now: ContinuousClock.Instant) -> Bool {
        self.hintsSinceRead += 1
        return self.claimHorizonRead(now: now)
    }

    /// A read of the log started.
    package mutating func readStarted(now: ContinuousClock.Instant) { self.lastReadStarted = now }

    /// A read of the log succeeded: the horizon moved.
    package mutating func readSucceeded(now: ContinuousClock.Instant) {
        self.skippedSinceRead = 0
        self.hintsSinceRead = 0
        self.lastRead = now
    }

    /// The feed stopped: no timer starts again.
    package mutating func stop() { self.stopped = true }
}
