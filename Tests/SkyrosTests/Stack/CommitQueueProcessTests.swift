import Foundation
import SkyrosTestSupport
import Skyros
import SkyrosPostgres
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The commit queue with real OS processes: SIGKILL during durable writes, SIGTERM with queued writes.
@Suite("Commit queue processes", .timeLimit(.minutes(3)))
struct CommitQueueProcessTests {
    static let tablesSQL = """
        CREATE TABLE cq_items (id bigint PRIMARY KEY, label text NOT NULL);
        CREATE TABLE cq_parts (id bigint PRIMARY KEY, item_id bigint NOT NULL);
        """

    /// Item ids and, per item id, its number of parts, in `schema`.
    static func contents(_ schema: String) async throws -> (items: Set<Int>, parts: [Int: Int]) {
        let items = try await CommitQueueTestServer.query(
            "SELECT id FROM \(qualified: [schema, "cq_items"])")
        let parts = try await CommitQueueTestServer.query(
            "SELECT item_id, count(*)::int8 FROM \(qualified: [schema, "cq_parts"]) GROUP BY item_id")
        var counts: [Int: Int] = [:]
        for row in parts { counts[try row.decode(Int.self, at: 0)] = try row.decode(Int.self, at: 1) }
        return (Set(try items.map { try $0.decode(Int.self, at: 0) }), counts)
    }

    @Test("SIGKILL during durable writes: every acknowledged write is in the database, no set is half-applied")
    func killedDurableWriter() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            try await StackTestServer.execute(stack, Self.tablesSQL)
            let schema = try #require((stack.store as? PostgresStore)?.schema)
            let node = try NodeProcess.spawn(["durable-writer", schema, "1000000"])
            defer { node.removeOutput() }
            await expectEventually(within: .seconds(60)) { node.lines.filter { $0.hasPrefix("ack ") }.count >= 300 }
            node.signal(SIGKILL)
            #expect(await node.exitStatus() == 128 + SIGKILL)

            let acknowledged = node.lines.compactMap { line in line.hasPrefix("ack ") ? Int(line.dropFirst(4)) : nil }
            #expect(acknowledged.count >= 300)
            let (items, parts) = try await Self.contents(schema)
            // Every acknowledged durable write is there.
            #expect(Set(acknowledged).isSubset(of: items))
            // At most the one write in flight at the kill committed without its acknowledgement.
            #expect(items.count <= acknowledged.count + 1)
            // Nothing half-applied: each item has both parts and each part its item.
            #expect(items.allSatisfy { parts[$0] == 2 })
            #expect(Set(parts.keys) == items)
        }
    }

    @Test("SIGTERM with queued writes: the process drains the queue and exits 0")
    func terminatedQueuedWriter() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            try await StackTestServer.execute(stack, Self.tablesSQL)
            let schema = try #require((stack.store as? PostgresStore)?.schema)
            let count = 3000
            let node = try NodeProcess.spawn(["queued-writer", schema, "\(count)"])
            defer { node.removeOutput() }
            await expectEventually(within: .seconds(60)) { node.lines.contains("queued \(count)") }
            // Held: nothing is committed yet.
            #expect(try await Self.contents(schema).items.isEmpty)
            node.signal(SIGTERM)
            #expect(await node.exitStatus() == 0, "\(node.report)")
            #expect(node.lines.contains("drained, 0 failed"))
            let (items, parts) = try await Self.contents(schema)
            #expect(items.count == count)
            #expect(items == Set(1...count))
            #expect(items.allSatisfy { parts[$0] == 2 })
        }
    }
}
