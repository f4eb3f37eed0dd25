import Logging
import Synchronization

/// The log lines of a retry loop during an outage: the first failure at `warning`, then at most one
/// `warning` per ``interval`` saying how many attempts failed since the last line, and, once an attempt
/// succeeds again, one `notice` with the outage's length and failure count. A database down for a minute
/// gives a handful of lines instead of one per retry.
///
/// Shared by the tasks of one loop (a class with a lock): the commit queue's groups, for instance, report into
/// one log, so an outage spanning several groups is still one story. Time enters as arguments (defaulting to
/// now), so the rate limit is tested without waiting.
///
/// ```swift
/// let outage = OutageLog(logger: logger, event: "change log read")
/// while true {
///     do { try await read(); outage.recovered(); break }
///     catch { outage.failed(error, retryIn: delay); try await Task.sleep(for: delay) }
/// }
/// ```
package final class OutageLog: Sendable {
    /// Metadata keys of the records.
    package enum Key {
        /// Failed attempts in the outage so far (`warning`) or in all (`notice`).
        package static let failures = "skyros.retry.failures"
        /// Failed attempts since the previous line (not logged separately).
        package static let suppressed = "skyros.retry.suppressed"
        /// The time since the outage's first failure.
        package static let outage = "skyros.retry.outage"
        /// The pause before the next attempt.
        package static let retryIn = "skyros.retry.retry_in"
        package static let error = "skyros.error"
    }

    private struct State {
        var failures = 0
        var unlogged = 0
        var firstFailure: ContinuousClock.Instant?
        var lastLine: ContinuousClock.Instant?
    }

    private let logger: Logger
    /// What is retried, as the records name it ("group commit", "listener reconnect", …).
    package let event: String
    /// The least time between two `warning` lines of one outage.
    package let interval: Duration
    private let state = Mutex(State())
    /// Whether an outage is going on: a success without one takes no lock.
    private let failing = Atomic<Bool>(false)

    package init(logger: Logger, event: String, interval: Duration = .seconds(10)) {
        self.logger = logger
        self.event = event
        self.interval = interval
    }

    private enum Line {
        case first
        case again(suppressed: Int)
    }

    /// An attempt failed with `error`: logged at `warning` when it is the outage's first failure or the last
    /// line is at least ``interval`` old; counted otherwise. `metadata` is added to a logged line.
    package func failed(
        _ error: any Error, retryIn: Duration? = nil, metadata: Logger.Metadata = [:], at now: ContinuousClock.Instant = .now
    ) {
        let decision = self.state.withLock { state -> (line: Line, failures: Int, outage: Duration)? in
            self.failing.store(true, ordering: .relaxed)
            state.failures += 1
            let first = state.firstFailure ?? now
            state.firstFailure = first
            if let last = state.lastLine, now - last < self.interval {
                state.unlogged += 1
                return nil
            }
            let line: Line = state.lastLine == nil ? .first : .again(suppressed: state.unlogged)
            state.lastLine = now
            state.unlogged = 0
            return (line, state.failures, now - first)
        }
        guard let decision else { return }
        var metadata = metadata
        metadata[Key.error] = "\(error)"
        metadata[Key.failures] = "\(decision.failures)"
        if let retryIn { metadata[Key.retryIn] = "\(retryIn)" }
        switch decision.line {
        case .first:
            self.logger.warning("\(self.event) failed; retrying", metadata: metadata)
        case .again(let suppressed):
            metadata[Key.suppressed] = "\(suppressed)"
            metadata[Key.outage] = "\(decision.outage)"
            self.logger.warning("\(self.event) still failing; retrying", metadata: metadata)
        }
    }

    /// An attempt succeeded: after failures, one `notice` with their count and the outage's length, and the
    /// next failure starts a new outage. Without failures, nothing (no lock taken).
    package func recovered(metadata: Logger.Metadata = [:], at now: ContinuousClock.Instant = .now) {
        guard self.failing.load(ordering: .relaxed) else { return }
        let ended = self.state.withLock { state -> (failures: Int, outage: Duration)? in
            guard let first = state.firstFailure else { return nil }
            let ended = (state.failures, now - first)
            state = State()
            self.failing.store(false, ordering: .relaxed)
            return ended
        }
        guard let ended else { return }
        var metadata = metadata
        metadata[Key.failures] = "\(ended.failures)"
        metadata[Key.outage] = "\(ended.outage)"
        self.logger.notice("\(self.event) recovered", metadata: metadata)
    }

    /// Whether failures were recorded since the last recovery.
    package var isFailing: Bool { self.failing.load(ordering: .relaxed) }
}
