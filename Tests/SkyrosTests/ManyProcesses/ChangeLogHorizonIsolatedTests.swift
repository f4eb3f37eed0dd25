import Foundation
@testable import Skyros
import SkyrosPostgres
import SkyrosTestFixtures
import Testing

/// The reader's horizon after a burst of hints. A read's horizon is its snapshot's `xmin`, which any
/// transaction running anywhere on the server holds back: so this runs alone (scripts/test runs `*Isolated*`
/// suites after the parallel run, one at a time), where no other test's transactions are open.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ChangeLogHorizonIsolatedTests {
    /// Hints deliver entries without moving the reader's horizon; a read after the last hint of a burst moves
    /// it past them. Without that read, pruning those entries (delivered long ago) after a quiet period looked
    /// like entries lost: a cache flush in every stack.
    @Test func entriesDeliveredByHintsAndPrunedLaterAreNotAGap() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let a = try await ManyProcessHarness.stack(schema: schema)
            let b = try await ManyProcessHarness.stack(schema: schema) { $0.horizonReadInterval = .milliseconds(300) }
            let readsAtStart = b.changeFeedStatistics.reads
            for id: Int64 in 1...5 {
                try await a.write(durability: .committed) { try $0.insert(MPItem(id: id, owner: 0, value: 0, title: "")) }
            }
            #expect(await ManyProcessHarness.eventually { b.changeFeedStatistics.remoteEntries >= 5 })
            // The read that follows the burst; then B is quiet (no hints, no reads).
            #expect(await ManyProcessHarness.eventually { b.changeFeedStatistics.reads > readsAtStart })
            let reads = b.changeFeedStatistics.reads
            // The burst's entries are pruned (as retention would), and A writes again.
            #expect(try await a.pruneChangeLog(olderThan: .zero, keepingAtMost: 0) >= 5)
            try await a.write(durability: .committed) { try $0.insert(MPItem(id: 6, owner: 0, value: 0, title: "")) }
            #expect(await ManyProcessHarness.eventually { b.changeFeedStatistics.remoteEntries >= 6 })
            // B reads the log again after that hint, and finds no gap.
            #expect(await ManyProcessHarness.eventually { b.changeFeedStatistics.reads > reads })
            #expect(b.changeFeedStatistics.flushes == 0, "\(b.changeFeedStatistics)")
            await a.shutdown()
            await b.shutdown()
        }
    }
}
