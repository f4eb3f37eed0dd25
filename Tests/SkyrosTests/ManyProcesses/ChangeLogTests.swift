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

/// The change log and its cursor: out-of-commit-order positions, pruning gaps, the NOTIFY hint.
/// The limit only rules out a hang: inside the parallel run (and under ThreadSanitizer in CI) the 250 sequential
/// commits of `aStacksOwnHintsNeverEvictItsOwnRowsHoweverManyInARow` took 44–92 s.
@Suite(.timeLimit(.minutes(3)))
struct ChangeLogTests {
    private static let origin = UUID()

    private static func entry(_ position: Int64, xid: UInt64) -> ChangeLogEntry {
        ChangeLogEntry(position: position, xid: String(xid), origin: Self.origin, changes: [])
    }

    /// The change of the log tests that write entries by hand.
    private static var change: RowChange {
        get throws { RowChange(entity: "MPItem", table: "mp_items", id: try PGValue(Int64(1)), kind: .updated, version: 7) }
    }

    /// A log in a schema of its own, two sessions that write to it and one that reads it, with a cursor that has
    /// read it once.
    private static func withLogAndThreeSessions(
        _ body: (ChangeLog, _ first: PGConnection, _ second: PGConnection, _ reader: PGConnection, inout ChangeCursor) async throws -> Void
    ) async throws {
        try await ManyProcessHarness.withSchema { schema in
            let log = ChangeLog(schema: schema)
            let configuration = try TestServer.configuration
            let sessions = [
                try await PGConnection.connect(to: configuration), try await PGConnection.connect(to: configuration),
                try await PGConnection.connect(to: configuration),
            ]
            try await log.createIfNeeded(on: sessions[2])
            var cursor = ChangeCursor()
            let start = try await log.read(after: nil, on: sessions[2])
            _ = cursor.advance(entries: start.entries, snapshot: start.snapshot, prunedThrough: start.prunedThrough)
            do {
                try await body(log, sessions[0], sessions[1], sessions[2], &cursor)
            } catch {
                for session in sessions { await session.close() }
                throw error
            }
            for session in sessions { await session.close() }
        }
    }

