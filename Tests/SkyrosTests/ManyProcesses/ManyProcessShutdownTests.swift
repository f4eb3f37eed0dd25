import Foundation
import SkyrosTestSupport
import Skyros
import SkyrosPostgres
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A process that awaits `shutdown()` and exits at once: nothing of its stack runs on (no task left to open a
/// connection into the process's teardown), checked against the server's own connection log.
@Suite("Shutdown, then exit", .timeLimit(.minutes(10)))
struct ManyProcessShutdownTests {
    /// One server's connection log: when each connection of an application name was authorized.
    struct ConnectionLog {
        let text: String

        /// Milliseconds since 1970 of each `connection authorized` line naming `application`.
        func authorizations(of application: String) -> [Int64] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "UTC")
            formatter.dateFormat = "yyyy-MM-dd HH:mm:ss.SSS"
            return self.text.split(separator: "\n").compactMap { line -> Int64? in
                guard line.contains("connection authorized"), line.hasSuffix("application_name=\(application)") else { return nil }
                // "2026-11-26 20:01:02.123 UTC [4242] LOG:  connection authorized: … application_name=…"
                guard let date = formatter.date(from: String(line.prefix(23))) else { return nil }
                return Int64((date.timeIntervalSince1970 * 1000).rounded())
            }
        }
    }

    @Test("A durable write, shutdown() and an immediate exit, 100 times: never a crash, no connection after shutdown")
    func shutdownThenExit() async throws {
        try await PostgresFixture.with("logged") { fixture in
            let url = try fixture.value("URL")
            let schema = "shutdown_exit"
            let setup = try await PGConnection.connect(to: fixture.configuration("URL"))
            _ = try await setup.query("CREATE SCHEMA \(identifier: schema)")
            _ = try await setup.query(
                "CREATE TABLE \(qualified: [schema, "cq_items"]) (id bigint PRIMARY KEY, label text NOT NULL)")
            _ = try await setup.query(
                "CREATE TABLE \(qualified: [schema, "cq_parts"]) (id bigint PRIMARY KEY, item_id bigint NOT NULL)")
            await setup.close()

            let runs = 100
            let run = UUID().uuidString.prefix(8).lowercased()
            var shutdownAt: [Int: Int64] = [:]
            // Four processes at a time: each starts its stack, writes, shuts down and exits.
            for batch in stride(from: 0, to: runs, by: 4) {
                let nodes = try (batch..<min(batch + 4, runs)).map { index in
                    (index, try NodeProcess.spawn(
                        "/usr/bin/env",
                        ["DATABASE_URL=\(url)", TestNode.executablePath, "write-shutdown-exit", schema, "\(index + 1)", "skyros-exit-\(run)-\(index)"]))
                }
                for (index, node) in nodes {
                    let status = await node.exitStatus()
                    #expect(status == 0, "run \(index) exited \(status)\n\(node.report)")
                    let line = node.lines.first { $0.hasPrefix("shutdown ") }
                    shutdownAt[index] = line.flatMap { Int64($0.dropFirst("shutdown ".count)) }
                    node.removeOutput()
                }
            }
            #expect(shutdownAt.values.count == runs)

            // Every write is in the table, once.
            let check = try await PGConnection.connect(to: fixture.configuration("URL"))
            let count = try await check.query("SELECT count(*)::int8 FROM \(qualified: [schema, "cq_items"])")[0].decode(Int.self, at: 0)
            await check.close()
            #expect(count == runs)

            // The server logs a connection as it is authorized; none of a run's came after its shutdown() returned.
            let log = ConnectionLog(text: try String(contentsOfFile: fixture.value("LOG"), encoding: .utf8))
            var late: [String] = []
            for index in 0..<runs {
                let authorizations = log.authorizations(of: "skyros-exit-\(run)-\(index)")
                #expect(!authorizations.isEmpty, "run \(index): no connection in the server's log")
                guard let returned = shutdownAt[index] else { continue }
                late += authorizations.filter { $0 > returned }.map { "run \(index): a connection \($0 - returned) ms after shutdown() returned" }
            }
            #expect(late.isEmpty, "\(late)")
        }
    }
}
