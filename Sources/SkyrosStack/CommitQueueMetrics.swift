import Metrics
import Synchronization
import SkyrosPostgres
import SkyrosStore

/// Counters of a stack's commit queue, read through ``DataStack/commitQueueStatistics`` and reported to
/// swift-metrics (whatever backend the application bootstrapped):
///
/// | metric | kind | meaning |
/// |---|---|---|
/// | `skyros.commit.queue_depth` | gauge | sets queued or being committed |
/// | `skyros.commit.batch_size` | recorder | sets per group-commit transaction |
/// | `skyros.commit.latency` | timer | time from sending a group to its outcome, retries included |
/// | `skyros.commit.sets` | counter | sets finished (committed or failed) |
/// | `skyros.commit.conflicts` | counter | sets failed with a version conflict |
/// | `skyros.commit.retries` | counter | group retries after transient failures |
/// | `skyros.commit.failures` | counter | sets that failed for good and were reverted |
///
/// Each carries the stack's dimensions (`stack`: `DataStackConfiguration.name`).
package final class CommitQueueMetrics: Sendable {
    final class Gauge: Sendable {
        private let value = Atomic<Int>(0)
        private let peak = Atomic<Int>(0)
        private let reported: Metrics.Gauge?
        init(_ label: String? = nil, in scope: MetricsScope = MetricsScope()) { self.reported = label.map { scope.gauge($0) } }
        func record(_ value: Int) {
            self.value.store(value, ordering: .relaxed)
            self.peak.max(value, ordering: .relaxed)
            self.reported?.record(value)
        }
        var current: Int { self.value.load(ordering: .relaxed) }
        var highest: Int { self.peak.load(ordering: .relaxed) }
    }

    let queueDepth: Gauge
    let groups = ReportedCounter()
    let committedSets: ReportedCounter
    let conflicts: ReportedCounter
    let retries: ReportedCounter
    let failures: ReportedCounter
    private let latencyNanoseconds = ReportedCounter()
    private let largestGroup = Gauge()
    private let batchSize: Recorder
    private let latency: Metrics.Timer

    /// Metrics reported to `scope`'s backend with its dimensions.
    package init(_ scope: MetricsScope = MetricsScope()) {
        self.queueDepth = Gauge("skyros.commit.queue_depth", in: scope)
        self.committedSets = ReportedCounter("skyros.commit.sets", in: scope)
        self.conflicts = ReportedCounter("skyros.commit.conflicts", in: scope)
        self.retries = ReportedCounter("skyros.commit.retries", in: scope)
        self.failures = ReportedCounter("skyros.commit.failures", in: scope)
        self.batchSize = scope.recorder("skyros.commit.batch_size")
        self.latency = scope.timer("skyros.commit.latency")
    }

    func recordGroup(size: Int, latency: Duration) {
        self.groups.increment()
        self.committedSets.increment(by: size)
        self.largestGroup.record(size)
        self.batchSize.record(size)
        let (seconds, attoseconds) = latency.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        self.latencyNanoseconds.increment(by: nanoseconds)
        self.latency.recordNanoseconds(nanoseconds)
    }

    package var statistics: CommitQueueStatistics {
        let groups = self.groups.current
        return CommitQueueStatistics(
            queueDepth: self.queueDepth.current, highestQueueDepth: self.queueDepth.highest, groups: groups,
            sets: self.committedSets.current, largestGroup: self.largestGroup.highest, conflicts: self.conflicts.current,
            retries: self.retries.current, failures: self.failures.current,
            averageGroupLatency: groups == 0 ? .zero : .nanoseconds(self.latencyNanoseconds.current / groups))
    }
}

/// A snapshot of a stack's commit-queue counters (since the stack started).
///
/// ```swift
/// let statistics = stack.commitQueueStatistics
/// print("\(statistics.sets) sets in \(statistics.groups) transactions, \(statistics.retries) retries")
/// ```
public struct CommitQueueStatistics: Sendable, Hashable {
    /// Sets queued or being committed now.
    public var queueDepth: Int
    /// The most sets ever queued or being committed at once.
    public var highestQueueDepth: Int
    /// Group-commit transactions sent (retries of one group count once).
    public var groups: Int
    /// Sets finished (committed or failed).
    public var sets: Int
    /// The most sets in one group.
    public var largestGroup: Int
    /// Sets that failed with a version conflict.
    public var conflicts: Int
    /// Group retries after transient failures.
    public var retries: Int
    /// Sets that failed for good and were reverted (each also reported on `DataStack/errors`).
    public var failures: Int
    /// Mean time from sending a group to its outcome, retries included.
    public var averageGroupLatency: Duration
}
