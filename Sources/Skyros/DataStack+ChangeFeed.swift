import Foundation
import SkyrosStore
import SkyrosStack
import SkyrosObservation
import SkyrosSync

extension DataStack {
    /// The `application_name` of this stack's listener connection (to find it in `pg_stat_activity`), or
    /// `nil` without a change feed.
    package var changeFeedApplicationName: String? { self.sync.changeFeed?.applicationName }

    /// The origin this stack's change-log entries and hints carry, or `nil` without a change feed.
    package var changeFeedOrigin: UUID? { self.sync.changeFeed?.origin }

    /// The change feed's counters: log reads, entries and rows applied from other writers, catch-ups, cache
    /// flushes after a gap, and the lag from commit to cache (zero without a feed).
    ///
    /// ```swift
    /// let feed = stack.changeFeedStatistics
    /// if feed.flushes > 0 { logger.warning("the change feed lost entries and flushed the cache") }
    /// ```
    public var changeFeedStatistics: ChangeFeedStatistics { self.sync.changeFeed?.statistics ?? ChangeFeedStatistics() }

    /// Prunes the change log now (tests; stacks prune by themselves every ``ChangeFeedConfiguration/pruneInterval``).
    package func pruneChangeLog(olderThan age: Duration, keepingAtMost maxEntries: Int) async throws -> Int {
        guard let feed = self.sync.changeFeed else { return 0 }
        return try await feed.prune(olderThan: age, keepingAtMost: maxEntries)
    }
}
