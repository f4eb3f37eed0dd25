import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Set-based updates (`update(where:set:)`) with column expressions: on both stores, through contexts, and
/// with concurrent increments.
@Suite("Set-based updates")
struct SetUpdateTests {
    @Test("The store sets constants and expressions on the matching rows only, and bumps their versions", arguments: StackKind.allCases)
    func storeLevel(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            let store = stack.store
            try await store.bulkInsert((1...5).map { note($0, rank: $0 * 10) })
            let before = Dictionary(uniqueKeysWithValues: try await store.fetch(StackNote.self).map { ($0.value.id, $0.version) })
            let updated = try await store.update(
                where: #Predicate<StackNote> { $0.rank >= 30 },
                set: [.set(\.rank, to: \.rank * 2 + 1), .set(\.tag, to: "big")])
            #expect(Set(updated) == [3, 4, 5])
            let after = try await store.fetch(StackNote.self)
            #expect(after.map(\.value) == [note(1, rank: 10), note(2, rank: 20), note(3, rank: 61, tag: "big"), note(4, rank: 81, tag: "big"), note(5, rank: 101, tag: "big")])
            for row in after {
                #expect((row.version != before[row.value.id]) == (row.value.id >= 3), "row \(row.value.id)")
            }
            // Two columns in one expression, and a NULL constant.
            let one = try await store.update(
                where: #Predicate<StackNote> { $0.id == 3 }, set: [.set(\.rank, to: \.rank + \.id), .set(\.tag, to: nil)])
            #expect(one == [3])
            #expect(try await store.object(StackNote.self, id: 3)?.value == note(3, rank: 64))
            // Nothing matches: nothing written.
            #expect(try await store.update(where: #Predicate<StackNote> { $0.id > 100 }, set: [.set(\.rank, to: 0)]).isEmpty)
        }
    }

    @Test("The primary key, an unmapped key path and an empty list are refused before anything is recorded", arguments: StackKind.allCases)
    func refusedAssignments(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { try $0.insert(note(1)) }
            let context = stack.newBackgroundContext()
            #expect(throws: StoreError.self) { try context.update(where: #Predicate<StackNote> { $0.id == 1 }, set: [.set(\.id, to: 2)]) }
            #expect(throws: StoreError.self) { try context.update(where: #Predicate<StackNote> { $0.id == 1 }, set: []) }
            #expect(throws: StoreError.self) {
                try context.update(where: #Predicate<StackNote> { $0.id == 1 }, set: [.set(\.title.count, to: 2)])
            }
            #expect(!context.hasChanges)
        }
    }

    @Test("A context's set-based update commits with its other changes or not at all, and readers see it after the commit", arguments: StackKind.allCases)
    func contextLevel(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { context in
                for id in 1...3 { try context.insert(note(id, rank: id)) }
            }
            // Cached in the main context before the update.
            #expect(try await stack.read { try await $0.fetch(StackNote.self) }.map(\.rank) == [1, 2, 3])
            var observed = stack.observe(FetchDescriptor<StackNote>()).makeAsyncIterator()
            #expect(try await observed.next()?.values.map(\.rank) == [1, 2, 3])

            struct BodyFailed: Error {}
            let error = await thrownError {
                try await stack.write(durability: .committed) { context in
                    try context.update(where: nil, set: [.set(\StackNote.rank, to: \.rank + 100)])
                    throw BodyFailed()
                }
            }
            #expect(error is BodyFailed)

            try await stack.write(durability: .committed) { context in
                try context.insert(note(4, rank: 4))
                // After the insert in the same change set: it updates row 4 too.
                try context.update(where: #Predicate<StackNote> { $0.rank >= 2 }, set: [.set(\.rank, to: \.rank + 100)])
            }
            #expect(try await stack.read { try await $0.fetch(StackNote.self) }.map(\.rank) == [1, 102, 103, 104])
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 2) }?.rank == 102)
            // The observer of the table runs its fetch again.
            var seen: [Int]? = nil
            while seen != [1, 102, 103, 104] {
                guard let next = try await observed.next() else { break }
                seen = next.values.map(\.rank)
            }
            #expect(seen == [1, 102, 103, 104])
        }
    }

    @Test("An increment past the column's range fails with SQLSTATE 22003, and changes nothing", arguments: StackKind.allCases)
    func overflowFailsTheSameWay(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            // On PostgreSQL `rank` is an `integer` column (32 bits); this in-memory store declares no column
            // types, so there the limit is `Int`'s own.
            let highest = kind == .postgres ? Int(Int32.max) : Int.max
            try await stack.write(durability: .committed) { try $0.insert(note(1, rank: highest)) }
            let error = await thrownError {
                try await stack.write(durability: .committed) { try $0.update(where: nil, set: [.set(\StackNote.rank, to: \.rank + 1)]) }
            }
            #expect((error as? PGError)?.sqlState == .numericValueOutOfRange, "\(String(describing: error))")
            #expect(try await stack.store.object(StackNote.self, id: 1)?.value.rank == highest)
        }
    }

    /// 64 tasks each add 1 to one row 200 times, every addition its own queued write: the stored total is exact,
    /// and no write conflicted or failed (a set-based update reads no version).
    @Test("Concurrent increments in one process lose nothing and never conflict", arguments: StackKind.allCases)
    func concurrentIncrements(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { try $0.insert(note(1, rank: 0)) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<64 {
                    group.addTask {
                        for _ in 0..<200 {
                            try await stack.write { try $0.update(where: #Predicate<StackNote> { $0.id == 1 }, set: [.set(\.rank, to: \.rank + 1)]) }
                        }
                    }
                }
                try await group.waitForAll()
            }
            try await stack.write(durability: .committed) { try $0.insert(note(2)) }   // after every queued write
            #expect(try await stack.store.object(StackNote.self, id: 1)?.value.rank == 64 * 200)
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 1) }?.rank == 64 * 200)
            #expect(stack.commitQueueStatistics.conflicts == 0 && stack.commitQueueStatistics.failures == 0, "\(stack.commitQueueStatistics)")
        }
    }
}
