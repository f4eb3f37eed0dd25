import Foundation
import Metrics
import Synchronization
import SkyrosPostgres
import SkyrosStore
import SkyrosStack

/// A stack's change-feed counters, read through its statistics and reported to swift-metrics (whatever backend
/// the application bootstrapped), for watching how often other processes' commits arrive and whether the
/// listener had to catch up:
///
/// | metric | kind | meaning |
/// |---|---|---|
/// | `skyros.feed.entries` | counter | other stacks' change-log entries applied to this stack's cache |
/// | `skyros.feed.other_rows` | counter | changed rows in those entries: every writer but this stack (other stacks, psql, jobs, cascades, triggers) |
/// | `skyros.feed.own_rows` | counter | changed rows in entries the capture attributed to this stack (its own commits), counted as their hints arrive |
/// | `skyros.feed.apply_lag` | timer | from an entry's commit (the database server's clock) to this stack having applied it to its cache (the app's clock) |
/// | `skyros.feed.log_reads` | counter | reads of the change log (start, catch-ups, horizon reads) |
/// | `skyros.feed.catch_ups` | counter | times the listener reconnected and caught up from the log |
/// | `skyros.feed.flushes` | counter | cache flushes: entries were pruned before they were read, the log was replaced, or a failover lost commits |
/// | `skyros.feed.refreshed_rows` | counter | cached rows refreshed from the row another process's update announced, or read again on the listener's connection for an observer of that row (instead of evicted) |
/// | `skyros.feed.listener_reads` | counter | rows an observer of one row watches, read again on the listener's connection as another process's hint arrived |
///
/// `apply_lag` compares two clocks: the commit time the capture stamps with the server's `clock_timestamp()`,
/// and the application's wall clock when the entry is applied. Skew between the two machines shifts every
/// sample by the same amount (a sample that would be negative is recorded as 0); run NTP on both.
///
/// Each carries the stack's dimensions (`stack`: `DataStackConfiguration.name`).
package final class ChangeFeedMetrics: Sendable {
    let entries: ReportedCounter
    /// Of `entries`, those that arrived in their hint (no log read); not reported.
    let hintEntries = ReportedCounter()
    let otherRows: ReportedCounter
    let ownRows: ReportedCounter
    let logReads: ReportedCounter
    let catchUps: ReportedCounter
    let flushes: ReportedCounter
    package let refreshedRows: ReportedCounter
    let rowsReadByListener: ReportedCounter
    private let applyLag: Metrics.Timer
    /// The lag samples recorded and their sum (for the statistics' mean), and the latest.
    private let lagSamples = ReportedCounter()
    private let lagNanoseconds = ReportedCounter()
    private let latestLag = Atomic<Int>(0)

    /// Metrics reported to `scope`'s backend with its dimensions.
    package init(_ scope: MetricsScope = MetricsScope()) {
        self.entries = ReportedCounter("skyros.feed.entries", in: scope)
        self.otherRows = ReportedCounter("skyros.feed.other_rows", in: scope)
        self.ownRows = ReportedCounter("skyros.feed.own_rows", in: scope)
        self.logReads = ReportedCounter("skyros.feed.log_reads", in: scope)
        self.catchUps = ReportedCounter("skyros.feed.catch_ups", in: scope)
        self.flushes = ReportedCounter("skyros.feed.flushes", in: scope)
        self.refreshedRows = ReportedCounter("skyros.feed.refreshed_rows", in: scope)
        self.rowsReadByListener = ReportedCounter("skyros.feed.listener_reads", in: scope)
        self.applyLag = scope.timer("skyros.feed.apply_lag")
    }

    /// Counts the rows of entries just applied to the cache and records, for each entry whose commit time is
    /// known (`committed`: microseconds since 1970 by the server's clock, by position), its lag.
    func applied(_ entries: some Sequence<ChangeLogEntry>, committed: (ChangeLogEntry) -> Int64?) {
        let now = Self.nowMicroseconds()
        for entry in entries {
            self.otherRows.increment(by: entry.changes.count)
            guard let stamp = committed(entry) else { continue }
            let lag = max(0, now - stamp) * 1000
            self.applyLag.recordNanoseconds(lag)
            self.lagSamples.increment()
            self.lagNanoseconds.increment(by: Int(lag))
            self.latestLag.store(Int(lag), ordering: .relaxed)
        }
    }

    /// The wall clock in microseconds since 1970.
    static func nowMicroseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000_000 + Int64(time.tv_nsec) / 1000
    }

    var statistics: ChangeFeedStatistics {
        let samples = self.lagSamples.current
        return ChangeFeedStatistics(
            reads: self.logReads.current, remoteEntries: self.entries.current, hintEntries: self.hintEntries.current,
            catchUps: self.catchUps.current, flushes: self.flushes.current, refreshedRows: self.refreshedRows.current,
            rowsReadByListener: self.rowsReadByListener.current, otherRows: self.otherRows.current, ownRows: self.ownRows.current,
            applyLagSamples: samples,
            averageApplyLag: samples == 0 ? .zero : .nanoseconds(self.lagNanoseconds.current / samples),
            latestApplyLag: .nanoseconds(self.latestLag.load(ordering: .relaxed)))
    }
}
