import Foundation
import Logging
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// `DEALLOCATE ALL` / `DISCARD ALL` (run by the application, or a pooler's reset query) removes the connection's
/// prepared statements behind its cache's back: a cached statement then fails with 26000
/// (invalid_sql_statement_name). The cache must forget it and prepare again, not fail forever.
@Suite("Prepared statements removed by DISCARD ALL / DEALLOCATE ALL")
struct DiscardedStatementTests {
    @Test(.timeLimit(.minutes(1)), arguments: ["DISCARD ALL", "DEALLOCATE ALL"])
    func cachedStatementsArePreparedAgainAfterTheyWereRemoved(_ reset: String) async throws {
        try await TestServer.withSchema { schema in
            try await TestServer.withConnection { connection in
                try await connection.execute(script: "CREATE TABLE \(quoteIdentifier(schema)).items (n int8)")
                func read(_ n: Int) async throws -> Int {
                    try await connection.query("SELECT \(n)::int8 + 1")[0].decode(Int.self, at: 0)
                }
                func insert(_ n: Int) -> PGQuery { "INSERT INTO \(qualified: [schema, "items"]) (n) VALUES (\(n))" }
                func other(_ n: Int) -> PGQuery { "SELECT \(n)::int8 * 2" }
                #expect(try await read(1) == 2)
                #expect(try await read(2) == 3)
                try await connection.pipeline([insert(1), other(1), insert(2)])
                try await connection.pipeline([insert(3), other(2)])

                // Outside a transaction: the statement runs (prepared again).
                try await connection.execute(script: reset)
                #expect(try await read(3) == 4)
                #expect(try await read(4) == 5)

                // In a pipeline whose first statement is one of them: it runs again, once.
                try await connection.execute(script: reset)
                let results = try await connection.pipeline([insert(4), other(3), insert(5)])
                #expect(results.count == 3)
                #expect(try results[1][0].decode(Int.self, at: 0) == 6)
                #expect(try await connection.pipeline([insert(6), other(4)]).count == 2)
                let stored = try await connection.query("SELECT count(*) FROM \(qualified: [schema, "items"])")[0].decode(Int.self, at: 0)
                #expect(stored == 6, "each pipeline committed once")

                // In a transaction the failure stands (the transaction is aborted); the next use prepares again.
                try await connection.execute(script: reset)
                let inTransaction = await #expect(throws: PGError.self) {
                    try await connection.withTransaction { _ in try await read(5) }
                }
                #expect(inTransaction?.sqlState == SQLState("26000"))
                #expect(try await read(5) == 6)
                #expect(try await read(6) == 7)
            }
        }
    }

    /// Through a pool of one connection, as in the report.
    @Test(.timeLimit(.minutes(1))) func throughAPoolOfOne() async throws {
        let pool = PGConnectionPool(configuration: .init(maximumConnections: 1), postgres: try TestServer.configuration)
        for i in 0..<2 {
            #expect(try await pool.withConnection { try await $0.query("SELECT \(i)::int8")[0].decode(Int.self, at: 0) } == i)
        }
        try await pool.withConnection { try await $0.execute(script: "DISCARD ALL") }
        #expect(try await pool.withConnection { try await $0.query("SELECT \(7)::int8")[0].decode(Int.self, at: 0) } == 7)
        try await pool.withConnection { _ = try await $0.pipeline(["SELECT \(1)::int8"]) }
        try await pool.withConnection { try await $0.execute(script: "DISCARD ALL") }
        #expect(try await pool.withConnection { try await $0.pipeline(["SELECT \(8)::int8"])[0][0].decode(Int.self, at: 0) } == 8)
        await pool.shutdown()
    }
}

extension DiscardedStatementTests {
    /// The listener's session caches its statements too: after `DEALLOCATE ALL` on it, a read prepares again.
    @Test(.timeLimit(.minutes(1))) func theListenersSessionPreparesAgain() async throws {
        let channel = "skyros_test_\(UUID().uuidString.prefix(8).lowercased())"
        let outcomes = Locked<[String]>([])
        let listener = try await PGListener.start(
            configuration: try TestServer.configuration, channels: [channel], logger: Logger(label: "test"),
            handles: { note, session in
                let outcome: String
                do {
                    if note.payload == "reset" { _ = try session.query("DEALLOCATE ALL") }
                    outcome = "\(try session.query("SELECT \(7)::int8 * 6")[0].decode(Int.self, at: 0))"
                } catch {
                    outcome = "\(error)"
                }
                outcomes.withLock { $0.append(outcome) }
                return true
            })
        var events = listener.events.makeAsyncIterator()
        #expect(await events.next() == .listening)
        try await TestServer.withConnection { sender in
            for payload in ["a", "reset", "b"] { _ = try await sender.query("SELECT pg_notify(\(channel), \(payload))") }
        }
        await expectEventually { outcomes.withLock { $0.count } == 3 }
        #expect(outcomes.withLock { $0 } == ["42", "42", "42"])
        listener.stop()
    }
}
