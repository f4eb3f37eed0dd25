import Foundation
@_spi(Benchmarks) @testable import SkyrosStore
import SkyrosPostgres
import SkyrosTestEntities
import Testing

/// The locking clause of a transaction's reads. No server needed.
@Suite("Query: row locks → SQL")
struct RowLockSQLTests {
    typealias Row = QueryTestRow

    @Test(arguments: [
        (RowLock.forUpdate, " FOR UPDATE"), (.forUpdate(.skipLocked), " FOR UPDATE SKIP LOCKED"),
        (.forUpdate(.noWait), " FOR UPDATE NOWAIT"), (.forNoKeyUpdate, " FOR NO KEY UPDATE"),
        (.forNoKeyUpdate(.skipLocked), " FOR NO KEY UPDATE SKIP LOCKED"), (.forShare, " FOR SHARE"),
        (.forShare(.noWait), " FOR SHARE NOWAIT"), (.forKeyShare, " FOR KEY SHARE"),
        (.forKeyShare(.skipLocked), " FOR KEY SHARE SKIP LOCKED"),
    ])
    func theClauseFollowsTheWindow(_ lock: RowLock, _ clause: String) throws {
        let s = "a"
        // A schema name with a quote and `$`, and the entity's columns `n` and `m`.
        let descriptor = FetchDescriptor<Row>(
            predicate: #Predicate { $0.name == s }, sortBy: [SortDescriptor(\.n)], fetchLimit: 10, fetchOffset: 5)
        let plain = try SQLQueryBuilder.select(descriptor, schema: #"job"s $1"#, includeVersion: true)
        let locked = try SQLQueryBuilder.select(descriptor, schema: #"job"s $1"#, lock: lock)
        #expect(locked.sql == plain.sql + clause)
        #expect(locked.binds == plain.binds)
        #expect(plain.sql.contains(#""job""s $1"."query_rows""#))
        #expect(plain.sql.hasSuffix("LIMIT $2 OFFSET $3"))
        #expect(lock.description == clause)
    }

    @Test func noLockIsAPlainSelect() throws {
        let plain = try SQLQueryBuilder.select(FetchDescriptor<Row>(), schema: nil, includeVersion: true)
        #expect(try SQLQueryBuilder.select(FetchDescriptor<Row>(), schema: nil, lock: nil) == plain)
    }
}
