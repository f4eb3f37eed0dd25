import Metrics

/// What a stack's change feed reports to swift-metrics (whatever backend the application bootstrapped), for
/// watching how often other processes' commits arrive and whether the listener had to catch up:
///
/// | metric | kind | meaning |
/// |---|---|---|
/// | `skyros.feed.entries` | counter | other stacks' change-log entries applied to this stack's cache |
/// | `skyros.feed.log_reads` | counter | reads of the change log (start, catch-ups, horizon reads) |
/// | `skyros.feed.catch_ups` | counter | times the listener reconnected and caught up from the log |
/// | `skyros.feed.flushes` | counter | cache flushes: entries were pruned before they were read, or the log was replaced |
struct ChangeFeedMetrics: Sendable {
    let entries = Counter(label: "skyros.feed.entries")
    let logReads = Counter(label: "skyros.feed.log_reads")
    let catchUps = Counter(label: "skyros.feed.catch_ups")
    let flushes = Counter(label: "skyros.feed.flushes")
}
