import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// The context suite, on the in-memory store and on PostgreSQL (each case in its own schema).
@Suite("Context suite")
struct ContextSuiteTests {
    @Test("CRUD on contexts", arguments: StackKind.allCases)
    func crud(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write { context in
                try context.insert(note(1, rank: 30))
                try context.insert(note(2, rank: 10))
                try context.insert(note(3, rank: 20, tag: "x"))
            }
            let ranks = try await stack.read { try await $0.fetch(StackNote.self).map(\.rank) }
            #expect(ranks == [10, 20, 30])
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 3) } == note(3, rank: 20, tag: "x"))
            #expect(try await stack.read { try await $0.count(FetchDescriptor<StackNote>()) } == 3)
            let first = try await stack.read {
                try await $0.first(FetchDescriptor<StackNote>(predicate: #Predicate { $0.rank > 10 }))
            }
            #expect(first?.id == 3)

            try await stack.write(durability: .committed) { context in
                var one = try #require(try await context.object(StackNote.self, id: 1))
                one.title = "renamed"
                try await context.update(one)
                try await context.delete(StackNote.self, id: 2)
                try context.upsert(note(4, rank: 40))
                try context.bulkInsert([note(5), note(6), note(7)])
            }
            let stored = try await stack.store.fetch(StackNote.self).map(\.value)
            #expect(Set(stored.map(\.id)) == [1, 3, 4, 5, 6, 7])
            #expect(stored.first { $0.id == 1 }?.title == "renamed")

            let deleted = try await stack.write(durability: .committed) { context in
                try await context.delete(where: #Predicate<StackNote> { $0.rank >= 40 || $0.id == 5 })
            }
            #expect(deleted == 2)
            #expect(Set(try await stack.store.fetch(StackNote.self).map(\.value.id)) == [1, 3, 6, 7])

            let created = try await stack.write(durability: .committed) { try await $0.findOrCreate(note(8)) }
            let found = try await stack.write { try await $0.findOrCreate(StackNote(id: 8, title: "other", rank: 0)) }
            #expect(created.created && !found.created)
            #expect(found.value == note(8))
            #expect(try await stack.store.object(StackNote.self, id: 8)?.value == note(8))
        }
    }

    /// An unsaved update, then a delete by predicate that matches the updated row but not the stored one: the
    /// row is deleted (the `DELETE … WHERE` alone would miss it), in the same context and through a child context
    /// saved into its parent.
    @Test("An updated row then deleted by a predicate only its update matches is deleted", arguments: StackKind.allCases)
    func updateThenDeleteWhere(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { context in
                for id in 1...2 { try context.insert(StackNote(id: id, title: "open", rank: id)) }
            }
            try await stack.write(durability: .committed) { context in
                var first = try #require(try await context.object(StackNote.self, id: 1))
                first.title = "closed"
                try await context.update(first)
                #expect(try await context.delete(where: #Predicate<StackNote> { $0.title == "closed" }) == 1)
            }
            #expect(try await stack.store.fetch(StackNote.self).map(\.value.id) == [2])

            let parent = stack.newBackgroundContext()
            var second = try #require(try await parent.object(StackNote.self, id: 2))
            second.title = "closed"
            try await parent.update(second)
            let child = parent.newChildContext()
            #expect(try await child.delete(where: #Predicate<StackNote> { $0.title == "closed" }) == 1)
            try child.save()
            try await parent.saveToStore()
            #expect(try await stack.store.fetch(StackNote.self).isEmpty)
            #expect(try await stack.read { try await $0.count(FetchDescriptor<StackNote>()) } == 0)
        }
    }

    /// findOrCreate of a row this context deletes, or a queued write deletes: the store still holds the row
    /// the deletion will remove, so the value is recorded as an insert after it, and reported created.
    @Test("findOrCreate of a row pending deletion creates it again after the deletion", arguments: StackKind.allCases)
    func findOrCreateAfterAPendingDeletion(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { context in
                for id in 1...2 { try context.insert(StackNote(id: id, title: "old", rank: id)) }
            }
            let context = stack.newBackgroundContext()
            try await context.delete(StackNote.self, id: 1)
            let (again, created) = try await context.findOrCreate(StackNote(id: 1, title: "new", rank: 1))
            #expect(created && again.title == "new")
            try await context.saveToStore()
            #expect(try await stack.store.object(StackNote.self, id: 1)?.value.title == "new")

            // Deleted by a queued write.
            stack.holdCommits()
            try await stack.write { try await $0.delete(StackNote.self, id: 2) }
            let later = stack.newBackgroundContext()
            let (recreated, createdAgain) = try await later.findOrCreate(StackNote(id: 2, title: "new", rank: 2))
            #expect(createdAgain && recreated.title == "new")
            try later.save()
            stack.releaseCommits()
            try await stack.write(durability: .committed) { _ in }
            await expectEventually { stack.queuedCommits == 0 }
            try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 3, title: "fence", rank: 3)) }
            #expect(try await stack.store.object(StackNote.self, id: 2)?.value.title == "new")
        }
    }

    @Test("A row findOrCreate gave a context is guarded like a row it read: updating it after another write changed it conflicts", arguments: StackKind.allCases)
    func findOrCreateThenUpdateIsGuarded(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { try $0.insert(note(5)) }
            let context = stack.newBackgroundContext()
            var (row, created) = try await context.findOrCreate(StackNote(id: 5, title: "unused", rank: 0))
            #expect(!created && row == note(5))
            try await stack.editNote(5, durability: .committed) { $0.title = "other" }
            row.rank = 99
            try await context.update(row)
            await #expect(throws: StoreError.self) { try await context.saveToStore() }
            #expect(try await stack.store.object(StackNote.self, id: 5)?.value == StackNote(id: 5, title: "other", rank: 5))
        }
    }

    /// A child that read its parent's unsaved change, when the parent saved that change before the child saves
    /// its own, is guarded by the version the parent's save produced: it commits when nothing else changed the
    /// row, and conflicts when something did (it went out unguarded and overwrote that change).
    @Test("A child's change read from its parent's unsaved change is guarded by the version the parent's save produced", arguments: StackKind.allCases)
    func childChangeReadFromAParentChangeSavedSince(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { try $0.insert(note(1)) }
            // `child` reads the parent's change directly, or through a context in between that has no change of
            // the row (a grandchild).
            for (interferes, throughAMiddleContext) in [(false, false), (true, false), (false, true), (true, true)] {
                try await stack.write(durability: .committed) { try $0.upsert(note(1)) }
                let parent = stack.newBackgroundContext()
                var edited = try #require(try await parent.object(StackNote.self, id: 1))
                edited.title = "parent \(interferes)"
                try await parent.update(edited)
                let middle = parent.newChildContext()
                let child = throughAMiddleContext ? middle.newChildContext() : middle
                var fromParent = try #require(try await child.object(StackNote.self, id: 1))
                #expect(fromParent.title == "parent \(interferes)")
                try await parent.saveToStore()
                if interferes { try await stack.editNote(1, durability: .committed) { $0.rank = 50 } }
                fromParent.tag = "child"
                try await child.update(fromParent)
                let stored = { try await stack.store.object(StackNote.self, id: 1)?.value }
                let label = "interferes: \(interferes), through a middle context: \(throughAMiddleContext)"
                if interferes {
                    await #expect(throws: StoreError.self, "\(label)") { try await child.saveToStore() }
                    #expect(try await stored() == StackNote(id: 1, title: "parent true", rank: 50), "\(label)")
                } else {
                    try await child.saveToStore()
                    #expect(try await stored() == StackNote(id: 1, title: "parent false", rank: 1, tag: "child"), "\(label)")
                }
            }
        }
    }

    @Test("An update that changes nothing writes nothing", arguments: StackKind.allCases)
    func unchangedUpdate(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { try $0.insert(note(1)) }
            let before = try #require(try await stack.store.object(StackNote.self, id: 1))
            let context = stack.newBackgroundContext()
            let row = try #require(try await context.object(StackNote.self, id: 1))
            try await context.update(row)
            #expect(!context.hasChanges)
            var changed = row
            changed.rank = 99
            try await context.update(changed)
            #expect(context.hasChanges)
            try await context.update(row)  // back to what was read: nothing to write
            #expect(!context.hasChanges)
            try await context.saveToStore()
            #expect(try await stack.store.object(StackNote.self, id: 1)?.version == before.version)
        }
    }

    @Test("Read-your-writes while the commit is held, with sort and limit across pending and stored rows",
          arguments: StackKind.allCases)
    func readYourWrites(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { context in
                for id in 1...6 { try context.insert(note(id, rank: id * 10)) }  // ranks 10…60
            }
            stack.holdCommits()
            try await stack.write { context in
                try context.insert(note(7, rank: 15))
                try context.insert(note(8, rank: 55))
                var three = try #require(try await context.object(StackNote.self, id: 3))
                three.rank = 5
                try await context.update(three)
                try await context.delete(StackNote.self, id: 2)
            }
            #expect(stack.queuedCommits == 1)
            // Nothing reached the store yet.
            #expect(try await stack.store.count(FetchDescriptor<StackNote>()) == 6)

            let main = stack.mainContext
            let top4 = try await main.fetch(FetchDescriptor<StackNote>(sortBy: [SortDescriptor(\.rank)], fetchLimit: 4))
            #expect(top4.map(\.id) == [3, 1, 7, 4])
            let page = try await main.fetch(
                FetchDescriptor<StackNote>(sortBy: [SortDescriptor(\.rank, order: .reverse)], fetchLimit: 3, fetchOffset: 1))
            #expect(page.map(\.id) == [8, 5, 4])
            let filtered = try await main.fetch(FetchDescriptor<StackNote>(predicate: #Predicate { $0.rank < 20 }))
            #expect(filtered.map(\.id) == [3, 1, 7])
            #expect(try await main.object(StackNote.self, id: 2) == nil)
            #expect(try await main.object(StackNote.self, id: 7)?.rank == 15)
            #expect(try await main.count(FetchDescriptor<StackNote>()) == 7)

            // A second write reads the queued state and builds on it.
            try await stack.write { context in
                var seven = try #require(try await context.object(StackNote.self, id: 7))
                seven.title = "seven"
                try await context.update(seven)
                var three = try #require(try await context.object(StackNote.self, id: 3))
                three.tag = "queued twice"
                try await context.update(three)
            }
            #expect(stack.queuedCommits == 2)
            stack.releaseCommits()
            try await stack.newBackgroundContext().saveToStore()  // nothing to save: waits for the queue
            let stored = try await stack.store.fetch(FetchDescriptor<StackNote>(sortBy: [SortDescriptor(\.rank)])).map(\.value)
            #expect(stored.map(\.id) == [3, 1, 7, 4, 5, 8, 6])
            #expect(stored.first { $0.id == 7 }?.title == "seven")
            #expect(stored.first { $0.id == 3 } == StackNote(id: 3, title: "note 3", rank: 5, tag: "queued twice"))
        }
    }

    @Test("Background, child and nested contexts: save, saveToStore, reset, perform", arguments: StackKind.allCases)
    func contexts(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            let background = stack.newBackgroundContext()
            let child = background.newChildContext()
            let grandchild = child.newChildContext()
            try grandchild.insert(note(1))
            #expect(try await child.object(StackNote.self, id: 1) == nil)
            try grandchild.save()
            #expect(child.hasChanges && !grandchild.hasChanges)
            #expect(try await child.object(StackNote.self, id: 1) == note(1))
            #expect(try await background.object(StackNote.self, id: 1) == nil)

            // A child reads through its parent's unsaved changes, with its own on top.
            try child.insert(note(2, rank: 0))
            let seen = try await child.newChildContext().fetch(StackNote.self).map(\.id)
            #expect(seen == [2, 1])

            try await grandchild.saveToStore()  // pushes through child and background, waits for COMMIT
            #expect(!child.hasChanges && !background.hasChanges)
            #expect(Set(try await stack.store.fetch(StackNote.self).map(\.value.id)) == [1, 2])
            #expect(try await stack.mainContext.fetch(StackNote.self).map(\.id) == [2, 1])

            // reset discards unsaved changes.
            try background.insert(note(3))
            background.reset()
            #expect(!background.hasChanges)
            #expect(try await background.object(StackNote.self, id: 3) == nil)

            // perform returns and rethrows.
            let count = try await background.perform { try await $0.count(FetchDescriptor<StackNote>()) }
            #expect(count == 2)
            struct Boom: Error {}
            await #expect(throws: Boom.self) { try await background.perform { _ in throw Boom() } }

            // The main context's own changes commit on save().
            try stack.mainContext.insert(note(4))
            #expect(try await stack.mainContext.object(StackNote.self, id: 4) == note(4))
            try await stack.mainContext.saveToStore()
            #expect(try await stack.store.object(StackNote.self, id: 4)?.value == note(4))

            // A write whose body throws saves nothing.
            await #expect(throws: Boom.self) {
                try await stack.write { context in
                    try context.insert(note(5))
                    throw Boom()
                }
            }
            #expect(try await stack.mainContext.object(StackNote.self, id: 5) == nil)
        }
    }

    @Test("A failed commit is thrown to the durable writer, reverted, reported once to the completion and on errors",
          arguments: StackKind.allCases)
    func failedCommits(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { try $0.insert(note(1)) }

            // Durable: a duplicate key is thrown; the change (and the rest of its write) is reverted.
            let error = await thrownError {
                try await stack.write(durability: .committed) { context in
                    try context.insert(note(2))
                    try context.insert(StackNote(id: 1, title: "duplicate", rank: 0))
                }
            }
            #expect((error as? PGError)?.kind == .uniqueViolation)
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 1) } == note(1))
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 2) } == nil)
            #expect(try await stack.store.count(FetchDescriptor<StackNote>()) == 1)

            // Optimistic locking: two contexts read version v; the second update conflicts.
            let a = stack.newBackgroundContext()
            let b = stack.newBackgroundContext()
            var rowA = try #require(try await a.object(StackNote.self, id: 1))
            var rowB = try #require(try await b.object(StackNote.self, id: 1))
            rowA.title = "from a"
            rowB.title = "from b"
            try await a.update(rowA)
            try await b.update(rowB)
            try await a.saveToStore()
            let conflict = await thrownError { try await b.saveToStore() }
            guard case .versionConflict(let entity, _, _, _)? = conflict as? StoreError else {
                Issue.record("expected a version conflict, got \(String(describing: conflict))")
                return
            }
            #expect(entity == "StackNote")
            #expect(try await stack.mainContext.object(StackNote.self, id: 1)?.title == "from a")

            // Queued (non-durable): the failure goes to the stack's error stream.
            try await stack.write { try $0.insert(StackNote(id: 1, title: "duplicate", rank: 0)) }
            var iterator = stack.errors.makeAsyncIterator()
            let reported = await iterator.next()
            #expect(reported?.code == .commitFailed)
            #expect((reported?.underlying as? PGError)?.kind == .uniqueViolation)

            // Completion form: called exactly once, with the failure or the value.
            let calls = Locked<[Result<Int, any Error>]>([])
            stack.write({ context in
                try context.insert(StackNote(id: 1, title: "duplicate", rank: 0))
                return 1
            }, completion: { result in calls.withLock { $0.append(result) } })
            stack.write({ context in
                try context.insert(note(3))
                return 3
            }, completion: { result in calls.withLock { $0.append(result) } })
            await expectEventually { calls.withLock { $0.count } == 2 }
            try await Task.sleep(for: .milliseconds(50))  // a double call would arrive now (asserted below)
            let results = calls.withLock { $0 }
            #expect(results.count == 2)
            #expect(results.filter { if case .failure = $0 { true } else { false } }.count == 1)
            #expect(results.compactMap { try? $0.get() } == [3])
        }
    }

    @Test("1,000 concurrent tasks mixing reads and writes lose and duplicate nothing", arguments: StackKind.allCases)
    func concurrentTasks(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind, cacheLimit: CacheLimit(maxRows: 200)) { stack in
            let writes = try await withThrowingTaskGroup(of: Int.self) { group in
                for task in 0..<1_000 {
                    group.addTask {
                        switch task % 4 {
                        case 0:
                            _ = try await stack.read { try await $0.fetch(FetchDescriptor<StackNote>(fetchLimit: 20)) }
                            return 0
                        case 1:
                            _ = try await stack.read { try await $0.object(StackNote.self, id: task - 1) }
                            return 0
                        case 2:
                            try await stack.write(durability: .committed) { context in
                                try context.insert(note(task))
                                var previous = try await context.object(StackNote.self, id: task - 3)
                                previous?.tag = "seen by \(task)"
                                if let previous { try await context.update(previous) }
                            }
                            return 1
                        default:
                            try await stack.write { try $0.insert(note(task)) }
                            return 1
                        }
                    }
                }
                return try await group.reduce(0, +)
            }
            try await stack.mainContext.saveToStore()  // waits for every queued commit
            #expect(writes == 500)
            let stored = try await stack.store.fetch(StackNote.self).map(\.value)
            let expected = Set((0..<1_000).filter { $0 % 4 >= 2 })
            #expect(stored.count == 500)
            #expect(Set(stored.map(\.id)) == expected)
            let visible = try await stack.read { try await $0.fetch(StackNote.self) }
            #expect(Set(visible.map(\.id)) == expected)
        }
    }

    @Test("The cache stays within its bound while 100,000 rows are read through it", arguments: StackKind.allCases)
    func cacheBound(kind: StackKind) async throws {
        let limit = CacheLimit(maxRows: 1_000, maxBytes: 150_000)
        try await StackTestServer.withStack(kind, cacheLimit: limit) { stack in
            try await stack.write(durability: .committed) { context in
                try context.bulkInsert((0..<100_000).map { note($0) })
            }
            var statistics = stack.cacheStatistics
            #expect(statistics.rows <= 1_000 && statistics.bytes <= 150_000)
            var read = 0
            for page in 0..<20 {
                let rows = try await stack.read {
                    try await $0.fetch(FetchDescriptor<StackNote>(
                        predicate: #Predicate { $0.rank >= page * 5_000 && $0.rank < (page + 1) * 5_000 }))
                }
                read += rows.count
                statistics = stack.cacheStatistics
                #expect(statistics.rows <= 1_000, "page \(page)")
                #expect(statistics.bytes <= 150_000, "page \(page)")
            }
            #expect(read == 100_000)
            #expect(statistics.rows > 0 && statistics.evictions > 0)
            // The most recently read rows are served from memory.
            let hits = stack.cacheStatistics.hits
            for id in 99_990..<100_000 { #expect(try await stack.mainContext.object(StackNote.self, id: id)?.id == id) }
            #expect(stack.cacheStatistics.hits == hits + 10)
        }
    }
}
