import Foundation
import Logging
import SkyrosPostgres
import SkyrosTestSupport
import Testing

@Suite("PGListener")
struct ListenerTests {
    @Test func notificationsArriveInOrderAndSurviveATerminatedBackend() async throws {
        let channel = "skyros_test_\(UUID().uuidString.prefix(8).lowercased())"
        let listener = try await PGListener.start(configuration: try TestServer.configuration, channels: [channel])
        var events = listener.events.makeAsyncIterator()
        #expect(await events.next() == .listening)

        let sender = try await TestServer.connect()
        for i in 0..<50 { try await sender.query("SELECT pg_notify(\(channel), \(String(i)))") }
        var payloads: [String] = []
        while payloads.count < 50, let event = await events.next() {
            if case .notification(let n) = event {
                #expect(n.channel == channel)
                payloads.append(n.payload)
            }
        }
        #expect(payloads == (0..<50).map(String.init))

        // Kill the listener's backend: it reconnects, reports possible loss, and keeps delivering.
        try await sender.query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid() AND application_name = 'skyros' AND query LIKE \("%" + channel + "%")")
        var sawReconnect = false
        while let event = await events.next() {
            if event == .reconnected {
                sawReconnect = true
                break
            }
        }
        #expect(sawReconnect)
        try await sender.query("SELECT pg_notify(\(channel), 'after')")
        var after: String?
        while after == nil, let event = await events.next() {
            if case .notification(let n) = event { after = n.payload }
        }
        #expect(after == "after")
        listener.stop()
        await sender.close()
    }

    /// The change feed handles hints on the listener's thread: what `handles` leaves arrives in order, and
    /// nothing it handles is yielded (it runs once per notification).
    @Test func notificationsADropFilterRejectsAreNeverYielded() async throws {
        let channel = "skyros_test_\(UUID().uuidString.prefix(8).lowercased())"
        let seen = Locked<[String]>([])
        let listener = try await PGListener.start(
            configuration: try TestServer.configuration, channels: [channel], logger: Logger(label: "test"),
            handles: { note, _ in
                seen.withLock { $0.append(note.payload) }
                return note.payload.hasPrefix("own ")
            })
        var events = listener.events.makeAsyncIterator()
        #expect(await events.next() == .listening)
        let sent = (0..<60).map { $0 % 3 == 0 ? "remote \($0)" : "own \($0)" }
        try await TestServer.withConnection { sender in
            for payload in sent { try await sender.query("SELECT pg_notify(\(channel), \(payload))") }
            // A last kept one: once it arrives, every earlier notification went through `handles`.
            try await sender.query("SELECT pg_notify(\(channel), 'remote end')")
        }
        var kept: [String] = []
        while kept.last != "remote end", let event = await events.next() {
            if case .notification(let note) = event { kept.append(note.payload) }
        }
        #expect(kept == sent.filter { $0.hasPrefix("remote ") } + ["remote end"])
        #expect(seen.withLock { $0 } == sent + ["remote end"])
        listener.stop()
    }

    /// The notifications of one transaction arrive together: while handling each, the session counts those that
    /// wait behind it (the change feed reads rows again only when none do).
    @Test func theSessionCountsTheNotificationsWaitingBehindTheCurrentOne() async throws {
        let channel = "skyros_test_\(UUID().uuidString.prefix(8).lowercased())"
        let backlogs = Locked<[String: Int]>([:])
        let listener = try await PGListener.start(
            configuration: try TestServer.configuration, channels: [channel], logger: Logger(label: "test"),
            handles: { note, session in
                backlogs.withLock { $0[note.payload] = session.backlog }
                return false
            })
        var events = listener.events.makeAsyncIterator()
        #expect(await events.next() == .listening)
        try await TestServer.withConnection { sender in
            _ = try await sender.execute(script: "BEGIN; SELECT pg_notify('\(channel)', 'a'); SELECT pg_notify('\(channel)', 'b'); SELECT pg_notify('\(channel)', 'c'); COMMIT")
            // 'alone' goes once the transaction's three were handled: sent at once, a loaded listener could
            // receive all four in one read, and then 'alone' would rightly wait behind them.
            await expectEventually("the transaction's notifications were handled") { backlogs.withLock { $0["c"] != nil } }
            _ = try await sender.query("SELECT pg_notify(\(channel), 'alone')")
        }
        var payloads: [String] = []
        while payloads.last != "alone", let event = await events.next() {
            if case .notification(let note) = event { payloads.append(note.payload) }
        }
        #expect(payloads == ["a", "b", "c", "alone"])
        #expect(backlogs.withLock { $0 } == ["a": 2, "b": 1, "c": 0, "alone": 0])
        listener.stop()
    }