    /// A transaction left open anywhere on the server holds every snapshot's `xmin` back. Reads used to start
    /// there, so while it stayed open each read (about once a second while hints arrive) returned every entry
    /// written since it began, and the cursor remembered them all. A read now returns what committed since the
    /// last one, and the open transaction's own entry once it commits.
    @Test func aTransactionLeftOpenDoesNotMakeEveryReadReturnTheWholeTail() async throws {
        try await Self.withLogAndThreeSessions { log, open, writer, reader, cursor in
            _ = try await open.execute(script: "BEGIN")
            let held = try #require(try await log.record([try Self.change], origin: UUID().uuidString.lowercased(), on: open))
            var written: [Int64] = []
            for _ in 0..<20 {
                written.append(try #require(try await log.record([try Self.change], origin: UUID().uuidString.lowercased(), on: writer)))
            }
            let read1 = try await log.read(after: cursor.window, on: reader)
            #expect(read1.entries.map(\.position) == written)
            #expect(cursor.advance(entries: read1.entries, snapshot: read1.snapshot, prunedThrough: read1.prunedThrough)
                == .entries(read1.entries))
            #expect(read1.snapshot.running.contains(try await open.query("SELECT pg_current_xact_id()::text")[0].decode(String.self, at: 0)))

            // Nothing committed since: nothing comes back, however long the transaction stays open.
            for _ in 0..<2 {
                let again = try await log.read(after: cursor.window, on: reader)
                #expect(again.entries.isEmpty, "\(again.entries.map(\.position))")
                #expect(cursor.advance(entries: again.entries, snapshot: again.snapshot, prunedThrough: again.prunedThrough) == .entries([]))
            }

            _ = try await open.execute(script: "COMMIT")
            let read3 = try await log.read(after: cursor.window, on: reader)
            #expect(read3.entries.map(\.position) == [held])
            #expect(cursor.advance(entries: read3.entries, snapshot: read3.snapshot, prunedThrough: read3.prunedThrough)
                == .entries(read3.entries))
        }
    }

    @Test func anEntryWhoseTransactionCommitsAfterALaterPositionIsNotMissed() async throws {
        try await Self.withLogAndThreeSessions { log, early, late, reader, cursor in
            _ = try await early.execute(script: "BEGIN")
            let first = try #require(try await log.record([try Self.change], origin: UUID().uuidString.lowercased(), on: early))      // position 1, still open
            let second = try await late.withTransaction { try #require(try await log.record([try Self.change], origin: UUID().uuidString.lowercased(), on: $0)) }
            #expect(first < second)

            let read1 = try await log.read(after: cursor.window, on: reader)
            #expect(cursor.advance(entries: read1.entries, snapshot: read1.snapshot, prunedThrough: read1.prunedThrough)
                == .entries(read1.entries.filter { $0.position == second }))
            _ = try await early.execute(script: "COMMIT")
            let read2 = try await log.read(after: cursor.window, on: reader)
            guard case .entries(let fresh) = cursor.advance(entries: read2.entries, snapshot: read2.snapshot, prunedThrough: read2.prunedThrough) else {
                Issue.record("unexpected gap")
                return
            }
            #expect(fresh.map(\.position) == [first])
            #expect(fresh.first?.changes.first?.key == RowKey(table: "mp_items", id: try PGValue(Int64(1))))
        }
    }

    @Test func eachCommitTransactionSendsOneHintOnTheSchemasChannel() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let stack = try await ManyProcessHarness.stack(schema: schema)
            let listener = try await PGListener.start(
                configuration: try TestServer.configuration, channels: [ChangeLog.channelName(schema: schema)])
            var events = listener.events.makeAsyncIterator()
            #expect(await events.next() == .listening)
            try await stack.write(durability: .committed) { context in
                for id in 1...20 { try context.insert(MPItem(id: Int64(id), owner: 0, value: id, title: "")) }
            }
            guard case .notification(let hint) = await events.next() else {
                Issue.record("no hint")
                return
            }
            // `<position> <origin>`: tiny, and a stack recognises its own hints without reading the log.
            let parsed = try #require(ChangeLog.Hint(hint.payload))
            #expect(parsed.origin == stack.changeFeedOrigin)
            #expect(hint.payload.utf8.count < 64)
            let position = parsed.position
            let connection = try await PGConnection.connect(to: try TestServer.configuration)
            let rows = try await connection.query(
                "SELECT jsonb_array_length(changes::jsonb) FROM \(qualified: [schema, "skyros_change_log"]) WHERE position = \(position)")
            #expect(try rows.first?.decode(Int.self, at: 0) == 20)   // the log, not the hint, carries the rows
            listener.stop()
            await connection.close()
            await stack.shutdown()
        }
    }

    @Test func aSmallEntryTravelsInItsHintAndAnotherStackActsOnItWithoutReadingTheLog() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let a = try await ManyProcessHarness.stack(schema: schema)
            // No horizon read may happen on its own schedule during the test (it checks that B reads no log).
            let b = try await ManyProcessHarness.stack(schema: schema) { $0.horizonReadInterval = .seconds(3600) }
            let listener = try await PGListener.start(
                configuration: try TestServer.configuration, channels: [ChangeLog.channelName(schema: schema)])
            var events = listener.events.makeAsyncIterator()
            #expect(await events.next() == .listening)
            try await a.write(durability: .committed) { try $0.insert(MPItem(id: 1, owner: 0, value: 1, title: "one")) }
            await expectEventually { b.changeFeedStatistics.hintEntries >= 1 }
            #expect(try await b.mainContext.object(MPItem.self, id: 1)?.value == 1)   // cached in B
            let readsBefore = b.changeFeedStatistics.reads

            try await a.write(durability: .committed) { try await $0.update(MPItem(id: 1, owner: 0, value: 2, title: "two")) }
            // B evicts the row on A's hint alone: its next read of the row sees A's value, and it read no log.
            try await expectEventually { try await b.mainContext.object(MPItem.self, id: 1)?.value == 2 }
            #expect(b.changeFeedStatistics.reads == readsBefore)
            #expect(b.changeFeedStatistics.hintEntries >= 2)

            // The hint: `<position> <origin> <xid> <tag> <changes>`, the same entry the log holds, its tag
            // verified with the keys B read from the log's state table.
            guard case .notification(_) = await events.next(), case .notification(let second) = await events.next() else {
                Issue.record("no hints")
                return
            }
            let hint = try #require(ChangeLog.Hint(second.payload))
            let entry = try #require(hint.entry(verifiedWith: b.sync.changeFeed?.hintKey))
            #expect(entry.origin == a.changeFeedOrigin)
            let expectedKey = try RowKey(MPItem.self, id: 1)
            #expect(entry.changes.map(\.key) == [expectedKey])
            let connection = try await PGConnection.connect(to: try TestServer.configuration)
            let logged = try await connection.query(
                "SELECT xid::text FROM \(qualified: [schema, "skyros_change_log"]) WHERE position = \(hint.position)")
            #expect(try logged.first?.decode(String.self, at: 0) == entry.xid)
            listener.stop()
            await connection.close()
            await a.shutdown()
            await b.shutdown()
        }
    }

    @Test func aStacksOwnHintsNeverEvictItsOwnRowsHoweverManyInARow() async throws {
        try await ManyProcessHarness.withSchema { schema in
            // 100 own hints skipped without a read (10,000 by default); later ones are recorded by the cursor,
            // and none is delivered as another stack's change.
            let stack = try await ManyProcessHarness.stack(schema: schema) {
                $0.hintsPerHorizonRead = 100
                $0.horizonReadInterval = .seconds(3600)
            }
            try await stack.write(durability: .committed) { try $0.insert(MPItem(id: 1, owner: 0, value: 0, title: "")) }
            _ = try await stack.mainContext.object(MPItem.self, id: 1)
            let missesBefore = stack.cacheStatistics.misses
            for value in 1...250 {
                try await stack.write(durability: .committed) { try await $0.update(MPItem(id: 1, owner: 0, value: value, title: "")) }
            }
            let feed = stack.changeFeedStatistics
            #expect(feed.remoteEntries == 0 && feed.hintEntries == 0, "\(feed)")
            // Every update found the row in the cache (an evicted row is a miss, then a store read).
            #expect(stack.cacheStatistics.misses == missesBefore, "\(stack.cacheStatistics)")
            #expect(try await stack.mainContext.object(MPItem.self, id: 1)?.value == 250)
            await stack.shutdown()
        }
    }

    @Test func whileHintsArriveTheHorizonAdvancesWithAReadOncePerInterval() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let a = try await ManyProcessHarness.stack(schema: schema)
            let b = try await ManyProcessHarness.stack(schema: schema) { $0.horizonReadInterval = .milliseconds(200) }
            let readsAtStart = b.changeFeedStatistics.reads
            try await a.write(durability: .committed) { try $0.insert(MPItem(id: 1, owner: 0, value: 0, title: "")) }
            // Hints keep arriving from A; within a few intervals B reads the log once to advance its horizon.
            var value = 0
            try await expectEventually {
                value += 1
                try await a.write(durability: .committed) { [value] in try await $0.update(MPItem(id: 1, owner: 0, value: value, title: "")) }
                return b.changeFeedStatistics.reads > readsAtStart
            }
            // Every entry (the insert and each update) is delivered once, by its hint or by that read.
            let entries = value + 1
            await expectEventually { b.changeFeedStatistics.remoteEntries >= entries }
            #expect(b.changeFeedStatistics.remoteEntries == entries, "\(b.changeFeedStatistics)")
            #expect(try await b.mainContext.object(MPItem.self, id: 1)?.value == value)
            await a.shutdown()
            await b.shutdown()
        }
    }

    /// A state table without the hint keys (created again by an earlier version during a rolling deploy): the
    /// next log read of any stack adds them back, and commits and verified hints resume.
    @Test func aStateTableThatLostItsHintKeysGetsThemBackAtTheNextRead() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let a = try await ManyProcessHarness.stack(schema: schema)
            let b = try await ManyProcessHarness.stack(schema: schema) { $0.horizonReadInterval = .milliseconds(100) }
            try await withCleanup {
                try await TestServer.withConnection { connection in
                    _ = try await connection.execute(script: """
                        ALTER TABLE \(quoteIdentifier(schema)).skyros_change_log_state DROP COLUMN hint_inner, DROP COLUMN hint_outer
                        """)
                }
                // A hint without an entry (B reads the log, finds no keys, and adds them).
                _ = try await TestServer.withConnection { try await $0.query("SELECT pg_notify(\(ChangeLog.channelName(schema: schema)), '0')") }
                #expect(try await eventually(within: .seconds(20), every: .milliseconds(20)) {
                    try await TestServer.withConnection { connection in
                        try await connection.query("""
                            SELECT count(*)::int8 FROM pg_attribute WHERE attrelid = to_regclass(\("\(quoteIdentifier(schema)).skyros_change_log_state"))
                              AND attname IN ('hint_inner', 'hint_outer') AND NOT attisdropped
                            """)[0].decode(Int.self, at: 0) == 2
                    }
                })
                let before = b.changeFeedStatistics.hintEntries
                try await expectEventually(within: .seconds(20)) {
                    try await a.write(durability: .committed) { try $0.insert(MPItem(id: Int64.random(in: 1...1_000_000), owner: 0, value: 1, title: "")) }
                    return b.changeFeedStatistics.hintEntries > before
                }
            } cleanup: {
                await a.shutdown()
                await b.shutdown()
            }
        }
    }

    @Test func changeListsDecodeAsWrittenAndAsPostgreSQLPrintsThemBack() async throws {
        let ids = ["plain", "quote \" and \\ backslash", "line\nbreak\ttab\r", "\u{1}\u{1f}", "naïve 表 🚀", "", "/"]
        let changes = ids.enumerated().map { index, id in
            RowChange(entity: "E", table: "t \"\(index)", id: PGValue(type: .text, text: id),
                      kind: [.inserted, .updated, .deleted][index % 3], version: index % 3 == 2 ? nil : Int64(index) - 3)
        }
        let expected = changes.map(LoggedRowChange.init)
        let written = LoggedRowChange.json(changes)
        #expect(LoggedRowChange.readList(written) == expected)
        // jsonb's text form: keys reordered, spaces added, non-ASCII as written; and escapes a writer may use.
        let connection = try await PGConnection.connect(to: try TestServer.configuration)
        let printed = try await connection.query("SELECT \(written)::jsonb::text")[0].decode(String.self, at: 0)
        #expect(printed != written)
        #expect(LoggedRowChange.readList(printed) == expected)
        let escaped = #"[{"v":null,"k":"d","i":"\u00e9\ud83d\ude80\/","o":25,"t":"\u0074"}]"#
        #expect(LoggedRowChange.readList(escaped) == [LoggedRowChange(table: "t", type: 25, id: "é🚀/", kind: "d", version: nil)])
        // Outside the fast reader's shape (an unknown key): JSONDecoder decides; malformed text throws.
        let extra = #"[{"t":"a","o":20,"i":"1","k":"u","v":2,"x":[1]}]"#
        #expect(LoggedRowChange.readList(extra) == nil)
        #expect(try LoggedRowChange.decodeList(extra) == [LoggedRowChange(table: "a", type: 20, id: "1", kind: "u", version: 2)])
        #expect(throws: (any Error).self) { try LoggedRowChange.decodeList(#"[{"t":"a","o":20"#) }
        #expect(throws: (any Error).self) { try LoggedRowChange.decodeList(#"[{"t":"a","o":20,"i":"1","k":"u"}] x"#) }
        await connection.close()
    }

    @Test func aLogWrittenAsJSONBByAnEarlierVersionIsConvertedAndStaysReadable() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let log = ChangeLog(schema: schema)
            let connection = try await PGConnection.connect(to: try TestServer.configuration)
            try await log.createIfNeeded(on: connection)
            let start = try await log.read(after: nil, on: connection)
            // The log as earlier versions made it: `changes jsonb`, holding an entry in jsonb's text form.
            _ = try await connection.execute(script: "ALTER TABLE \(log.logTable) ALTER COLUMN changes TYPE jsonb USING changes::jsonb")
            let change = RowChange(entity: "MPItem", table: "mp_items", id: try PGValue(Int64(42)), kind: .updated, version: 9)
            let old = try #require(try await log.record([change], origin: Self.origin.uuidString.lowercased(), on: connection))

            try await log.createIfNeeded(on: connection)
            let column = try await connection.query("""
                SELECT format_type(atttypid, NULL), attcompression::text FROM pg_attribute
                WHERE attrelid = to_regclass(\(log.logTable)) AND attname = 'changes'
                """)[0]
            #expect(try column.decode(String.self, at: 0) == "text")
            #expect(try column.decode(String.self, at: 1) == "l")   // this server is built with lz4
            let new = try #require(try await log.record([change], origin: Self.origin.uuidString.lowercased(), on: connection))
            let read = try await log.read(after: ChangeCursor.Window(from: start.snapshot.xmin, running: []), on: connection)
            #expect(read.entries.map(\.position) == [old, new])
            #expect(read.entries.map(\.changes) == [[LoggedRowChange(change)], [LoggedRowChange(change)]])
            await connection.close()
        }
    }
}
