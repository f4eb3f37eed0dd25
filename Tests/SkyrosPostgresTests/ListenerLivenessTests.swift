import Foundation
import Logging
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// A listener only reads, so a peer that vanished without a FIN or RST (host crash, partition) would go
/// unnoticed for hours: its connection gets TCP keepalives (and on Linux `tcp_user_timeout`) unless the
/// configuration sets them, and after a silence it sends an empty statement and reconnects when no reply
/// comes in time.
@Suite("PGListener: a dead peer is noticed")
struct ListenerLivenessTests {
    /// The options libpq uses for the listener's live connection, read on its thread by a handler.
    private func liveOptions(_ configuration: PGConfiguration) async throws -> [String: String] {
        let channel = "skyros_test_\(UUID().uuidString.prefix(8).lowercased())"
        let options = Locked<[String: String]?>(nil)
        let listener = try await PGListener.start(
            configuration: configuration, channels: [channel], logger: Logger(label: "test"),
            handles: { _, session in
                options.withLock { $0 = session.connectionOptions }
                return true
            })
        try await TestServer.withConnection { _ = try await $0.query("SELECT pg_notify(\(channel), 'x')") }
        await expectEventually { options.withLock { $0 != nil } }
        listener.stop()
        return options.withLock { $0 } ?? [:]
    }

    @Test(.timeLimit(.minutes(1))) func theListenersConnectionHasKeepalivesUnlessTheConfigurationSetsThem() async throws {
        let defaults = try await self.liveOptions(TestServer.configuration)
        #expect(defaults["keepalives"] == "1")
        #expect(defaults["keepalives_idle"] == "30")
        #expect(defaults["keepalives_interval"] == "10")
        #expect(defaults["keepalives_count"] == "3")
        #if os(Linux)
        #expect(defaults["tcp_user_timeout"] == "60000")
        #endif

        var own = try TestServer.configuration
        own["keepalives_idle"] = "7"
        own["tcp_user_timeout"] = "1234"
        let kept = try await self.liveOptions(own)
        #expect(kept["keepalives_idle"] == "7")
        #expect(kept["tcp_user_timeout"] == "1234")
        #expect(kept["keepalives_count"] == "3")
    }

    /// The listener's backend stops answering (SIGSTOP: the server host's TCP stack still acknowledges, as for
    /// a hung server; a vanished host is caught the same way, by the missing reply): the listener reconnects
    /// and reports it. A terminated backend is still noticed with the idle check running.
    @Test(.timeLimit(.minutes(1))) func aListenerWhoseServerStopsAnsweringReconnects() async throws {
        let channel = "skyros_test_\(UUID().uuidString.prefix(8).lowercased())"
        let application = "skyros_live_\(UUID().uuidString.prefix(8).lowercased())"
        var configuration = try TestServer.configuration
        configuration["application_name"] = application
        let listener = try await PGListener.start(
            configuration: configuration, channels: [channel], logger: Logger(label: "test"),
            idleCheck: .init(after: .milliseconds(200), replyTimeout: .seconds(1)), handles: nil)
        let seen = Locked<[PGListener.Event]>([])
        let consumer = Task { for await event in listener.events { seen.withLock { $0.append(event) } } }
        func reconnects() -> Int { seen.withLock { $0.filter { $0 == .reconnected }.count } }
        try await TestServer.withConnection { admin in
            func backend() async throws -> Int32? {
                let rows = try await admin.query("SELECT pid FROM pg_stat_activity WHERE application_name = \(application)")
                return rows.count == 1 ? Int32(try rows[0].decode(Int.self, at: 0)) : nil
            }
            await expectEventually { seen.withLock { $0.first == .listening } }
            let first = try #require(try await backend())
            // Several idle checks pass on a healthy connection without a reconnect.
            try await admin.query("SELECT pg_sleep(0.7)")
            #expect(reconnects() == 0)

            try #require(kill(first, SIGSTOP) == 0, "cannot stop the backend (not a local server?)")
            defer { kill(first, SIGCONT) }
            await expectEventually(within: .seconds(20), "a silent server is noticed") { reconnects() == 1 }
            kill(first, SIGCONT)
            try await admin.query("SELECT pg_terminate_backend(\(first))")

            // A terminated backend is noticed as before.
            var second: Int32?
            await expectEventually {
                guard let pid = try? await backend(), pid != first else { return false }
                second = pid
                return true
            }
            try await admin.query("SELECT pg_terminate_backend(\(try #require(second)))")
            await expectEventually(within: .seconds(20)) { reconnects() == 2 }
            await expectEventually { (try? await backend()).flatMap { $0 } != nil }
            try await admin.query("SELECT pg_notify(\(channel), 'after')")
            await expectEventually {
                seen.withLock { events in
                    if case .notification(let note) = events.last { return note.payload == "after" }
                    return false
                }
            }
        }
        listener.stop()
        await consumer.value
    }
}
