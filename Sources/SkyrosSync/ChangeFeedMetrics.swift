import SkyrosStore
import SkyrosStack

/// A stack's change-feed counters, read through its statistics and reported to swift-metrics (whatever backend
/// the application bootstrapped), for watching how often other processes' commits arrive and whether the
/// listener had to catch up:
///
/// | metric | kind | meaning |
/// |---|---|---|
/// | `skyros.feed.entries` | counter | other stacks' change-log entries applied to this stack's cache |
/// | `skyros.feed.log_reads` | counter | reads of the change log (start, catch-ups, horizon reads) |
/// | `skyros.feed.catch_ups` | counter | times the listener reconnected and caught up from the log |
/// | `skyros.feed.flushes` | counter | cache flushes: entries were pruned before they were read, the log was replaced, or a failover lost commits |
/// | `skyros.feed.refreshed_rows` | counter | cached rows refreshed from the row another process's update announced, or read again on the listener's connection for an observer of that row (instead of evicted) |
/// | `skyros.feed.listener_reads` | counter | rows an observer of one row watches, read again on the listener's connection as another process's hint arrived |
package struct ChangeFeedMetrics: Sendable {
    let entries = ReportedCounter("skyros.feed.entries")
    /// Of `entries`, those that arrived in their hint (no log read); not reported.
    let hintEntries = ReportedCounter()
    let logReads = ReportedCounter("skyros.feed.log_reads")
    let catchUps = ReportedCounter("skyros.feed.catch_ups")
    let flushes = ReportedCounter("skyros.feed.flushes")
    package let refreshedRows = ReportedCounter("skyros.feed.refreshed_rows")
    let rowsReadByListener = ReportedCounter("skyros.feed.listener_reads")

    var statistics: ChangeFeedStatistics {
        ChangeFeedStatistics(
            reads: self.logReads.current, remoteEntries: self.entries.current, hintEntries: self.hintEntries.current,
            catchUps: self.catchUps.current, flushes: self.flushes.current, refreshedRows: self.refreshedRows.current,
            rowsReadByListener: self.rowsReadByListener.current)
    }
}
