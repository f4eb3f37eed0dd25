import Foundation
import Skyros
import SkyrosTestFixtures
import SkyrosTestSupport
import Testing

/// An observed result as a client gets it (on the in-memory stack: no server).
@Suite struct ObservedResultTests {
    @Test func anObservedResultEncodesAsJSON() async throws {
        let stack = try await DataStack.start(DataStackConfiguration(store: .inMemory))
        try await withCleanup {
            var iterator = stack.observe(FetchDescriptor<MPItem>(sortBy: [SortDescriptor(\.id)])).makeAsyncIterator()
            _ = try await iterator.next()
            try await stack.write { try $0.insert(MPItem(id: 7, owner: 1, value: 2, title: "seven")) }
            let result = try #require(try await iterator.next())
            let json = try #require(try JSONSerialization.jsonObject(with: try JSONEncoder().encode(result)) as? [String: Any])
            let values = try #require(json["values"] as? [[String: Any]])
            #expect(values.first?["title"] as? String == "seven")
            let diff = try #require(json["diff"] as? [String: Any])
            let inserted = try #require(diff["inserted"] as? [[String: Any]])
            #expect(inserted.first?["offset"] as? Int == 0)
            #expect((inserted.first?["value"] as? [String: Any])?["id"] as? Int == 7)
            #expect((diff["deleted"] as? [Any])?.isEmpty == true)
        } cleanup: {
            await stack.shutdown()
        }
    }
}
