import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Restarts the throw-away server: run alone by scripts/test after every other test.
@Suite("ServerRestart", .serialized, .timeLimit(.minutes(2)), .enabled(if: TestServer.mayRestartServer, "needs scripts/test's own cluster"))
struct ServerRestartTests {
    @Test func poolAndListenerKeepWorkingAcrossARestart() async throws {
        let channel = "skyros_restart"
        let pool = PGConnectionPool(configuration: .init(maximumConnections: 4), postgres: try TestServer.configuration)
        let listener = try await PGListener.start(configuration: try TestServer.configuration, channels: [channel])
        var events = listener.events.makeAsyncIterator()
        #expect(await events.next() == .listening)

        // Fill the pool with idle connections.
        try await holdAtOnce(4, connectionsOf: pool)
        #expect(pool.statistics.idle == 4)

        try await TestServer.pgCtl("restart -m fast -w -t 60")

        // New leases succeed without restarting the process.
        var answer: Int?
        await expectEventually(within: .seconds(30), every: .milliseconds(50)) {
            answer = try? await pool.withConnection { try await $0.query("SELECT 42")[0].decode(Int.self, at: 0) }
            return answer != nil
        }
        #expect(answer == 42)
        for _ in 0..<8 {
            #expect(try await pool.withConnection { try await $0.query("SELECT 1")[0].decode(Int.self, at: 0) } == 1)
        }

        var reconnected = false
        while let event = await events.next() {
            if event == .reconnected { reconnected = true; break }
        }
        #expect(reconnected)
        try await pool.withConnection { _ = try await $0.query("SELECT pg_notify(\(channel), 'back')") }
        var payload: String?
        while payload == nil, let event = await events.next() {
            if case .notification(let n) = event { payload = n.payload }
        }
        #expect(payload == "back")
        listener.stop()
        await pool.shutdown()
    }
}
