import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Raw SQL on the stack's pool and inside a transaction, decoded by the stack's row codec, and how its rows
/// meet the main context's cache.
@Suite("Raw SQL", .serialized)
struct RawSQLTests {
    /// A row of the window query below: a counter with its rank among those of its name.
    struct Ranked: Decodable, Equatable {
        var id: String
        var name: String
        var rank: Int
    }

    private static func table(_ stack: DataStack) throws -> [String] {
        [try #require((stack.store as? PostgresStore)?.schema), "stack_counters"]
    }

    /// A window function's rows decode into entities (its extra column ignored) and into a `Decodable`; rows
    /// that carry their version refresh the cache, which held one of them stale: afterwards the main context
    /// returns exactly the rows the statement returned.
    @Test func windowFunctionRowsDecodeAndTheCacheAgrees() async throws {
        // No change feed: a row changed behind the stack's back stays stale in its cache until read again.
        try await StackTestServer.withStack(.postgres, listening: false) { stack in
            let counters = (1...6).map { StackCounter(id: "c\($0)", name: $0 % 2 == 0 ? "even" : "odd", note: "n\($0)") }
            try await stack.write(durability: .committed) { context in for counter in counters { try context.insert(counter) } }
            let cached = try await stack.read { try await $0.fetch(FetchDescriptor<StackCounter>()) }
            #expect(cached.count == 6)
            let table = try Self.table(stack)
            try await StackTestServer.execute(stack, "UPDATE stack_counters SET note = 'outside', row_version = row_version + 1 WHERE id = 'c3'")
            #expect(try await stack.read { try await $0.object(StackCounter.self, id: "c3") }?.note == "n3")   // stale, as set up

            let window: PGQuery = """
                SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY name ORDER BY id DESC) AS rank
                               FROM \(qualified: table)) AS ranked
                WHERE rank <= \(2) ORDER BY name, rank
                """
            let top = try await stack.fetch(StackCounter.self, sql: window)
            #expect(top.map(\.id) == ["c6", "c4", "c5", "c3"])
            #expect(top.first { $0.id == "c3" }?.note == "outside")
            let ranked = try await stack.fetch(Ranked.self, sql: window)
            #expect(ranked == [
                Ranked(id: "c6", name: "even", rank: 1), Ranked(id: "c4", name: "even", rank: 2),
                Ranked(id: "c5", name: "odd", rank: 1), Ranked(id: "c3", name: "odd", rank: 2),
            ])
            // The cache agrees with the statement's rows.
            for row in top {
                #expect(try await stack.read { try await $0.object(StackCounter.self, id: row.id) } == row)
            }
            let statistics = stack.cacheStatistics
            _ = try await stack.read { try await $0.object(StackCounter.self, id: "c3") }
            #expect(stack.cacheStatistics.hits == statistics.hits + 1)
        }
    }

    /// A row without its version (an entity versioned by `xmin`, not selected) leaves the cache alone.
    @Test func rowsWithoutTheirVersionBypassTheCache() async throws {
        try await StackTestServer.withStack(.postgres, listening: false) { stack in
            try await stack.write(durability: .committed) { context in try context.insert(note(1)) }
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 1) }?.title == "note 1")
            try await StackTestServer.execute(stack, "UPDATE stack_notes SET title = 'outside' WHERE id = 1")
            let schema = try #require((stack.store as? PostgresStore)?.schema)
            let plain = try await stack.fetch(StackNote.self, sql: "SELECT * FROM \(qualified: [schema, "stack_notes"])")
            #expect(plain.map(\.title) == ["outside"])
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 1) }?.title == "note 1")   // untouched
            // With xmin selected the row carries its version and refreshes the cache.
            let versioned = try await stack.fetch(StackNote.self, sql: "SELECT *, xmin FROM \(qualified: [schema, "stack_notes"])")
            #expect(versioned.map(\.title) == ["outside"])
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 1) }?.title == "outside")
        }
    }

    /// Inside a transaction raw SQL sees the transaction's writes and bypasses the cache; rows it returned
    /// are read again after the commit, and what it changed reaches the stack through the change feed.
    @Test func insideATransactionRawSQLSeesItsWrites() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            try await stack.write(durability: .committed) { context in
                for id in 1...3 { try context.insert(StackCounter(id: "c\(id)", name: "n", note: "queued")) }
            }
            #expect(try await stack.read { try await $0.object(StackCounter.self, id: "c1") }?.note == "queued")
            let table = try Self.table(stack)
            let claimed = try await stack.transaction { tx -> [StackCounter] in
                try await tx.insert(StackCounter(id: "c4", name: "n", note: "queued"))
                let count = try await tx.fetch(Int.self, sql: "SELECT count(*) FROM \(qualified: table) WHERE note = \("queued")")
                #expect(count == [4])
                return try await tx.fetch(StackCounter.self, sql: """
                    UPDATE \(qualified: table) SET note = 'claimed', row_version = row_version + 1
                    WHERE id IN (SELECT id FROM \(qualified: table) WHERE note = 'queued' ORDER BY id LIMIT \(2) FOR UPDATE SKIP LOCKED)
                    RETURNING *
                    """)
            }
            #expect(claimed.map(\.id).sorted() == ["c1", "c2"] && claimed.allSatisfy { $0.note == "claimed" })
            // Rows the statement returned were dropped from the cache: read as committed.
            #expect(try await stack.read { try await $0.object(StackCounter.self, id: "c1") }?.note == "claimed")
            #expect(try await stack.read { try await $0.object(StackCounter.self, id: "c4") }?.note == "queued")
            let purged = try await stack.transaction { tx in try await tx.execute("DELETE FROM \(qualified: table) WHERE id = \("c3")") }
            #expect(purged == 1)
            try await expectEventually("the change feed brings the raw delete to this stack's cache") {
                try await stack.read { try await $0.object(StackCounter.self, id: "c3") } == nil
            }
        }
    }
}
