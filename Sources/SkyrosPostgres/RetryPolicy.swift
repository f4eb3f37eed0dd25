/// How a retry loop waits between attempts: exponential backoff from ``initialDelay`` by ``multiplier``,
/// capped at ``maximumDelay``, optionally shortened by a random ``jitter`` (so that many clients cut off by
/// one restart do not all come back in the same instant), and optionally bounded in total by ``budget``.
///
/// Every retry loop of Skyros (the commit queue's group retries, the start-up wait, the listener's reconnects,
/// the change feed's log reads, the relay's elections, observers' fetches, `migrate --wait`) takes its delays
/// from one of these. The delay is a pure function of the attempt number (and of the random sample for the
/// jitter), so the schedule is tested without a clock.
///
/// ```swift
/// let policy = RetryPolicy(initialDelay: .milliseconds(100), maximumDelay: .seconds(5))
/// policy.delay(afterAttempt: 1)   // 100 ms
/// policy.delay(afterAttempt: 4)   // 800 ms
/// policy.delay(afterAttempt: 9)   // 5 s (capped)
/// ```
package struct RetryPolicy: Sendable, Hashable {
    /// The delay after the first failed attempt.
    package var initialDelay: Duration
    /// Each further delay is the previous one times this (a value below 1 counts as 1).
    package var multiplier: Double
    /// No delay is longer than this.
    package var maximumDelay: Duration
    /// The fraction (0…1, clamped) by which a delay may be randomly shortened: 0.2 gives delays between 80%
    /// and 100% of the nominal one.
    package var jitter: Double
    /// How long the loop keeps retrying since its first failure; `nil`: until stopped.
    package var budget: Duration?

    package init(
        initialDelay: Duration, multiplier: Double = 2, maximumDelay: Duration, jitter: Double = 0, budget: Duration? = nil
    ) {
        self.initialDelay = max(initialDelay, .zero)
        self.multiplier = max(multiplier, 1)
        self.maximumDelay = max(maximumDelay, .zero)
        self.jitter = min(max(jitter, 0), 1)
        self.budget = budget
    }

    /// The nominal delay after failed attempt number `attempt` (1 for the first failure): the initial delay
    /// times the multiplier to the power `attempt − 1`, capped at ``maximumDelay`` (which also wins over a
    /// larger initial delay); no jitter.
    package func delay(afterAttempt attempt: Int) -> Duration {
        let exponent = max(attempt, 1) - 1
        let initial = Self.seconds(self.initialDelay)
        let maximum = Self.seconds(self.maximumDelay)
        // Stop multiplying at the cap: no overflow for any attempt number.
        var delay = initial
        var step = 0
        while step < exponent, delay < maximum, self.multiplier > 1 {
            delay *= self.multiplier
            step += 1
        }
        return delay >= maximum ? self.maximumDelay : .nanoseconds(Int64((delay * 1e9).rounded()))
    }

    /// The delay after failed attempt `attempt` with the jitter applied: `sample` (in 0..<1, a random number)
    /// shortens the nominal delay by up to ``jitter`` of it. Pure: the same sample gives the same delay.
    package func delay(afterAttempt attempt: Int, sample: Double) -> Duration {
        let nominal = self.delay(afterAttempt: attempt)
        guard self.jitter > 0 else { return nominal }
        return nominal * (1 - self.jitter * min(max(sample, 0), 1))
    }

    /// The delay after failed attempt `attempt`, jittered with a random sample.
    package func jitteredDelay(afterAttempt attempt: Int) -> Duration {
        self.delay(afterAttempt: attempt, sample: self.jitter > 0 ? Double.random(in: 0..<1) : 0)
    }

    /// Whether another attempt is allowed `elapsed` after the first failure (always, without a budget).
    package func allowsRetry(elapsed: Duration) -> Bool {
        guard let budget else { return true }
        return elapsed < budget
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
