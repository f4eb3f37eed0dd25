import Foundation
import Skyros
import SkyrosTestFixtures
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// `readSnapshot`: several reads, one snapshot.
@Suite(.timeLimit(.minutes(1)))
struct SnapshotReadTests {
    @Test func readsInOneSnapshotDoNotSeeACommitMadeBetweenThem() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let stack = try await ManyProcessHarness.stack(schema: schema)
            try await stack.write(durability: .committed) { context in
                for id in 1...3 { try context.insert(MPItem(id: Int64(id), owner: 0, value: id, title: "before")) }
            }
            let outside = try await PGConnection.connect(to: try TestServer.configuration)
            let (before, during, titles) = try await stack.readSnapshot { reader in
                let before = try await reader.count(FetchDescriptor<MPItem>())
                _ = try await outside.query("INSERT INTO \(qualified: [schema, "mp_items"]) VALUES (4, 0, 4, 'concurrent')")
                _ = try await outside.query("UPDATE \(qualified: [schema, "mp_items"]) SET title = 'changed' WHERE id = 1")
                let during = try await reader.count(FetchDescriptor<MPItem>())
                let titles = try await reader.fetch(FetchDescriptor<MPItem>(sortBy: [SortDescriptor(\MPItem.id)])).map(\.title)
                return (before, during, titles)
            }
            #expect(before == 3)
            #expect(during == 3)
            #expect(titles == ["before", "before", "before"])
            let after = try await stack.readSnapshot { try await $0.fetch(FetchDescriptor<MPItem>(sortBy: [SortDescriptor(\MPItem.id)])) }
            #expect(after.map(\.title) == ["changed", "before", "before", "concurrent"])
            await outside.close()
            await stack.shutdown()
        }
    }
}
