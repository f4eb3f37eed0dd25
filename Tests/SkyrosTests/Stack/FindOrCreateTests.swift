import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// `DataContext.findOrCreate` joins its context's changes (atomic with the write); `DataStack.findOrCreate`
/// commits at once. On both stores.
@Suite("findOrCreate")
struct FindOrCreateTests {
    struct BodyFailed: Error {}

    @Test("A write whose body calls findOrCreate and then throws leaves no row", arguments: StackKind.allCases)
    func aThrowingBodyLeavesNoRow(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            let error = await thrownError {
                try await stack.write(durability: .committed) { context in
                    let (_, created) = try await context.findOrCreate(note(1))
                    #expect(created)
                    throw BodyFailed()
                }
            }
            #expect(error is BodyFailed)
            let stored = try await stack.store.object(StackNote.self, id: 1)
            #expect(stored == nil)
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 1) } == nil)
            #expect(try await stack.read { try await $0.count(FetchDescriptor<StackNote>()) } == 0)
        }
    }

    @Test("A row findOrCreate creates commits with the write's other changes, and the body reads it", arguments: StackKind.allCases)
    func createdRowJoinsTheWrite(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { context in
                let (made, created) = try await context.findOrCreate(note(1))
                #expect(created && made == note(1))
                #expect(try await context.object(StackNote.self, id: 1) == note(1))
                // Found in this context now: created once.
                let (again, createdAgain) = try await context.findOrCreate(StackNote(id: 1, title: "other", rank: 0))
                #expect(!createdAgain && again == note(1))
                try context.insert(note(2))
            }
            #expect(try await stack.store.fetch(StackNote.self).map(\.value) == [note(1), note(2)])
            // Found in the store: nothing recorded, nothing written.
            let (found, created) = try await stack.write(durability: .committed) { context in
                let result = try await context.findOrCreate(StackNote(id: 2, title: "other", rank: 0))
                #expect(!context.hasChanges)
                return result
            }
            #expect(!created && found == note(2))
        }
    }

    /// Two contexts each create the row: the second save fails as a duplicate insert does, with the primary
    /// key's constraint named, and saves none of its changes. Run again, the write finds the row.
    @Test("Two contexts creating the same row: the second save fails with the key's constraint and saves nothing", arguments: StackKind.allCases)
    func aConcurrentCreationFailsTheLaterSave(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            let first = stack.newBackgroundContext()
            let second = stack.newBackgroundContext()
            #expect(try await first.findOrCreate(note(7)).created)
            #expect(try await second.findOrCreate(StackNote(id: 7, title: "second", rank: 0)).created)
            try second.insert(note(8))
            try await first.saveToStore()
            let error = await thrownError { try await second.saveToStore() }
            let failure = try #require(error as? PGError, "\(String(describing: error))")
            #expect(failure.kind == .uniqueViolation)
            #expect(failure.constraint == "stack_notes_pkey")
            #expect(try await stack.store.fetch(StackNote.self).map(\.value) == [note(7)])

            let (found, created) = try await stack.write(durability: .committed) { context in
                try await context.findOrCreate(StackNote(id: 7, title: "second", rank: 0))
            }
            #expect(!created && found == note(7))
        }
    }

    @Test("DataStack.findOrCreate commits at once, finds what the main context sees, and recreates a row a queued write deletes", arguments: StackKind.allCases)
    func theStackFormIsImmediate(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            let (made, created) = try await stack.findOrCreate(note(1))
            #expect(created && made == note(1))
            #expect(try await stack.store.object(StackNote.self, id: 1)?.value == note(1))
            let (found, createdAgain) = try await stack.findOrCreate(StackNote(id: 1, title: "other", rank: 0))
            #expect(!createdAgain && found == note(1))

            // Queued and not committed yet: the main context sees it, so it is found without a round trip.
            stack.holdCommits()
            try await stack.write { try $0.insert(note(2)) }
            let queued = try await stack.findOrCreate(StackNote(id: 2, title: "other", rank: 0))
            #expect(!queued.created && queued.value == note(2))
            // Deleted by a queued write: created again after that deletion, through the queue.
            try await stack.write { try await $0.delete(StackNote.self, id: 1) }
            let recreating = Task { try await stack.findOrCreate(StackNote(id: 1, title: "again", rank: 1)) }
            stack.releaseCommits()
            let (recreated, createdAfterDeletion) = try await recreating.value
            #expect(createdAfterDeletion && recreated.title == "again")
            #expect(try await stack.store.fetch(StackNote.self).map(\.value) == [StackNote(id: 1, title: "again", rank: 1), note(2)])
        }
    }
}
