import Foundation
@testable import Skyros
@testable import SkyrosObservation
@testable import SkyrosStack
@testable import SkyrosStore
@testable import SkyrosSync
import SkyrosPostgres
import SkyrosTestFixtures
import SkyrosTestSupport
import SkyrosTestEntities
import Testing

/// Which observers a change wakes: an observer of a query for any change to its tables, an observer of one row
/// only for its row (or a change to any row of its table), on the registry and through real saves and commits.
@Suite(.timeLimit(.minutes(2)))
struct ObserverWakeUpTests {
    typealias Registered = RegisteredObservers

    static func key(_ table: String, _ id: Int64) -> RowKey { RowKey(table: table, id: PGValue(type: .int8, text: String(id))) }

    @Test func savesAndAnotherStacksCommitsWakeTheObserversOfTheirRows() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let stack = try await ManyProcessHarness.stack(schema: schema)
            let other = try await ManyProcessHarness.stack(schema: schema)
            try await withCleanup {
                try await stack.write(durability: .committed) { context in
                    for id: Int64 in 1...3 { try context.insert(MPItem(id: id, owner: 0, value: 0, title: "r\(id)")) }
                }
                let table = MPItem.tableName
                func observers() -> Registered {
                    Registered(stack.sync.observers, [
                        ("row 1", [table], try! RowKey(MPItem.self, id: 1)), ("row 2", [table], try! RowKey(MPItem.self, id: 2)),
                        ("query", [table], nil),
                    ])
                }

                // A save in this stack.
                var registered = observers()
                try await stack.write(durability: .committed) { try await $0.update(MPItem(id: 1, owner: 0, value: 1, title: "r1")) }
                #expect(await registered.woken() == ["row 1", "query"])

                // A commit by another stack, once this stack's feed has applied it.
                registered = observers()
                let applied = stack.changeFeedStatistics.remoteEntries
                try await other.write(durability: .committed) { try await $0.update(MPItem(id: 2, owner: 0, value: 2, title: "r2")) }
                await expectEventually { stack.changeFeedStatistics.remoteEntries > applied }
                #expect(await registered.woken() == ["row 2", "query"])

                // A delete by predicate may change any row of its table.
                registered = observers()
                try await stack.write(durability: .committed) { context in
                    _ = try await context.delete(where: #Predicate<MPItem> { $0.id == 3 })
                }
                #expect(await registered.woken() == ["row 1", "row 2", "query"])
            } cleanup: {
                await other.shutdown()
                await stack.shutdown()
            }
        }
    }

    /// A committed write whose stored row is not the value it wrote (here the store won a conflict; a merge or
    /// another process's change meanwhile are the same) was shown to observers while it was queued: once it
    /// settles, they are woken and see the stored row.
    @Test func observersSeeTheStoredRowWhenTheStoreWinsAConflict() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 50, title: "first", rank: 1)) }
            let observed = Locked(stack.observe(StackNote.self, id: 50).makeAsyncIterator())
            /// The next element's title, or "(none)" when none comes within 30 s. A passing run waits milliseconds
            /// alone; in the parallel pass beside the multi-process suites the whole test runs tens of times slower
            /// (six copies of this suite at once: the wait for "stored" took up to 2.8 s, the test up to 32 s).
            func nextTitle() async throws -> String {
                try await withThrowingTaskGroup(of: String.self) { group in
                    group.addTask {
                        var iterator = observed.withLock { $0 }
                        let value = try await iterator.next()
                        observed.withLock { $0 = iterator }
                        return value??.title ?? "(deleted)"
                    }
                    group.addTask {
                        try await Task.sleep(for: .seconds(30))
                        return "(none)"
                    }
                    defer { group.cancelAll() }
                    return try await group.next() ?? "(none)"
                }
            }
            var title = try await nextTitle()
            #expect(title == "first")
            // The write is visible at once and held in the queue: the observer is shown the value written.
            stack.holdCommits()
            try await stack.write(mergePolicy: .storeWins) { context in
                var note = try #require(try await context.object(StackNote.self, id: 50))
                // Another writer changes the row after this write read it.
                try await StackTestServer.execute(stack, "UPDATE stack_notes SET title = 'stored' WHERE id = 50")
                note.title = "discarded"
                try await context.update(note)
            }
            title = try await nextTitle()
            #expect(title == "discarded")
            // It commits: the store wins, the write is dropped, and the observer must be told.
            stack.releaseCommits()
            await expectEventually { stack.queuedCommits == 0 }
            title = try await nextTitle()
            #expect(title == "stored")
        }
    }
}
