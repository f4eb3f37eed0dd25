import Foundation
import Logging
import SkyrosPostgres
import SkyrosTestSupport
import Testing

@Suite("PostgresListener")
struct ListenerTests {
    @Test func notificationsArriveInOrderAndSurviveATerminatedBackend() async throws {
        let channel = "skyros_test_\(UUID().uuidString.prefix(8).lowercased())"
        let listener = try await PostgresListener.start(configuration: try TestServer.configuration, channels: [channel])
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

    /// The change feed drops its stack's own hints on the listener's thread: what `drops` keeps arrives in
    /// order, and nothing it drops is yielded (the drop runs once per notification).
    @Test func notificationsADropFilterRejectsAreNeverYielded() async throws {
        let channel = "skyros_test_\(UUID().uuidString.prefix(8).lowercased())"
        let seen = Locked<[String]>([])
        let listener = try await PostgresListener.start(
            configuration: try TestServer.configuration, channels: [channel], logger: Logger(label: "test"),
            drops: { note in
                seen.withLock { $0.append(note.payload) }
                return note.payload.hasPrefix("own ")
            })
        var events = listener.events.makeAsyncIterator()
        #expect(await events.next() == .listening)
        let sent = (0..<60).map { $0 % 3 == 0 ? "remote \($0)" : "own \($0)" }
        try await TestServer.withConnection { sender in
            for payload in sent { try await sender.query("SELECT pg_notify(\(channel), \(payload))") }
            // A last kept one: once it arrives, every earlier notification went through `drops`.
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
}
