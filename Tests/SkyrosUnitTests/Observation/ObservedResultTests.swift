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

    /// The in-memory store's counterpart of a `TRUNCATE`: deleting every row of a table wakes that table's query
    /// observers and the observers of its rows (the stack is the store's only writer, so every change is a
    /// local save).
    @Test func deletingEveryRowWakesTheTablesObservers() async throws {
        let stack = try await DataStack.start(DataStackConfiguration(store: .inMemory))
        try await withCleanup {
            try await stack.write(durability: .committed) { context in
                for id in 1...3 { try context.insert(MPItem(id: Int64(id), owner: 1, value: id, title: "item \(id)")) }
            }
            var query = stack.observe(FetchDescriptor<MPItem>(sortBy: [SortDescriptor(\.id)])).makeAsyncIterator()
            var row = stack.observe(MPItem.self, id: 2).makeAsyncIterator()
            #expect(try await query.next()?.values.count == 3)
            #expect(try await row.next()??.title == "item 2")
            try await stack.write(durability: .committed) { context in
                _ = try await context.delete(where: nil as Predicate<MPItem>?)
            }
            let emptied = try #require(try await query.next())
            #expect(emptied.values.isEmpty)
            #expect(emptied.diff.deleted.count == 3)
            let gone = try await row.next()
            #expect(gone == .some(nil))
        } cleanup: {
            await stack.shutdown()
        }
    }
}
