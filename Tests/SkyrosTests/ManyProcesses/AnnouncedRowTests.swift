import Foundation
@testable import Skyros
@testable import SkyrosObservation
@testable import SkyrosStack
@testable import SkyrosStore
@testable import SkyrosSync
import SkyrosPostgres
import SkyrosTestFixtures
import SkyrosTestSupport
import SkyrosTestEntities
import Testing


/// `mp_items` as an older build that lacks the `title` column would map it (another column layout).
private struct MPItemWithoutTitle: Entity, Equatable {
    var id: Int64
    var owner: Int
    var value: Int

    static let tableName = "mp_items"
    static let columns: [EntityColumn<MPItemWithoutTitle>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.owner, "owner"), EntityColumn(\.value, "value"),
    ]
}

/// A row versioned by a column of its own (table `mp_counted`, made by each test).
private struct MPCounted: Entity, Equatable {
    var id: Int64
    var value: Int
    var note: String?

    static let tableName = "mp_counted"
    static let versionColumn: String? = "row_version"
    static let columns: [EntityColumn<MPCounted>] = [EntityColumn(\.id, "id"), EntityColumn(\.value, "value"), EntityColumn(\.note, "note")]
}

/// With `includesRowsInHints`, updates announce their whole row in the hint, and other stacks that cache the
/// version it replaced refresh their copy instead of evicting it: the next read — an observer's re-run — needs
/// no round trip.
@Suite(.serialized, .timeLimit(.minutes(3))) struct AnnouncedRowTests {
    @Test func anUpdatesRowRefreshesAnotherStacksCachedCopyAtTheRightVersion() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let a = try await Self.stack(schema, rowsInHints: true)
            let b = try await Self.stack(schema, rowsInHints: true)
            try await a.write(durability: .committed) { try $0.insert(MPItem(id: 1, owner: 0, value: 1, title: "one \"quoted\" é")) }
            await Self.waitUntilSeenInsert(b)
            #expect(try await b.mainContext.object(MPItem.self, id: 1)?.value == 1)   // cached in B
            let missesBefore = b.cacheStatistics.misses

            try await Self.update(MPItem.self, id: 1, in: a) {
                $0.value = 2
                $0.title = "two\nlines, \\ and ☃"
            }
            await expectEventually { b.changeFeedStatistics.refreshedRows == 1 }
            // Served from B's memory: no miss, no read of the store.
            #expect(try await b.mainContext.object(MPItem.self, id: 1) == MPItem(id: 1, owner: 0, value: 2, title: "two\nlines, \\ and ☃"))
            #expect(b.cacheStatistics.misses == missesBefore)

            // The refreshed version is the stored one: B's guarded update succeeds (a wrong version would be a
            // conflict), and A, which cached its own write's version, refreshes from B's announcement in turn.
            try await Self.update(MPItem.self, id: 1, in: b) { $0.value = 3 }
            await expectEventually { a.changeFeedStatistics.refreshedRows == 1 }
            #expect(try await a.mainContext.object(MPItem.self, id: 1)?.value == 3)
            try await Self.update(MPItem.self, id: 1, in: a) { $0.value = 4 }
            await expectEventually { b.changeFeedStatistics.refreshedRows == 2 }
            #expect(try await b.mainContext.object(MPItem.self, id: 1)?.value == 4)
            #expect(b.cacheStatistics.misses == missesBefore)
            #expect(try await Self.storedInteger("SELECT value FROM \(qualified: [schema, "mp_items"]) WHERE id = 1") == 4)
            await a.shutdown()
            await b.shutdown()
        }
    }

    @Test func everyKindOfColumnRefreshesToExactlyWhatPostgreSQLReturns() async throws {
        try await ManyProcessHarness.withSchema { schema in
            try await Self.execute(StoreUser.createTable("\(quoteIdentifier(schema)).store_users"))
            let a = try await Self.stack(schema, rowsInHints: true)
            let b = try await Self.stack(schema)
            try await a.write(durability: .committed) { try $0.insert(StoreUser.make(6)) }
            await Self.waitUntilSeenInsert(b)
            #expect(try await b.mainContext.object(StoreUser.self, id: 6) != nil)
            try await a.write(durability: .committed) { context in
                var user = try #require(try await context.object(StoreUser.self, id: 6))
                user.name = "Zoë \"quoted\" \\ back\nslash ☃"
                user.age = 41
                user.email = nil
                user.score = -0.125
                user.balance = Decimal(string: "-98765.4321")!
                user.createdAt = Date(timeIntervalSince1970: 1_750_000_000.123456)
                user.avatar = Data([0, 0x5C, 0x22, 0xFF])
                user.tags = ["a,b", "c\"d", ""]
                user.role = .member
                user.address = StoreAddress(street: "1 \"Quay\"", city: "Chora", movedIn: nil)
                user.pets = [StorePet(name: "Argos", legs: 4), StorePet(name: "Tripod", legs: 3)]
                user.attributes = ["level": 9, "rank": -1]
                try await context.update(user)
            }
            await expectEventually { b.changeFeedStatistics.refreshedRows == 1 }
            let refreshed = try #require(try await b.mainContext.object(StoreUser.self, id: 6))
            // What a stack with an empty cache reads from PostgreSQL.
            let c = try await Self.stack(schema)
            let stored = try #require(try await c.mainContext.object(StoreUser.self, id: 6))
            #expect(refreshed == stored)
            #expect(stored.name == "Zoë \"quoted\" \\ back\nslash ☃" && stored.email == nil && stored.tags == ["a,b", "c\"d", ""])
            await a.shutdown()
            await b.shutdown()
            await c.shutdown()
        }
    }

    @Test func aVersionColumnRowIsRefreshedWithItsNextVersion() async throws {
        try await ManyProcessHarness.withSchema { schema in
            try await Self.execute("CREATE TABLE \(quoteIdentifier(schema)).mp_counted (id bigint PRIMARY KEY, value integer NOT NULL, note text, row_version bigint NOT NULL DEFAULT 1)")
            let a = try await Self.stack(schema, rowsInHints: true)
            let b = try await Self.stack(schema, rowsInHints: true)
            try await a.write(durability: .committed) { try $0.insert(MPCounted(id: 7, value: 1, note: nil)) }
            await Self.waitUntilSeenInsert(b)
            #expect(try await b.mainContext.object(MPCounted.self, id: 7)?.value == 1)
            for value in 2...5 {
                try await Self.update(MPCounted.self, id: 7, in: a) {
                    $0.value = value
                    $0.note = value.isMultiple(of: 2) ? "even" : nil
                }
            }
            await expectEventually { b.changeFeedStatistics.refreshedRows == 4 }
            #expect(try await b.mainContext.object(MPCounted.self, id: 7) == MPCounted(id: 7, value: 5, note: nil))
            // B's cached version is the stored row_version (5): its guarded update commits, and the column is 6.
            try await Self.update(MPCounted.self, id: 7, in: b) { $0.value = 6 }
            let stored = try await Self.storedInteger("SELECT row_version FROM \(qualified: [schema, "mp_counted"]) WHERE id = 7")
            #expect(stored == 6)
            await a.shutdown()
            await b.shutdown()
        }
    }

    @Test func aRowCachedAtAnotherVersionOrInAnotherLayoutIsReadAgainNotRefreshed() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let a = try await Self.stack(schema, rowsInHints: true)
            let b = try await Self.stack(schema, rowsInHints: true)
            try await a.write(durability: .committed) {
                try $0.insert(MPItem(id: 1, owner: 0, value: 1, title: "one"))
                try $0.insert(MPItem(id: 2, owner: 0, value: 1, title: "two"))
            }
            // B caches row 1 at its first version, and row 2 as an entity with fewer columns.
            #expect(try await b.mainContext.object(MPItem.self, id: 1)?.value == 1)
            #expect(try await b.mainContext.object(MPItemWithoutTitle.self, id: 2)?.value == 1)
            // Row 1 changes behind every stack's back (no announcement): B's copy is now stale. A third stack,
            // started after, reads the stored rows and updates both.
            try await Self.execute("UPDATE \(quoteIdentifier(schema)).mp_items SET value = 10 WHERE id = 1")
            let c = try await Self.stack(schema, rowsInHints: true)

            try await c.write(durability: .committed) { context in
                for id: Int64 in [1, 2] {
                    var item = try #require(try await context.object(MPItem.self, id: id))
                    item.value += 1
                    try await context.update(item)
                }
            }
            // Both rows were announced, neither refreshed: row 1's announcement replaced a version B does not
            // hold, and row 2's layout is not B's. B reads both again and sees the stored rows.
            // Waits for C's entry itself: counting B's remote entries would also count A's insert and the UPDATE
            // above, whose entries may be all that B applied yet.
            await expectEventually { (try? await b.mainContext.object(MPItemWithoutTitle.self, id: 2))?.value == 2 }
            #expect(b.changeFeedStatistics.refreshedRows == 0)
            #expect(try await b.mainContext.object(MPItem.self, id: 1)?.value == 11)
            await a.shutdown()
            await b.shutdown()
            await c.shutdown()
        }
    }

    @Test func anObserverOfOneRowFollowsAnotherStacksUpdatesFromTheirAnnouncements() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let a = try await Self.stack(schema, rowsInHints: true)
            let b = try await Self.stack(schema, rowsInHints: true)
            try await a.write(durability: .committed) { try $0.insert(MPItem(id: 1, owner: 0, value: 0, title: "")) }
            await Self.waitUntilSeenInsert(b)
            var observed = b.observe(MPItem.self, id: 1).makeAsyncIterator()
            #expect(try await observed.next()??.value == 0)
            let missesBefore = b.cacheStatistics.misses
            for value in 1...20 {
                try await Self.update(MPItem.self, id: 1, in: a) { $0.value = value }
                // Each event's value comes from A's announcement (bursts may coalesce: wait for this one).
                var seen = -1
                while seen < value { seen = try #require(try await observed.next()??.value) }
                #expect(seen == value)
            }
            #expect(b.cacheStatistics.misses == missesBefore)
            #expect(b.changeFeedStatistics.refreshedRows == 20)
            await a.shutdown()
            await b.shutdown()
        }
    }

    /// Without rows in the hints, a row an observer of one row watches is read again on the listener's
    /// connection as the hint arrives: the cache is refreshed, and the observer's re-run is served from memory.
    @Test func anObservedRowIsReadAgainByTheListenerWhenHintsCarryNoRows() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let a = try await Self.stack(schema)
            let b = try await Self.stack(schema)
            try await a.write(durability: .committed) { try $0.insert(MPItem(id: 1, owner: 0, value: 0, title: "")) }
            try await a.write(durability: .committed) { try $0.insert(MPItem(id: 2, owner: 0, value: 0, title: "")) }
            await expectEventually { b.changeFeedStatistics.remoteEntries >= 2 }
            var observed = b.observe(MPItem.self, id: 1).makeAsyncIterator()
            #expect(try await observed.next()??.value == 0)
            #expect(try await b.mainContext.object(MPItem.self, id: 2)?.value == 0)   // cached, not observed
            let missesBefore = b.cacheStatistics.misses
            for value in 1...20 {
                try await Self.update(MPItem.self, id: 1, in: a) {
                    $0.value = value
                    $0.title = "value \(value) \"quoted\" ☃"
                }
                var seen: MPItem?
                while (seen?.value ?? -1) < value { seen = try #require(try await observed.next()) }
                #expect(seen == MPItem(id: 1, owner: 0, value: value, title: "value \(value) \"quoted\" ☃"))
            }
            #expect(b.cacheStatistics.misses == missesBefore)
            #expect(b.changeFeedStatistics.rowsReadByListener == 20)
            #expect(b.changeFeedStatistics.refreshedRows == 20)
            // The refreshed version is the stored one: B's guarded update succeeds.
            try await Self.update(MPItem.self, id: 1, in: b) { $0.value = 100 }
            #expect(try await Self.storedInteger("SELECT value FROM \(qualified: [schema, "mp_items"]) WHERE id = 1") == 100)

            // A row cached but not observed is evicted as before, and read again when asked for.
            try await Self.update(MPItem.self, id: 2, in: a) { $0.value = 7 }
            await expectEventually { b.changeFeedStatistics.remoteEntries >= 23 }
            #expect(try await b.mainContext.object(MPItem.self, id: 2)?.value == 7)
            #expect(b.cacheStatistics.misses == missesBefore + 1)
            #expect(b.changeFeedStatistics.rowsReadByListener == 20)
            await a.shutdown()
            await b.shutdown()
        }
    }

    @Test func byDefaultHintsCarryNoRowsAndCachedCopiesAreEvicted() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let a = try await Self.stack(schema)
            let b = try await Self.stack(schema, rowsInHints: true)
            let listener = try await PGListener.start(
                configuration: try TestServer.configuration, channels: [ChangeLog.channelName(schema: schema)])
            // Every hint on the channel until the listener stops. How many there are depends on the source: the
            // trigger source sends one per transaction, a logical-decoding relay one per batch, and the insert and
            // the update may share a batch.
            let listening = Locked(false)
            let received = Locked<[String]>([])
            let hints = Task {
                for await event in listener.events {
                    switch event {
                    case .listening: listening.withLock { $0 = true }
                    case .notification(let hint): received.withLock { $0.append(hint.payload) }
                    default: break
                    }
                }
            }
            await expectEventually { listening.withLock { $0 } }
            try await a.write(durability: .committed) { try $0.insert(MPItem(id: 1, owner: 0, value: 1, title: "private")) }
            #expect(try await b.mainContext.object(MPItem.self, id: 1)?.value == 1)
            let missesBefore = b.cacheStatistics.misses
            try await Self.update(MPItem.self, id: 1, in: a) { $0.value = 2 }
            await expectEventually { b.changeFeedStatistics.remoteEntries >= 2 }
            // B may have read the entries from the log (a scheduled read) before this test's listener received
            // the hint that names the last of them: wait for that hint (its payload starts with the position).
            let last = try await TestServer.withConnection {
                try await $0.query("SELECT max(position) FROM \(unsafeRaw: quoteIdentifier(schema)).skyros_change_log")[0].decode(Int64.self, at: 0)
            }
            await expectEventually {
                received.withLock { $0.contains { ($0.split(separator: " ").first.flatMap { Int64($0) } ?? 0) >= last } }
            }
            listener.stop()
            await hints.value
            // A's hints (the insert's and the update's, or one for both) name the row but carry none of its values.
            let payloads = received.withLock { $0 }
            #expect(!payloads.isEmpty, "no hint")
            for payload in payloads {
                #expect(!payload.contains("private") && !payload.contains(#""r":"#), "\(payload)")
            }
            #expect(try await b.mainContext.object(MPItem.self, id: 1)?.value == 2)
            #expect(b.cacheStatistics.misses == missesBefore + 1)   // evicted, read again
            #expect(b.changeFeedStatistics.refreshedRows == 0)
            await a.shutdown()
            await b.shutdown()
        }
    }

    /// A stack on `schema` whose change feed never reads the log on its own schedule: a read to advance the
    /// horizon, racing a hint, would deliver the log's copy of the entry (which carries no rows) first, and the
    /// row would be evicted instead of refreshed — harmless, but these tests count refreshes.
    /// Any role that can connect can `pg_notify` on the schema's channel. A hint it forges — announcing a row at
    /// the version another stack caches, with values of its choosing — changes no stack's cache: hints carrying
    /// their entry are acted on only when their tag verifies (otherwise the log, which table privileges protect,
    /// is read).
    @Test func aForgedHintChangesNoStacksCache() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let a = try await Self.stack(schema, rowsInHints: true)
            let b = try await Self.stack(schema, rowsInHints: true)
            let listener = try await PGListener.start(
                configuration: try TestServer.configuration, channels: [ChangeLog.channelName(schema: schema)])
            try await withCleanup {
                try await a.write(durability: .committed) { try $0.insert(MPItem(id: 1, owner: 0, value: 1, title: "one")) }
                await Self.waitUntilSeenInsert(b)
                #expect(try await b.mainContext.object(MPItem.self, id: 1)?.value == 1)   // cached in B
                try await Self.update(MPItem.self, id: 1, in: a) { $0.title = "genuine" }
                await expectEventually { b.changeFeedStatistics.refreshedRows == 1 }

                // The genuine hint, as any listener sees it, rewritten: the next version, another title.
                var payload: String?
                for await event in listener.events {
                    if case .notification(let note) = event, note.payload.contains("genuine") {
                        payload = note.payload
                        break
                    }
                }
                let genuine = try #require(payload)
                // `<position> <origin> @<committed>/<rows> <xid> <tag> <changes>`.
                let fields = genuine.split(separator: " ", maxSplits: 4)
                let position = try #require(Int64(fields[0]))
                #expect(fields[2].hasPrefix("@"))
                let xid = try #require(UInt64(fields[3]))
                let json = try #require(genuine.firstIndex(of: "[").map { genuine[$0...] })
                let changes = try JSONDecoder().decode([LoggedRowChange].self, from: Data(json.utf8))
                // `mp_items` is versioned by `xmin`: the version B caches is the genuine hint's transaction id
                // (modulo 2³²), and a forged hint's is its own.
                let forged = changes.map { change in
                    LoggedRowChange(
                        table: change.t, type: change.o, id: change.i, kind: change.k, version: change.v, base: Int64(xid % (1 << 32)),
                        layout: change.h, row: change.r?.map { $0.map { $0 == "genuine" ? "forged" : $0 } })
                }
                let forgedJSON = String(decoding: try JSONEncoder().encode(forged), as: UTF8.self)
                #expect(forgedJSON.contains("forged"))
                let origin = try #require(a.changeFeedOrigin).uuidString.lowercased()
                let channel = ChangeLog.channelName(schema: schema)
                try await TestServer.withConnection { connection in
                    // Without a tag (as hints were before they had one), and with a made-up one.
                    _ = try await connection.query("SELECT pg_notify(\(channel), \("\(position + 1000) \(origin) \(xid + 1000) \(forgedJSON)"))")
                    let madeUp = String(repeating: "0f", count: HintKey.tagBytes)
                    _ = try await connection.query(
                        "SELECT pg_notify(\(channel), \("\(position + 1001) \(origin) \(xid + 1001) \(madeUp) \(forgedJSON)"))")
                }
                // A genuine commit after them: once B has applied it, B has handled the forged hints before it.
                let applied = b.changeFeedStatistics.remoteEntries
                try await a.write(durability: .committed) { try $0.insert(MPItem(id: 2, owner: 0, value: 2, title: "two")) }
                await expectEventually { b.changeFeedStatistics.remoteEntries > applied }
                #expect(b.changeFeedStatistics.refreshedRows == 1)
                #expect(try await b.mainContext.object(MPItem.self, id: 1)?.title == "genuine")
            } cleanup: {
                listener.stop()
                await a.shutdown()
                await b.shutdown()
            }
        }
    }

    private static func stack(_ schema: String, rowsInHints: Bool = false) async throws -> DataStack {
        try await ManyProcessHarness.stack(schema: schema) {
            $0.includesRowsInHints = rowsInHints
            $0.horizonReadInterval = .seconds(3600)
        }
    }

    /// Waits until `stack` has received the first write's announcement (an issue when it never does). A row
    /// cached before it arrives is evicted when it does (an insert announced by another stack), and could then
    /// not be refreshed by the announcements the test counts.
    private static func waitUntilSeenInsert(_ stack: DataStack) async {
        await expectEventually { stack.changeFeedStatistics.remoteEntries >= 1 }
    }

    /// A durable write that reads row `id` of `T` through the writing context, changes it and updates it (so the
    /// update is guarded by the version read).
    private static func update<T: Entity>(
        _ type: T.Type, id: T.ID, in stack: DataStack, _ change: @escaping @Sendable (inout T) -> Void
    ) async throws {
        try await stack.edit(T.self, id: id, durability: .committed, change)
    }

    /// The first column of the first row `query` returns, read on a connection of its own (the stored truth).
    private static func storedInteger(_ query: PGQuery) async throws -> Int64? {
        try await TestServer.withConnection { try await $0.query(query).first?.decode(Int64.self, at: 0) }
    }

    private static func execute(_ sql: String) async throws {
        try await TestServer.withConnection { _ = try await $0.execute(script: sql) }
    }
}
