import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Row versions through the context API (`version(of:id:)`, `update(_:ifVersion:)`): what an HTTP service
/// needs for `ETag` / `If-Match`. On both stores, for an entity with a version column and one versioned by
/// `xmin` (in memory: a counter).
@Suite("Row versions")
struct RowVersionTests {
    @Test("version(of:id:) is the stored version, changes with every write, and is nil while a change is pending", arguments: StackKind.allCases)
    func versionIsTheStoredOne(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { context in
                try context.insert(note(1))
                try context.insert(StackCounter(id: "a", name: "a", note: ""))
            }
            let noteVersion = try await stack.read { try await $0.version(of: StackNote.self, id: 1) }
            let counterVersion = try await stack.read { try await $0.version(of: StackCounter.self, id: "a") }
            #expect(noteVersion == (try await stack.store.object(StackNote.self, id: 1))?.version)
            #expect(counterVersion == 1)
            #expect(try await stack.read { try await $0.version(of: StackNote.self, id: 99) } == nil)

            try await stack.edit(StackCounter.self, id: "a", durability: .committed) { $0.note = "edited" }
            #expect(try await stack.read { try await $0.version(of: StackCounter.self, id: "a") } == 2)
            try await stack.editNote(1, durability: .committed) { $0.title = "edited" }
            let edited = try await stack.read { try await $0.version(of: StackNote.self, id: 1) }
            #expect(edited != nil && edited != noteVersion)
            #expect(edited == (try await stack.store.object(StackNote.self, id: 1))?.version)

            // Queued, not committed: the version is not known yet.
            stack.holdCommits()
            try await stack.edit(StackCounter.self, id: "a") { $0.note = "queued" }
            #expect(try await stack.read { try await $0.version(of: StackCounter.self, id: "a") } == nil)
            let context = stack.newBackgroundContext()
            try context.insert(note(2))
            #expect(try await context.version(of: StackNote.self, id: 2) == nil)
            stack.releaseCommits()
            // The queued write has settled in the main context (the queue empties a moment before).
            try await expectEventually { try !stack.mainContext.hasPendingChanges(StackCounter.self, id: "a") }
            let settled = try await stack.read { try await $0.version(of: StackCounter.self, id: "a") }
            let stored = try await stack.store.object(StackCounter.self, id: "a")?.version
            #expect(settled == 3, "\(String(describing: settled)) stored: \(String(describing: stored))")
        }
    }

    @Test("update(_:ifVersion:) commits with the current version and fails with a stale one, before or at the commit", arguments: StackKind.allCases)
    func updateIfVersion(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { try $0.insert(StackCounter(id: "a", name: "a", note: "")) }
            // The ETag a client holds.
            let etag = try #require(try await stack.read { try await $0.version(of: StackCounter.self, id: "a") })
            try await stack.write(durability: .committed) { context in
                var counter = try #require(try await context.object(StackCounter.self, id: "a"))
                counter.note = "first"
                try await context.update(counter, ifVersion: etag)
            }
            #expect(try await stack.store.object(StackCounter.self, id: "a")?.value.note == "first")

            // Stale, and the context reads the newer row: fails at once, even with nothing changed.
            for change in ["second", "first"] {
                let error = await thrownError {
                    try await stack.write(durability: .committed) { context in
                        var counter = try #require(try await context.object(StackCounter.self, id: "a"))
                        counter.note = change
                        try await context.update(counter, ifVersion: etag)
                    }
                }
                guard case .versionConflict(_, _, let expected, let actual)? = error as? StoreError else {
                    Issue.record("expected a version conflict, got \(String(describing: error))")
                    continue
                }
                #expect(expected == etag && actual == etag + 1)
            }

            // Current when read, changed by another write before the commit: the commit fails, under every merge
            // policy (the version was the client's condition, not a merge hint).
            for policy in [MergePolicy.error, .contextWins, .mergeByProperty, .storeWins] {
                let current = try #require(try await stack.read { try await $0.version(of: StackCounter.self, id: "a") })
                let error = await thrownError {
                    try await stack.write(durability: .committed, mergePolicy: policy) { writer in
                        var counter = try #require(try await writer.object(StackCounter.self, id: "a"))
                        counter.name = "renamed \(policy)"
                        try await writer.update(counter, ifVersion: current)
                        // Another write commits before this one is queued.
                        try await stack.edit(StackCounter.self, id: "a", durability: .committed) { $0.note = "\(policy)" }
                    }
                }
                guard case .versionConflict(_, _, let expected, let actual)? = error as? StoreError else {
                    Issue.record("\(policy): expected a version conflict, got \(String(describing: error))")
                    continue
                }
                #expect(expected == current && actual == current + 1, "\(policy)")
                let stored = try #require(try await stack.store.object(StackCounter.self, id: "a")?.value)
                #expect(stored.name == "a" && stored.note == "\(policy)", "\(policy)")
            }
        }
    }

    @Test("update(_:ifVersion:) of a row this context or a parent changed is refused", arguments: StackKind.allCases)
    func unsavedChangesAreRefused(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { try $0.insert(note(1)) }
            let version = try #require(try await stack.read { try await $0.version(of: StackNote.self, id: 1) })
            let parent = stack.newBackgroundContext()
            var row = try #require(try await parent.object(StackNote.self, id: 1))
            row.title = "unsaved"
            try await parent.update(row)
            for context in [parent, parent.newChildContext()] {
                let error = await thrownError { try await context.update(row, ifVersion: version) }
                #expect((error as? DataStackError)?.code == .rowHasUnsavedChanges, "\(String(describing: error))")
            }
            let missing = await thrownError { try await stack.newBackgroundContext().update(note(9), ifVersion: 1) }
            #expect(missing is StoreError)
        }
    }
}
