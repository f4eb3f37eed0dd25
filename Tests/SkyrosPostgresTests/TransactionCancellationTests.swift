import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// A transaction whose task is cancelled is rolled back, on the server, before its connection is used again.
@Suite("Transactions of cancelled tasks")
struct TransactionCancellationTests {
    /// Inserts 1, then waits (without throwing) until its task is cancelled, then inserts 2: the second statement
    /// fails with `.queryCancelled`, as work cancelled between two statements does.
    static func insertOneThenWaitForCancellation(
        on connection: PGConnection, into table: [String], inserted: Locked<Bool>
    ) async throws {
        try await connection.query("INSERT INTO \(qualified: table) VALUES (\(1))")
        inserted.withLock { $0 = true }
        // Ends at the cancellation (a sleep throws at once then), or after a minute at the latest.
        try? await Task.sleep(for: .seconds(60))
        try await connection.query("INSERT INTO \(qualified: table) VALUES (\(2))")
    }

    static func values(in table: [String]) async throws -> [Int] {
        try await TestServer.withConnection { connection in
            try await connection.query("SELECT n FROM \(qualified: table) ORDER BY n").map { try $0.decode(Int.self, at: 0) }
        }
    }

    @Test func aCancelledTransactionIsRolledBackOnItsConnection() async throws {
        try await TestServer.withSchema { schema in
            try await TestServer.withConnection { connection in
                let table = [schema, "t"]
                try await connection.execute(script: "CREATE TABLE \(quoteIdentifier(schema)).t (n int)")
                let inserted = Locked(false)
                let task = Task {
                    try await connection.withTransaction { connection in
                        try await Self.insertOneThenWaitForCancellation(on: connection, into: table, inserted: inserted)
                    }
                }
                await expectEventually { inserted.withLock { $0 } }
                task.cancel()
                let error = await #expect(throws: PGError.self) { try await task.value }
                #expect(error?.kind == .queryCancelled)
                #expect(await connection.isInTransaction == false, "the ROLLBACK ran in the cancelled task")
                #expect(try await Self.values(in: table) == [])
                // Explicit rollback in a cancelled task also reaches the server.
                try await connection.execute(script: "BEGIN")
                try await Task {
                    withUnsafeCurrentTask { $0?.cancel() }
                    try await connection.rollback()
                }.value
                #expect(await connection.isInTransaction == false)
                try await connection.rollback()  // nothing open: nothing to do
            }
        }
    }

    /// Task A is cancelled inside `pool.withTransaction` after its first INSERT while task B waits for the pool's
    /// only connection: A's INSERT must not be committed by B's transaction.
    @Test func thePoolNeverHandsOnACancelledTransaction() async throws {
        try await TestServer.withSchema { schema in
            let pool = PGConnectionPool(configuration: .init(maximumConnections: 1), postgres: try TestServer.configuration)
            let table = [schema, "t"]
            try await pool.withConnection { try await $0.execute(script: "CREATE TABLE \(quoteIdentifier(schema)).t (n int)") }
            let inserted = Locked(false)
            let a = Task {
                try await pool.withTransaction { connection in
                    try await Self.insertOneThenWaitForCancellation(on: connection, into: table, inserted: inserted)
                }
            }
            await expectEventually { inserted.withLock { $0 } }
            let b = Task {
                try await pool.withTransaction { connection -> Int in
                    let seen = try await connection.query("SELECT count(*) FROM \(qualified: table)")[0].decode(Int.self, at: 0)
                    try await connection.query("INSERT INTO \(qualified: table) VALUES (\(3))")
                    return seen
                }
            }
            await expectEventually { pool.statistics.waiting == 1 }
            a.cancel()
            let error = await #expect(throws: PGError.self) { try await a.value }
            #expect(error?.kind == .queryCancelled)
            let seenByB = try await b.value
            #expect(seenByB == 0, "B's transaction does not see A's uncommitted row")
            let committed = try await Self.values(in: table)
            #expect(committed == [3], "only B's row is committed")
            #expect(pool.statistics.inUse == 0)
            await pool.shutdown()
        }
    }

    /// A connection released with a transaction open (leased by hand) is rolled back before it is kept idle.
    @Test func aConnectionReleasedInATransactionIsRolledBack() async throws {
        try await TestServer.withSchema { schema in
            let pool = PGConnectionPool(configuration: .init(maximumConnections: 1), postgres: try TestServer.configuration)
            let table = [schema, "t"]
            try await pool.withConnection { try await $0.execute(script: "CREATE TABLE \(quoteIdentifier(schema)).t (n int)") }
            let connection = try await pool.lease()
            try await connection.execute(script: "BEGIN")
            try await connection.query("INSERT INTO \(qualified: table) VALUES (\(1))")
            await Task {
                withUnsafeCurrentTask { $0?.cancel() }
                await pool.release(connection)
            }.value
            #expect(await connection.isInTransaction == false, "rolled back before it was kept idle")
            #expect(pool.statistics.idle == 1)
            let again = try await pool.withConnection { connection in
                (await connection.isInTransaction, try await connection.query("SELECT count(*) FROM \(qualified: table)")[0].decode(Int.self, at: 0))
            }
            #expect(again.0 == false)
            #expect(again.1 == 0)
            await pool.shutdown()
        }
    }
}
