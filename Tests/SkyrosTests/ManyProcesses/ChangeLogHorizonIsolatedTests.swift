import Foundation
@testable import Skyros
@testable import SkyrosObservation
@testable import SkyrosStack
@testable import SkyrosStore
@testable import SkyrosSync
import SkyrosPostgres
import SkyrosTestFixtures
import SkyrosTestSupport
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
            for id: Int64 in 1...5 {
                try await a.write(durability: .committed) { try $0.insert(MPItem(id: id, owner: 0, value: 0, title: "")) }
            }
            await expectEventually { b.changeFeedStatistics.remoteEntries >= 5 }
            // The read that follows the burst: the trailing read, started after its last hint (a read counted
            // earlier may have started during the burst, with a horizon below its last entries); then B is quiet.
            let feed = try #require(b.sync.changeFeed)
            await expectEventually { feed.hasReadSinceLastHint }
            // The burst's entries are pruned (as retention would), and A writes again.
            #expect(try await a.pruneChangeLog(olderThan: .zero, keepingAtMost: 0) >= 5)
            try await a.write(durability: .committed) { try $0.insert(MPItem(id: 6, owner: 0, value: 0, title: "")) }
            await expectEventually { b.changeFeedStatistics.remoteEntries >= 6 }
            // B reads the log again after that entry (its own trailing read may have come before the entry was
            // delivered: the entry may arrive by a read as well as by its hint), and finds no gap.
            try await #require(b.sync.changeFeed).read()
            #expect(b.changeFeedStatistics.flushes == 0, "\(b.changeFeedStatistics)")
            await a.shutdown()
            await b.shutdown()
        }
    }

    /// Runs alone: pruning deletes only entries below every open snapshot's `xmin`, which other tests'
    /// transactions hold back in the parallel run.
    @Test func pruningEntriesAReaderNeverSawIsReportedAsAGap() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let log = ChangeLog(schema: schema)
            let connection = try await PGConnection.connect(to: try TestServer.configuration)
            try await log.createIfNeeded(on: connection)
            var cursor = ChangeCursor()
            let start = try await log.read(after: nil, on: connection)
            _ = cursor.advance(entries: start.entries, snapshot: start.snapshot, prunedThrough: start.prunedThrough)
            let change = RowChange(entity: "MPItem", table: "mp_items", id: try PGValue(Int64(1)), kind: .deleted, version: nil)
            for _ in 0..<3 { try await log.record([change], origin: UUID().uuidString.lowercased(), on: connection) }
            #expect(try await log.prune(olderThan: .zero, keepingAtMost: 0, on: connection) == 3)
            let read = try await log.read(after: cursor.window, on: connection)
            #expect(cursor.advance(entries: read.entries, snapshot: read.snapshot, prunedThrough: read.prunedThrough) == .gap)
            await connection.close()
        }
    }

    /// A transaction left open anywhere on the server holds every reader's horizon back. Pruning entries above
    /// it made every reader see a gap at every prune: a cache flush in every stack. They are kept until it ends.
    @Test func aLongTransactionElsewhereHoldsPruningBackInsteadOfFlushingEveryCache() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let a = try await ManyProcessHarness.stack(schema: schema)
            let b = try await ManyProcessHarness.stack(schema: schema) { $0.horizonReadInterval = .milliseconds(300) }
            let idle = try await PGConnection.connect(to: try TestServer.configuration)
            _ = try await idle.execute(script: "BEGIN")
            _ = try await idle.query("SELECT pg_current_xact_id()")   // holds an xid: every snapshot's xmin stays at or below it
            let readsAtStart = b.changeFeedStatistics.reads
            for id: Int64 in 1...5 {
                try await a.write(durability: .committed) { try $0.insert(MPItem(id: id, owner: 0, value: 0, title: "")) }
            }
            await expectEventually { b.changeFeedStatistics.remoteEntries >= 5 }
            await expectEventually { b.changeFeedStatistics.reads > readsAtStart }
            #expect(try await a.pruneChangeLog(olderThan: .zero, keepingAtMost: 0) == 0)
            try await a.write(durability: .committed) { try $0.insert(MPItem(id: 6, owner: 0, value: 0, title: "")) }
            await expectEventually { b.changeFeedStatistics.remoteEntries >= 6 }
            // A read after that entry (see above) finds no gap.
            try await #require(b.sync.changeFeed).read()
            #expect(b.changeFeedStatistics.flushes == 0, "\(b.changeFeedStatistics)")
            // The transaction ends; B's next read (after the next hint) moves its horizon past the entries, and
            // the prune after that deletes them, still without a gap.
            _ = try await idle.execute(script: "COMMIT")
            try await a.write(durability: .committed) { try $0.insert(MPItem(id: 7, owner: 0, value: 0, title: "")) }
            await expectEventually { b.changeFeedStatistics.remoteEntries >= 7 }
            try await #require(b.sync.changeFeed).read()
            #expect(try await a.pruneChangeLog(olderThan: .zero, keepingAtMost: 0) >= 7)
            try await a.write(durability: .committed) { try $0.insert(MPItem(id: 8, owner: 0, value: 0, title: "")) }
            await expectEventually { b.changeFeedStatistics.remoteEntries >= 8 }
            try await #require(b.sync.changeFeed).read()
            #expect(b.changeFeedStatistics.flushes == 0, "\(b.changeFeedStatistics)")
            await idle.close()
            await a.shutdown()
            await b.shutdown()
        }
    }
}
