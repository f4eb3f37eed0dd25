import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// A projection of ``StackNote``.
struct NoteTitle: Decodable, Equatable, Sendable {
    var id: Int
    var title: String
}

/// Aggregates and projections through contexts see unsaved and queued changes (read-your-writes), on both
/// stores.
@Suite("Context aggregates")
struct ContextAggregateTests {
    /// Rows 1…4 committed: ranks 10…40, even ids tagged "even".
    static func seed(_ stack: DataStack) async throws {
        try await stack.write(durability: .committed) { context in
            for id in 1...4 { try context.insert(note(id, rank: id * 10, tag: id.isMultiple(of: 2) ? "even" : nil)) }
        }
    }

    @Test("An aggregate inside write {} sees the write's unsaved inserts, updates and deletes", arguments: StackKind.allCases)
    func insideWrite(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await Self.seed(stack)
            let all = FetchDescriptor<StackNote>()
            try await stack.write(durability: .committed) { context in
                try context.insert(note(5, rank: 50, tag: "even"))
                var first = try #require(try await context.object(StackNote.self, id: 1))
                first.rank = 100
                try await context.update(first)
                try await context.delete(StackNote.self, id: 2)

                let (count, total, average, highest, lowestTitle) = try await context.aggregate(
                    all, .count, .sum(\.rank), .avg(\.rank), .max(\.rank), .min(\.title))
                #expect(count == 4)
                #expect(total == 220)
                #expect(average == Decimal(55))
                #expect(highest == 100)
                #expect(lowestTitle == "note 1")

                let byTag = try await context.aggregate(all, groupBy: \.tag, .count, .sum(\.rank), .count(\.tag))
                #expect(byTag.map(\.key) == [nil, "even"])
                #expect(byTag.map(\.values.0) == [2, 2])
                #expect(byTag.map(\.values.1) == [130, 90])
                #expect(byTag.map(\.values.2) == [0, 2])

                let none = try await context.aggregate(
                    FetchDescriptor<StackNote>(predicate: #Predicate { $0.rank > 1_000 }), .count, .sum(\.rank), .avg(\.rank))
                #expect(none.0 == 0 && none.1 == nil && none.2 == nil)
                #expect(try await context.aggregate(
                    FetchDescriptor<StackNote>(predicate: #Predicate { $0.rank > 1_000 }), groupBy: \.tag, .count).isEmpty)

                let titles = try await context.fetch(
                    FetchDescriptor<StackNote>(sortBy: [SortDescriptor(\.rank, order: .reverse)]), as: NoteTitle.self,
                    propertiesToFetch: [\.id, \.title])
                #expect(titles.map(\.id) == [1, 5, 4, 3])
            }
            // Committed: the store's SQL (no changes left) gives the same answer.
            let after = try await stack.read { try await $0.aggregate(all, .count, .sum(\.rank)) }
            #expect(after.0 == 4 && after.1 == 220)
            let stored = try await stack.store.aggregate(all, groupBy: \.tag, .count, .sum(\.rank))
            #expect(stored.map(\.key) == [nil, "even"])
            #expect(stored.map(\.values.1) == [130, 90])
        }
    }

    @Test("A child context's aggregate sees its own and its parent's unsaved changes; others do not", arguments: StackKind.allCases)
    func childContext(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await Self.seed(stack)
            let parent = stack.newBackgroundContext()
            try parent.insert(note(6, rank: 60, tag: "even"))
            let child = parent.newChildContext()
            try await child.delete(StackNote.self, id: 4)
            var three = try #require(try await child.object(StackNote.self, id: 3))
            three.tag = "odd"
            try await child.update(three)

            let byTag = try await child.aggregate(FetchDescriptor<StackNote>(), groupBy: \.tag, .count, .max(\.rank))
            #expect(byTag.map(\.key) == [nil, "even", "odd"])
            #expect(byTag.map(\.values.0) == [1, 2, 1])
            #expect(byTag.map(\.values.1) == [10, 60, 30])
            let grid = try await child.aggregate(
                FetchDescriptor<StackNote>(predicate: #Predicate { $0.rank >= 30 }), groupBy: (\.tag, \.title), .sum(\.rank))
            #expect(grid.map { "\($0.key.0 ?? "nil")/\($0.key.1)" } == ["even/note 6", "odd/note 3"])
            #expect(grid.map(\.values) == [60, 30])
            #expect(try await parent.aggregate(FetchDescriptor<StackNote>(), .count) == 5)
            #expect(try await stack.read { try await $0.aggregate(FetchDescriptor<StackNote>(), .count) } == 4)

            try child.save()
            try await parent.saveToStore()
            let committed = try await stack.store.aggregate(FetchDescriptor<StackNote>(), groupBy: \.tag, .count)
            #expect(committed.map(\.key) == [nil, "even", "odd"])
            #expect(committed.map(\.values) == [1, 2, 1])
        }
    }

    @Test("Readers see queued writes in aggregates and projections before they commit", arguments: StackKind.allCases)
    func queuedWrites(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await Self.seed(stack)
            stack.holdCommits()
            try await stack.write(durability: .visible) { context in
                try context.insert(note(7, rank: 70))
                try await context.delete(StackNote.self, id: 1)
            }
            #expect(stack.queuedCommits == 1)
            let (count, total) = try await stack.read { try await $0.aggregate(FetchDescriptor<StackNote>(), .count, .sum(\.rank)) }
            #expect(count == 4)
            #expect(total == 160)
            let ids = try await stack.read { try await $0.fetch(FetchDescriptor<StackNote>(), as: NoteTitle.self).map(\.id) }
            #expect(ids == [2, 3, 4, 7])
            // The store itself has not seen the write yet.
            #expect(try await stack.store.aggregate(FetchDescriptor<StackNote>(), .count) == 4)
            let storedSum: Int? = try await stack.store.aggregate(FetchDescriptor<StackNote>(), .sum(\.rank))
            #expect(storedSum == 100)
            stack.releaseCommits()
            try await expectEventually {
                let committedSum: Int? = try await stack.store.aggregate(FetchDescriptor<StackNote>(), .sum(\.rank))
                return committedSum == 160
            }
        }
    }

    @Test("A snapshot reader aggregates and projects committed rows", arguments: StackKind.allCases)
    func snapshot(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await Self.seed(stack)
            let (count, byTag, titles) = try await stack.readSnapshot { snapshot in
                let count: Int = try await snapshot.aggregate(FetchDescriptor<StackNote>(), .count)
                let byTag = try await snapshot.aggregate(FetchDescriptor<StackNote>(), groupBy: \.tag, .avg(\.rank))
                let titles = try await snapshot.fetch(
                    FetchDescriptor<StackNote>(predicate: #Predicate { $0.rank > 20 }), as: NoteTitle.self)
                return (count, byTag, titles)
            }
            #expect(count == 4)
            #expect(byTag.map(\.key) == [nil, "even"])
            #expect(byTag.map(\.values) == [Decimal(20), Decimal(30)])
            #expect(titles == [NoteTitle(id: 3, title: "note 3"), NoteTitle(id: 4, title: "note 4")])
        }
    }
}
