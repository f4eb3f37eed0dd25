import Foundation
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
}
