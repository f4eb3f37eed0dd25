import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// `sslmode=verify-full` against a server that accepts only TLS, its certificate signed by a test CA
/// (`scripts/pg-fixture tls`).
@Suite("TLS", .enabled(if: PostgresFixture.isAvailable, "starts its own server: run through scripts/test"))
struct TLSTests {
    @Test func verifyFullConnectsPoolsAndListensOverTLS() async throws {
        try await PostgresFixture.with("tls") { fixture in
            let config = try fixture.configuration("URL")
            #expect(config["sslmode"] == "verify-full")

            let connection = try await PGConnection.connect(to: config)
            let row = try await connection.query(
                "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()")[0]
            #expect(try row.decode(Bool.self, at: 0))
            #expect(try row.decode(String.self, at: 1).hasPrefix("TLS"))

            // The pool and the listener (each on connections of their own) go through TLS as well.
            let pool = PGConnectionPool(configuration: .init(maximumConnections: 4), postgres: config)
            let encrypted = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        try await pool.withConnection {
                            try await $0.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")[0].decode(Bool.self, at: 0)
                        }
                    }
                }
                return try await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(encrypted == Array(repeating: true, count: 8))
            await pool.shutdown()

            let listener = try await PGListener.start(configuration: config, channels: ["skyros_tls"])
            var events = listener.events.makeAsyncIterator()
            #expect(await events.next() == .listening)
            try await connection.query("SELECT pg_notify('skyros_tls', 'over tls')")
            var payload: String?
            while payload == nil, let event = await events.next() {
                if case .notification(let note) = event { payload = note.payload }
            }
            #expect(payload == "over tls")
            listener.stop()
            await connection.close()
        }
    }

    @Test func anUntrustedOrMismatchedCertificateAndPlainConnectionsAreRefused() async throws {
        try await PostgresFixture.with("tls") { fixture in
            let good = try fixture.configuration("URL")
            let password = try fixture.value("PASSWORD")

            // A certificate from a CA the client does not trust.
            var untrusted = good
            untrusted["sslrootcert"] = try fixture.value("OTHER_CA")
            let unknownCA = await #expect(throws: PGError.self) { _ = try await PGConnection.connect(to: untrusted) }
            #expect(unknownCA?.kind == .connectionFailed)
            #expect(unknownCA.map { "\($0)".contains("certificate verify failed") } == true)

            // The right CA, but the certificate names "localhost", not the address connected to.
            var mismatched = good
            mismatched["host"] = "127.0.0.1"
            let wrongHost = await #expect(throws: PGError.self) { _ = try await PGConnection.connect(to: mismatched) }
            #expect(wrongHost?.kind == .connectionFailed)
            #expect(wrongHost.map { "\($0)".contains("does not match host name") } == true)

            // Without TLS the server refuses (so the successful connections above were encrypted).
            var plain = good
            plain["sslmode"] = "disable"
            let refused = await #expect(throws: PGError.self) { _ = try await PGConnection.connect(to: plain) }
            #expect(refused.map { "\($0)".contains("no encryption") } == true)

            for error in [unknownCA, wrongHost, refused] {
                #expect(error.map { "\($0) \($0.debugDescription)".contains(password) } == false)
            }
        }
    }
}