    /// A read on the listener's connection waits at most 100 ms for a lock (a migration holding a table's
    /// `ACCESS EXCLUSIVE` lock must not stall every notification behind it), then fails; the next succeeds
    /// once the lock is gone.
    @Test func aReadOnTheListenersConnectionDoesNotWaitLongForALock() async throws {
        try await TestServer.withSchema { schema in
            let channel = "skyros_test_\(UUID().uuidString.prefix(8).lowercased())"
            let table = "\(quoteIdentifier(schema)).locked"
            let outcomes = Locked<[String: String]>([:])
            let listener = try await PGListener.start(
                configuration: try TestServer.configuration, channels: [channel], logger: Logger(label: "test"),
                handles: { note, session in
                    let started = ContinuousClock.now
                    let outcome: String
                    do {
                        _ = try session.query(PGQuery(unsafeSQL: "SELECT count(*) FROM \(table) WHERE id = $1", binds: [PGValue(1)]))
                        outcome = "read"
                    } catch let error as PGError {
                        outcome = "\(error.sqlState?.rawValue ?? "-") after \(ContinuousClock.now - started < .seconds(1) ? "under" : "over") 1 s"
                    } catch {
                        outcome = "\(error)"
                    }
                    outcomes.withLock { $0[note.payload] = outcome }
                    return false
                })
            var events = listener.events.makeAsyncIterator()
            #expect(await events.next() == .listening)
            try await TestServer.withConnection { locker in
                _ = try await locker.execute(script: "CREATE TABLE \(table) (id int8 PRIMARY KEY)")
                _ = try await locker.execute(script: "BEGIN; LOCK TABLE \(table) IN ACCESS EXCLUSIVE MODE")
                try await TestServer.withConnection { _ = try await $0.query("SELECT pg_notify(\(channel), 'locked')") }
                while let event = await events.next() {
                    if case .notification(let note) = event, note.payload == "locked" { break }
                }
                _ = try await locker.execute(script: "COMMIT")
                _ = try await locker.query("SELECT pg_notify(\(channel), 'free')")
            }
            while let event = await events.next() {
                if case .notification(let note) = event, note.payload == "free" { break }
            }
            #expect(outcomes.withLock { $0 } == ["locked": "55P03 after under 1 s", "free": "read"])
            listener.stop()
        }
    }

    /// The handler may read through the listener's own connection (the change feed reads observed rows there):
    /// each read sees the commit that sent the notification, notifications arriving meanwhile keep their order,
    /// the statement is prepared once, and one that its table's change outdated is prepared again and the read
    /// run once more, without failing.
    @Test func theHandlerReadsThroughTheListenersConnection() async throws {
        let schema = try await TestServer.makeSchema()
        let channel = "skyros_test_\(UUID().uuidString.prefix(8).lowercased())"
        let table = "\(quoteIdentifier(schema)).counters"
        try await TestServer.withConnection { setup in
            _ = try await setup.execute(script: "CREATE TABLE \(table) (id int8 PRIMARY KEY, n int8 NOT NULL); INSERT INTO \(table) VALUES (1, 0)")
        }
        let read = Locked<[String: String]>([:])
        let failures = Locked<[String]>([])
        let prepared = Locked<Int?>(nil)
        let listener = try await PGListener.start(
            configuration: try TestServer.configuration, channels: [channel], logger: Logger(label: "test"),
            handles: { note, session in
                do {
                    let rows = try session.query(PGQuery(unsafeSQL: "SELECT n FROM \(table) WHERE id = $1", binds: [PGValue(1)]))
                    let value = rows.first.flatMap { try? $0.decode(String.self, at: 0) }
                    if value == nil { failures.withLock { $0.append("\(note.payload): \(rows.count) rows, \(rows.commandTag)") } }
                    read.withLock { $0[note.payload] = value }
                } catch {
                    failures.withLock { $0.append("\(note.payload): \(error)") }
                }
                // A second statement, prepared before the first is prepared again, and a third after: each
                // keeps a name of its own.
                if note.payload == "1" {
                    _ = try? session.query(PGQuery(unsafeSQL: "SELECT $1::int8 + 1", binds: [PGValue(1)]))
                }
                if note.payload == "done" {
                    let doubled = try? session.query(PGQuery(unsafeSQL: "SELECT $1::int8 * 2", binds: [PGValue(21)]))
                        .first?.decode(Int.self, at: 0)
                    let count = try? session.query("SELECT count(*) FROM pg_prepared_statements").first?.decode(Int.self, at: 0)
                    prepared.withLock { $0 = count.map { $0 * 100 + (doubled ?? -1) } }
                }
                return false
            })
        var events = listener.events.makeAsyncIterator()
        #expect(await events.next() == .listening)
        try await TestServer.withConnection { writer in
            for i in 1...40 {
                try await writer.query("UPDATE \(unsafeRaw: table) SET n = \(i) WHERE id = 1")
                try await writer.query("SELECT pg_notify(\(channel), \(String(i)))")
            }
            // The prepared statement's result type changes: it is prepared again, and the read succeeds.
            try await writer.execute(script: "ALTER TABLE \(table) ALTER COLUMN n TYPE text")
            try await writer.query("SELECT pg_notify(\(channel), 'after alter')")
            try await writer.query("SELECT pg_notify(\(channel), 'done')")
        }
        var payloads: [String] = []
        while payloads.last != "done", let event = await events.next() {
            if case .notification(let note) = event { payloads.append(note.payload) }
        }
        #expect(payloads == (1...40).map(String.init) + ["after alter", "done"])
        let values = read.withLock { $0 }
        // Each read sees at least the update committed before its notification (the writer goes on meanwhile);
        // none fails, including the first after the ALTER (which may already run during the last notifications).
        let failed = failures.withLock { $0 }
        #expect(failed.isEmpty, "\(failed)")
        let seen = (1...40).compactMap { i in values[String(i)].map { (i, Int($0) ?? -1) } }
        for (i, value) in seen { #expect(value >= i, "notification \(i) read n = \(value)") }
        #expect(seen.map(\.1) == seen.map(\.1).sorted())
        #expect(seen.count == 40, "\(failed)")
        #expect(values["after alter"] == "40")
        #expect(values["done"] == "40")
        #expect(prepared.withLock { $0 } == 342, "statements prepared × 100 + the third statement's result")
        listener.stop()
        await TestServer.dropSchema(schema)
    }
}
