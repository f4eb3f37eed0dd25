import Foundation
@testable import Skyros
@testable import SkyrosObservation
@testable import SkyrosStack
@testable import SkyrosStore
@testable import SkyrosSync
import SkyrosTestFixtures
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// `observe(_:)` and `observe(_:id:)` driven by local saves, on both stores; diffs; the rebuild terminal event.
@Suite(.timeLimit(.minutes(2)))
struct ObservationTests {
    enum Kind: String, CaseIterable, Sendable { case inMemory, postgres }

    static func withStack(_ kind: Kind, _ body: (DataStack) async throws -> Void) async throws {
        switch kind {
        case .inMemory:
            let stack = try await DataStack.start(DataStackConfiguration(store: .inMemory))
            try await body(stack)
            await stack.shutdown()
        case .postgres:
            try await ManyProcessHarness.withSchema { schema in
                let stack = try await ManyProcessHarness.stack(schema: schema)
                do {
                    try await body(stack)
                } catch {
                    await stack.shutdown()
                    throw error
                }
                await stack.shutdown()
            }
        }
    }

    @Test(arguments: Kind.allCases)
    func aQueryObserverGetsOrderedDiffsThatReplayToEachResult(_ kind: Kind) async throws {
        try await Self.withStack(kind) { stack in
            try await stack.write(durability: .committed) { context in
                for id in 1...5 { try context.insert(MPItem(id: Int64(id), owner: 0, value: id * 10, title: "r\(id)")) }
            }
            let descriptor = FetchDescriptor<MPItem>(
                predicate: #Predicate { $0.value >= 20 }, sortBy: [SortDescriptor(\MPItem.value)], fetchLimit: 3)
            var iterator = stack.observe(descriptor).makeAsyncIterator()
            let first = try #require(try await iterator.next())
            #expect(first.values.map(\.id) == [2, 3, 4])
            #expect(first.diff.inserted.map(\.offset) == [0, 1, 2])
            var replayed = first.diff.applied(to: [])

            // Moves 4 to the front, deletes 3, leaves 2 in place but changes its title.
            try await stack.write { context in
                try await context.update(MPItem(id: 4, owner: 0, value: 21, title: "r4"))
                try await context.delete(MPItem.self, id: 3)
                try await context.update(MPItem(id: 2, owner: 0, value: 20, title: "renamed"))
            }
            let second = try #require(try await iterator.next())
            #expect(second.values.map(\.id) == [2, 4, 5])
            replayed = second.diff.applied(to: replayed)
            #expect(replayed == second.values)
            #expect(second.diff.deleted.map(\.id) == [3])
            #expect(second.diff.inserted.map(\.value.id) == [5])
            #expect(second.diff.updated.map(\.value.id).sorted() == [2, 4])
            #expect(second.values == (try await stack.read { try await $0.fetch(descriptor) }))

            // An insert that falls outside the window changes nothing; one inside does.
            try await stack.write { try $0.insert(MPItem(id: 9, owner: 0, value: 1, title: "filtered out")) }
            try await stack.write { try $0.insert(MPItem(id: 10, owner: 0, value: 20, title: "ties with 2")) }
            let third = try #require(try await iterator.next())
            replayed = third.diff.applied(to: replayed)
            #expect(replayed == third.values)
            #expect(third.values == (try await stack.read { try await $0.fetch(descriptor) }))
        }
    }

    @Test(arguments: Kind.allCases)
    func anObjectObserverSeesUpdatesAndTheDeletion(_ kind: Kind) async throws {
        try await Self.withStack(kind) { stack in
            var iterator = stack.observe(MPItem.self, id: 7).makeAsyncIterator()
            #expect(try await iterator.next() == .some(nil))
            try await stack.write { try $0.insert(MPItem(id: 7, owner: 1, value: 1, title: "seven")) }
            #expect(try await iterator.next()??.value == 1)
            try await stack.write { try await $0.update(MPItem(id: 7, owner: 1, value: 2, title: "seven")) }
            #expect(try await iterator.next()??.value == 2)
            try await stack.write { try await $0.delete(MPItem.self, id: 7) }
            #expect(try await iterator.next() == .some(nil))
        }
    }

    @Test(arguments: Kind.allCases)
    func aBurstOfSavesGivesFewerResultsEndingInTheFinalState(_ kind: Kind) async throws {
        try await Self.withStack(kind) { stack in
            var iterator = stack.observe(FetchDescriptor<MPItem>()).makeAsyncIterator()
            var replayed = try #require(try await iterator.next()).diff.applied(to: [])
            for id in 1...50 { try await stack.write { try $0.insert(MPItem(id: Int64(id), owner: 0, value: id, title: "")) } }
            var results = 0
            while replayed.count < 50 {
                let result = try #require(try await iterator.next())
                replayed = result.diff.applied(to: replayed)
                #expect(replayed == result.values)
                results += 1
            }
            #expect(results < 50)
            #expect(replayed.map(\.id) == Array(1...50))
        }
    }

    @Test(arguments: Kind.allCases)
    func aConsumerThatDoesNotReadHoldsNoBacklog(_ kind: Kind) async throws {
        try await Self.withStack(kind) { stack in
            var iterator = stack.observe(FetchDescriptor<MPItem>(sortBy: [SortDescriptor(\.id)])).makeAsyncIterator()
            let initial = try #require(try await iterator.next())
            for id in 1...300 { try await stack.write { try $0.insert(MPItem(id: Int64(id), owner: 0, value: id, title: "")) } }
            // Nothing was buffered while the consumer was away: the next element is the state now, its diff
            // taken against the last element the consumer received.
            let next = try #require(try await iterator.next())
            #expect(next.values.map(\.id) == Array(1...300))
            #expect(next.diff.applied(to: initial.values) == next.values)
        }
    }

    @Test func aCommitThatFailsRevertsWhatObserversSaw() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let stack = try await ManyProcessHarness.stack(schema: schema)
            let outside = try await PGConnection.connect(to: try TestServer.configuration)
            _ = try await outside.query("INSERT INTO \(qualified: [schema, "mp_items"]) VALUES (5, 9, 5, 'theirs')")
            var iterator = stack.observe(MPItem.self, id: 5).makeAsyncIterator()
            #expect(try await iterator.next()??.title == "theirs")
            stack.holdCommits()
            try await stack.write { try $0.insert(MPItem(id: 5, owner: 0, value: 5, title: "mine")) }   // a duplicate key
            #expect(try await iterator.next()??.title == "mine")                                     // visible at once
            stack.releaseCommits()
            #expect(try await iterator.next()??.title == "theirs")                                   // reverted
            await outside.close()
            await stack.shutdown()
        }
    }

    @Test func destroyAndRebuildEndsObservationsWithAClearError() async throws {
        try await Self.withStack(.postgres) { stack in
            var iterator = stack.observe(FetchDescriptor<MPItem>()).makeAsyncIterator()
            _ = try await iterator.next()
            try await stack.destroyAndRebuild(confirm: .iUnderstandThisDeletesData)
            await #expect(throws: ObservationError.storeRebuilt) { _ = try await iterator.next() }
        }
    }

    @Test func anotherStacksRebuildFlushesThisStacksCacheAndItsObserversRefetch() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let a = try await ManyProcessHarness.stack(schema: schema)
            let b = try await ManyProcessHarness.stack(schema: schema)
            try await b.write(durability: .committed) { try $0.insert(MPItem(id: 1, owner: 0, value: 1, title: "before")) }
            #expect(try await b.mainContext.object(MPItem.self, id: 1) != nil)    // cached in B
            var observed = b.observe(FetchDescriptor<MPItem>()).makeAsyncIterator()
            #expect(try await observed.next()?.values.map(\.id) == [1])

            try await a.destroyAndRebuild(confirm: .iUnderstandThisDeletesData)
            // A's stack has no migrations: create its tables again, as a migration would.
            let connection = try await PGConnection.connect(to: try TestServer.configuration)
            _ = try await connection.execute(script: """
                CREATE TABLE \(quoteIdentifier(schema)).mp_items (id bigint PRIMARY KEY, owner integer NOT NULL,
                                                                 value integer NOT NULL, title text NOT NULL);
                CREATE TABLE \(quoteIdentifier(schema)).mp_done (id integer PRIMARY KEY);
                """)
            await connection.close()

            // B hears of the new log (A's hint), flushes its cache, and its observer re-runs the query.
            await expectEventually(within: .seconds(10)) { b.changeFeedStatistics.flushes >= 1 }
            #expect(try await b.mainContext.object(MPItem.self, id: 1) == nil)
            let refetched = try await observed.next()
            #expect(refetched?.values.isEmpty == true)
            #expect(refetched?.diff.deleted.count == 1)
            // And the feed goes on: A's next commit reaches B's observer.
            try await a.write(durability: .committed) { try $0.insert(MPItem(id: 2, owner: 0, value: 2, title: "after")) }
            #expect(try await observed.next()?.values.map(\.id) == [2])
            await a.shutdown()
            await b.shutdown()
        }
    }

    /// `DataStack.findOrCreate` writes the row at once, outside the commit queue: a row it creates is announced like a
    /// commit's (change-log entry and hint in its transaction), so observers in this stack and in others see it;
    /// a row it finds announces nothing.
    @Test func aRowFindOrCreateCreatesReachesObserversHereAndInOtherStacks() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let a = try await ManyProcessHarness.stack(schema: schema)
            let b = try await ManyProcessHarness.stack(schema: schema)
            let seenByA = Locked<[Int64]?>(nil)
            let seenByB = Locked<[Int64]?>(nil)
            let observers = [(a, seenByA), (b, seenByB)].map { stack, seen in
                Task {
                    for try await result in stack.observe(FetchDescriptor<MPItem>(sortBy: [SortDescriptor(\.id)])) {
                        seen.withLock { $0 = result.values.map(\.id) }
                    }
                }
            }
            defer { observers.forEach { $0.cancel() } }
            await expectEventually { seenByA.withLock { $0 } == [] && seenByB.withLock { $0 } == [] }

            let entriesBefore = b.changeFeedStatistics.remoteEntries
            let (_, created) = try await a.findOrCreate(MPItem(id: 1, owner: 0, value: 1, title: "made"))
            #expect(created)
            await expectEventually { seenByA.withLock { $0 } == [1] }
            await expectEventually { seenByB.withLock { $0 } == [1] }
            #expect(b.changeFeedStatistics.remoteEntries == entriesBefore + 1)

            // Found, not created: nothing announced.
            let (found, createdAgain) = try await b.findOrCreate(MPItem(id: 1, owner: 0, value: 9, title: "other"))
            #expect(!createdAgain && found.title == "made")
            try await a.write(durability: .committed) { try $0.insert(MPItem(id: 2, owner: 0, value: 2, title: "fence")) }
            await expectEventually { seenByB.withLock { $0 } == [1, 2] }
            #expect(a.changeFeedStatistics.remoteEntries == 0, "\(a.changeFeedStatistics)")
            await a.shutdown()
            await b.shutdown()
        }
    }

    /// `DataStack.findOrCreate` sends the insert in one pipeline, after the read that found nothing. When another session
    /// inserts the row in between, the insert inserts nothing and fails the pipeline, so nothing of it is
    /// captured (only the other session's insert is), and the row is read and returned as found. The other session's insert is held open
    /// until `findOrCreate`'s insert waits for it.
    @Test func findOrCreateLosingARaceAnnouncesNothing() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let a = try await ManyProcessHarness.stack(schema: schema)
            let logTable = ChangeLog(schema: schema).logTable
            let other = try await PGConnection.connect(to: try TestServer.configuration)
            func logEntries() async throws -> Int {
                try await TestServer.settleCapture(schema: schema)
                return try await other.query("SELECT count(*) FROM \(unsafeRaw: logTable)")[0].decode(Int.self, at: 0)
            }
            let entriesBefore = try await logEntries()
            _ = try await other.execute(script: "BEGIN")
            try await other.query(
                "INSERT INTO \(unsafeRaw: quoteIdentifier(schema)).mp_items (id, owner, value, title) VALUES (5, 0, 1, 'theirs')")
            let finding = Task { try await a.findOrCreate(MPItem(id: 5, owner: 0, value: 2, title: "ours")) }
            // Until a session waits for this one's insert (not for another test's: the suite runs in parallel).
            let waits = try await expectEventually(within: .seconds(20)) {
                try await other.query("SELECT count(*) FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))")[0]
                    .decode(Int.self, at: 0) > 0
            }
            try #require(waits, "findOrCreate's insert never waited for the other session's")
            _ = try await other.execute(script: "COMMIT")
            let (found, created) = try await finding.value
            #expect(!created && found.title == "theirs")
            #expect(try await logEntries() == entriesBefore + 1)
            // The pipeline's path creates, and the capture announces, when nothing is in the way.
            let (made, madeNow) = try await a.findOrCreate(MPItem(id: 6, owner: 0, value: 3, title: "ours"))
            #expect(madeNow && made.title == "ours")
            #expect(try await logEntries() == entriesBefore + 2)
            await other.close()
            await a.shutdown()
        }
    }

    /// A write made while `destroyAndRebuild` is still recreating the change log (the new store is live already)
    /// commits only once the change feed is attached, so it is announced like any other. It committed unlogged
    /// before. The rebuild is held at the log's creation by holding its advisory lock from another session.
    @Test func aWriteDuringTheRebuildIsAnnounced() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let a = try await ManyProcessHarness.stack(schema: schema)
            let store = try #require(a.store as? PostgresStore)
            let logTable = ChangeLog(schema: schema).logTable
            let blocker = try await PGConnection.connect(to: try TestServer.configuration)
            _ = try await blocker.query("SELECT pg_advisory_lock(hashtext(\(logTable)))")
            let rebuilding = Task { try await a.destroyAndRebuild(confirm: .iUnderstandThisDeletesData) }
            // Wait until the rebuild waits for that lock (its new store is live by then): a session blocked by this
            // one, not any ungranted advisory lock (other tests of the parallel run take them too, and one of theirs
            // let the write below start before the rebuild, which then invalidated it).
            let waits = try await expectEventually(within: .seconds(20)) {
                try await blocker.query("SELECT count(*) FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))")[0]
                    .decode(Int.self, at: 0) > 0
            }
            try #require(waits, "the rebuild never waited for the change log's lock")
            _ = try await blocker.execute(script: """
                CREATE TABLE \(quoteIdentifier(schema)).mp_items (id bigint PRIMARY KEY, owner integer NOT NULL,
                                                                 value integer NOT NULL, title text NOT NULL);
                CREATE TABLE \(quoteIdentifier(schema)).mp_done (id integer PRIMARY KEY);
                """)
            let written = Locked(false)
            let writing = Task {
                try await a.write(durability: .committed) { try $0.insert(MPItem(id: 77, owner: 0, value: 1, title: "window")) }
                written.withLock { $0 = true }
            }
            // The write is queued and held (or, without the hold, committed at once, unlogged).
            await expectEventually { a.queuedCommits == 1 || written.withLock { $0 } }
            _ = try await blocker.query("SELECT pg_advisory_unlock(hashtext(\(logTable)))")
            try await rebuilding.value
            try await writing.value
            let entries = try await GroupPipelineTests.changeLogEntries(store)
            #expect(entries.contains { $0.contains("77") }, "\(entries)")
            await blocker.close()
            await a.shutdown()
        }
    }

    /// A rebuild that cannot recreate the change log (here: its lock wait times out) throws; the new core is
    /// attached all the same, and a write made before the next successful rebuild installs the capture on its
    /// table before it commits, so it is announced all the same (other processes would otherwise keep what they
    /// cache of its rows); after that rebuild writes are announced and observed again.
    @Test func aRebuildThatCannotRecreateTheLogCommitsNothingUnannounced() async throws {
        try await ManyProcessHarness.withSchema { schema in
            var session = try TestServer.configuration
            session["options"] = "-c lock_timeout=300"
            // The trigger source's case: its capture is installed again by the rebuild, before the next write. (The
            // logical source installs nothing on the tables.)
            var configuration = DataStackConfiguration(store: .postgres(session, schema: schema), entities: [MPItem.self, MPDone.self])
            configuration.changeFeed.captureSource = .triggers
            let a = try await DataStack.start(configuration)
            let store = try #require(a.store as? PostgresStore)
            let logTable = ChangeLog(schema: schema).logTable
            let blocker = try await PGConnection.connect(to: try TestServer.configuration)
            let createTables = """
                CREATE TABLE IF NOT EXISTS \(quoteIdentifier(schema)).mp_items (id bigint PRIMARY KEY, owner integer NOT NULL,
                                                                 value integer NOT NULL, title text NOT NULL);
                CREATE TABLE IF NOT EXISTS \(quoteIdentifier(schema)).mp_done (id integer PRIMARY KEY);
                """
            _ = try await blocker.query("SELECT pg_advisory_lock(hashtext(\(logTable)))")
            await #expect(throws: (any Error).self) { try await a.destroyAndRebuild(confirm: .iUnderstandThisDeletesData) }
            _ = try await blocker.query("SELECT pg_advisory_unlock(hashtext(\(logTable)))")
            _ = try await blocker.execute(script: createTables)
            // The first write to the new table installs the capture (and the log) before it commits: it is announced.
            try await a.write(durability: .committed) { try $0.insert(MPItem(id: 1, owner: 0, value: 1, title: "captured")) }
            #expect(try await GroupPipelineTests.changeLogEntries(store).contains { $0.contains("\"i\":\"1\"") })

            try await a.destroyAndRebuild(confirm: .iUnderstandThisDeletesData)
            _ = try await blocker.execute(script: createTables)
            let seen = Locked<[Int64]?>(nil)
            let observing = Task {
                for try await result in a.observe(FetchDescriptor<MPItem>(sortBy: [SortDescriptor(\.id)])) {
                    seen.withLock { $0 = result.values.map(\.id) }
                }
            }
            defer { observing.cancel() }
            await expectEventually { seen.withLock { $0 } == [] }
            try await a.write(durability: .committed) { try $0.insert(MPItem(id: 2, owner: 0, value: 2, title: "logged")) }
            await expectEventually { seen.withLock { $0 } == [2] }
            let entries = try await GroupPipelineTests.changeLogEntries(store)
            #expect(entries.contains { $0.contains("2") }, "\(entries)")
            await blocker.close()
            await a.shutdown()
        }
    }
}
