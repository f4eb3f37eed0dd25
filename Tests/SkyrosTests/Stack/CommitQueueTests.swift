import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// The commit queue on PostgreSQL: group commit with a savepoint per set, merge policies between stacks,
/// backpressure and shutdown.
@Suite("Commit queue", .timeLimit(.minutes(3)))
struct CommitQueueTests {
    @Test("Ten sets in one group, the fifth violating a unique constraint: nine commit, the fifth is reverted and its caller gets the error")
    func groupWithFailingSet() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            try await StackTestServer.execute(stack, "ALTER TABLE stack_notes ADD CONSTRAINT stack_notes_title_unique UNIQUE (title)")
            try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 1, title: "taken", rank: 1)) }
            let groupsBefore = stack.commitQueueStatistics.groups

            stack.holdCommits()
            let outcomes = Locked<[Int: Result<Void, any Error>]>([:])
            var tasks: [Task<Void, Never>] = []
            for index in 1...10 {
                let value = index == 5 ? StackNote(id: 100 + index, title: "taken", rank: index) : note(100 + index)
                tasks.append(Task {
                    let outcome: Result<Void, any Error>
                    do {
                        try await stack.write(durability: .committed) { try $0.insert(value) }
                        outcome = .success(())
                    } catch {
                        outcome = .failure(error)
                    }
                    outcomes.withLock { $0[index] = outcome }
                })
                // Queue them one after another, in order.
                await expectEventually { stack.queuedCommits == index }
            }
            // Every write is visible before it commits, the failing one too.
            #expect(try await stack.read { try await $0.count(FetchDescriptor<StackNote>()) } == 11)
            stack.releaseCommits()
            for task in tasks { await task.value }

            let results = outcomes.withLock { $0 }
            for index in 1...10 where index != 5 {
                #expect(throws: Never.self) { try results[index]?.get() }
            }
            let failure = try #require(results[5].flatMap { result -> (any Error)? in
                if case .failure(let error) = result { return error } else { return nil }
            })
            let postgresError = try #require(failure as? PGError)
            #expect(postgresError.kind == .uniqueViolation)
            #expect(postgresError.constraint == "stack_notes_title_unique")
            #expect("\(postgresError)".contains("stack_notes_title_unique"))

            // One group transaction carried all ten sets.
            let statistics = stack.commitQueueStatistics
            #expect(statistics.groups == groupsBefore + 1)
            #expect(statistics.largestGroup == 10)

            // The fifth is reverted from the main context; the nine are there and in the database.
            let visible = try await stack.read { try await $0.fetch(StackNote.self) }.map(\.id)
            #expect(visible == [1, 101, 102, 103, 104, 106, 107, 108, 109, 110])
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 105) } == nil)
            let stored = try await stack.store.fetch(StackNote.self).map(\.value.id)
            #expect(stored == visible)
        }
    }

    @Test("A failing queued write is reported exactly once: to its completion and on this stack's error stream")
    func failureDeliveredOnce() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            try await stack.write(durability: .committed) { try $0.insert(note(1)) }
            let calls = Locked(0)
            let done = Locked<Result<Void, any Error>?>(nil)
            stack.write({ context in try context.insert(note(1)) }, completion: { result in
                calls.withLock { $0 += 1 }
                done.withLock { $0 = result.map { _ in () } }
            })
            var iterator = stack.errors.makeAsyncIterator()
            let streamed = try #require(await iterator.next())
            #expect(streamed.code == .commitFailed)
            #expect((streamed.underlying as? PGError)?.kind == .uniqueViolation)
            await expectEventually { done.withLock { $0 != nil } }
            #expect(calls.withLock { $0 } == 1)
            #expect(throws: PGError.self) { try done.withLock { $0 }?.get() }
        }
    }

    @Test("A group whose COMMIT happened but looked failed (ambiguous) is not applied again on retry")
    func ambiguousCommitIsNotRepeated() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            let schema = try #require((stack.store as? PostgresStore)?.schema)
            let hook = CommitThenFail()
            stack.setCommitHook(hook)
            stack.holdCommits()
            for id in 1...5 { try await stack.write { try $0.insert(note(id)) } }
            stack.releaseCommits()
            try await stack.write(durability: .committed) { try $0.insert(note(6)) }
            #expect(hook.calls.withLock { $0 } >= 1)
            #expect(stack.commitQueueStatistics.retries == 1)
            let rows = try await CommitQueueTestServer.query(
                "SELECT count(*)::int8, count(DISTINCT id)::int8 FROM \(qualified: [schema, "stack_notes"])")
            #expect(try rows[0].decode(Int.self, at: 0) == 6)
            #expect(try rows[0].decode(Int.self, at: 1) == 6)
            // The retried sets succeeded (nothing reverted): the main context still shows all six.
            #expect(try await stack.read { try await $0.count(FetchDescriptor<StackNote>()) } == 6)
        }
    }

    // MARK: Merge policies

    /// Stack B reads row 1; stack A changes its `title` and commits; then B writes `change` to what it read,
    /// under `policy`. Returns B's error (if any), the stored row and what B's main context reads afterwards.
    private func conflict(
        policy: MergePolicy, bChanges change: @escaping @Sendable (inout StackNote) -> Void
    ) async throws -> (error: (any Error)?, stored: StackNote, seenByB: StackNote?) {
        try await StackTestServer.withStack(.postgres) { a in
            let b = try await Self.secondStack(like: a)
            do {
                try await a.write(durability: .committed) { try $0.insert(StackNote(id: 1, title: "original", rank: 1)) }
                var error: (any Error)?
                do {
                    try await b.write(durability: .committed, mergePolicy: policy) { context in
                        // B reads the row; then A changes it and commits; then B writes what it read.
                        var row = try #require(try await context.object(StackNote.self, id: 1))
                        #expect(row.title == "original")
                        try await a.write(durability: .committed) { other in
                            var theirs = try #require(try await other.object(StackNote.self, id: 1))
                            theirs.title = "from A"
                            try await other.update(theirs)
                        }
                        change(&row)
                        try await context.update(row)
                    }
                } catch let thrown {
                    error = thrown
                }
                let stored = try #require(try await a.store.object(StackNote.self, id: 1)).value
                let seenByB = try await b.read { try await $0.object(StackNote.self, id: 1) }
                await b.shutdown()
                return (error, stored, seenByB)
            } catch {
                await b.shutdown()
                throw error
            }
        }
    }

    static func secondStack(like stack: DataStack) async throws -> DataStack {
        let store = try #require(stack.store as? PostgresStore)
        return try await DataStack.start(DataStackConfiguration(
            store: .postgres(try TestServer.configuration, schema: store.schema), entities: [StackNote.self]))
    }

    @Test(".error (default): the second writer gets a version conflict, the row keeps the first value")
    func errorPolicy() async throws {
        let outcome = try await self.conflict(policy: .error) { $0.title = "from B" }
        guard case StoreError.versionConflict(let entity, let id, _, _)? = outcome.error else {
            Issue.record("expected a version conflict, got \(String(describing: outcome.error))")
            return
        }
        #expect(entity == "StackNote" && id == "1")
        #expect(outcome.stored.title == "from A")
        #expect(outcome.seenByB?.title == "from A")   // B's failed write was reverted and the row re-read
    }

    @Test(".storeWins: the second write is dropped without error, the store's row stays and B reloads it")
    func storeWinsPolicy() async throws {
        let outcome = try await self.conflict(policy: .storeWins) { $0.title = "from B" }
        #expect(outcome.error == nil)
        #expect(outcome.stored.title == "from A")
        #expect(outcome.seenByB?.title == "from A")
    }

    @Test(".contextWins: the second write overwrites the columns it changed")
    func contextWinsPolicy() async throws {
        let outcome = try await self.conflict(policy: .contextWins) { $0.title = "from B" }
        #expect(outcome.error == nil)
        #expect(outcome.stored.title == "from B")
        #expect(outcome.seenByB?.title == "from B")
    }

    @Test(".mergeByProperty: disjoint columns merge")
    func mergeByPropertyDisjoint() async throws {
        let outcome = try await self.conflict(policy: .mergeByProperty) { $0.rank = 99 }
        #expect(outcome.error == nil)
        #expect(outcome.stored == StackNote(id: 1, title: "from A", rank: 99))
        #expect(outcome.seenByB?.rank == 99)
    }

    @Test(".mergeByProperty: the same column changed on both sides is a conflict")
    func mergeByPropertySameColumn() async throws {
        let outcome = try await self.conflict(policy: .mergeByProperty) { $0.title = "from B" }
        guard case StoreError.versionConflict? = outcome.error else {
            Issue.record("expected a version conflict, got \(String(describing: outcome.error))")
            return
        }
        #expect(outcome.stored.title == "from A")
    }

    @Test("Every policy on one stack, on both stores: a write that read a row another write changed meanwhile", arguments: StackKind.allCases)
    func policiesOnOneStack(kind: StackKind) async throws {
        // policy, B's change, expected error?, expected stored title and rank
        let cases: [(MergePolicy, @Sendable (inout StackNote) -> Void, Bool, String, Int)] = [
            (.error, { $0.title = "B" }, true, "A", 1),
            (.storeWins, { $0.title = "B" }, false, "A", 1),
            (.contextWins, { $0.title = "B" }, false, "B", 1),
            (.mergeByProperty, { $0.rank = 9 }, false, "A", 9),
            (.mergeByProperty, { $0.title = "B" }, true, "A", 1),
        ]
        for (number, (policy, change, fails, title, rank)) in cases.enumerated() {
            try await StackTestServer.withStack(kind) { stack in
                try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 1, title: "original", rank: 1)) }
                var thrown: (any Error)?
                do {
                    try await stack.write(durability: .committed, mergePolicy: policy) { context in
                        var row = try #require(try await context.object(StackNote.self, id: 1))
                        try await stack.write(durability: .committed) { other in
                            try await other.update(StackNote(id: 1, title: "A", rank: 1))
                        }
                        change(&row)
                        try await context.update(row)
                    }
                } catch {
                    thrown = error
                }
                if fails {
                    guard case StoreError.versionConflict? = thrown else {
                        Issue.record("case \(number) \(policy): expected a version conflict, got \(String(describing: thrown))")
                        return
                    }
                } else {
                    #expect(thrown == nil, "case \(number) \(policy)")
                }
                let stored = try #require(try await stack.store.object(StackNote.self, id: 1)).value
                #expect(stored.title == title && stored.rank == rank, "case \(number) \(policy): \(stored)")
                let seen = try await stack.read { try await $0.object(StackNote.self, id: 1) }
                #expect(seen == stored, "case \(number) \(policy)")
            }
        }
    }

    @Test(
        "Merging policies on both stores: an update that kept another writer's columns reaches observers and the cache as stored; one that kept none stays cached as written",
        arguments: StackKind.allCases)
    func mergedUpdateReachesObservers(kind: StackKind) async throws {
        for policy in [MergePolicy.mergeByProperty, .contextWins] {
            try await StackTestServer.withStack(kind, listening: false) { stack in
                try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 1, title: "original", rank: 1)) }
                let latest = Locked<StackNote?>(nil)
                let observing = Task {
                    for try await value in stack.observe(StackNote.self, id: 1) { latest.withLock { $0 = value } }
                }
                defer { observing.cancel() }
                await expectEventually { latest.withLock { $0 }?.title == "original" }

                // No other writer: the stored row is the value written, which stays cached.
                try await stack.editNote(1, durability: .committed, policy: policy) { $0.rank = 2 }
                let misses = stack.cacheStatistics.misses
                #expect(try await stack.read { try await $0.object(StackNote.self, id: 1) } == StackNote(id: 1, title: "original", rank: 2))
                #expect(stack.cacheStatistics.misses == misses, "\(policy): the row was evicted")

                // Another writer changes the title straight in the store (no local save, no announcement)…
                var other = ChangeSet()
                other.update(StackNote(id: 1, title: "other", rank: 2), changedColumns: ["title"])
                _ = try await stack.store.apply(other)
                // …then this stack writes the rank to the copy it cached: the stored row keeps the other title.
                try await stack.editNote(1, durability: .committed, policy: policy) { row in
                    #expect(row.title == "original")
                    row.rank = 3
                }
                let stored = StackNote(id: 1, title: "other", rank: 3)
                #expect(try await stack.store.object(StackNote.self, id: 1)?.value == stored)
                await expectEventually { latest.withLock { $0 } == stored }
                #expect(latest.withLock { $0 } == stored, "\(policy): the observer kept \(String(describing: latest.withLock { $0 }))")
                #expect(try await stack.read { try await $0.object(StackNote.self, id: 1) } == stored)
            }
        }
    }

    @Test(".storeWins on both stores: a write based on an earlier queued write of the same group is applied, not dropped", arguments: StackKind.allCases)
    func storeWinsOnAQueuedWriteOfTheSameGroup(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 1, title: "original", rank: 1)) }
            _ = try await stack.read { try await $0.object(StackNote.self, id: 1) }
            stack.holdCommits()
            try await stack.editNote(1) { $0.title = "first" }
            try await stack.editNote(1, policy: .storeWins) { $0.rank = 42 }   // reads the queued write's value
            #expect(stack.queuedCommits == 2)
            stack.releaseCommits()
            try await stack.newBackgroundContext().saveToStore()   // nothing to save: waits for the queue
            #expect(try await stack.store.object(StackNote.self, id: 1)?.value == StackNote(id: 1, title: "first", rank: 42))
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 1) } == StackNote(id: 1, title: "first", rank: 42))
        }
    }

    /// A change read from a queued write is based on the version that write produces — not on whatever version
    /// the main context holds when the change commits, and never on none.
    @Test("On both stores: a change read from a queued write conflicts when the row changed after that write, or when that write failed", arguments: StackKind.allCases)
    func aChangeReadFromAQueuedWriteIsGuarded(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind, listening: false) { stack in
            try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 1, title: "original", rank: 1)) }
            _ = try await stack.read { try await $0.object(StackNote.self, id: 1) }

            // 1. The queued write commits; another write changes the row; then the change read from the first
            //    is saved.
            stack.holdCommits()
            try await stack.editNote(1) { $0.title = "A1" }
            let reader = stack.newBackgroundContext()
            var read = try #require(try await reader.object(StackNote.self, id: 1))
            #expect(read.title == "A1")
            stack.releaseCommits()
            try await stack.newBackgroundContext().saveToStore()   // nothing to save: waits for the queue
            try await stack.editNote(1, durability: .committed) { $0.title = "B" }
            read.rank = 7
            try await reader.update(read)
            await #expect(throws: StoreError.self) { try await reader.saveToStore() }
            #expect(try await stack.store.object(StackNote.self, id: 1)?.value == StackNote(id: 1, title: "B", rank: 1))

            // 2. The queued write fails (the row changed behind the stack's back), so the value read from it never
            //    existed.
            _ = try await stack.read { try await $0.object(StackNote.self, id: 1) }   // cached again (the conflict evicted it)
            var behind = ChangeSet()
            behind.update(StackNote(id: 1, title: "behind", rank: 1), changedColumns: ["title"])
            _ = try await stack.store.apply(behind)
            stack.holdCommits()
            try await stack.editNote(1) { row in
                #expect(row.title == "B")   // the cached copy, older than the store's
                row.title = "stale"
            }
            let second = stack.newBackgroundContext()
            var fromFailing = try #require(try await second.object(StackNote.self, id: 1))
            #expect(fromFailing.title == "stale")
            stack.releaseCommits()
            try await stack.newBackgroundContext().saveToStore()   // nothing to save: waits for the queue
            fromFailing.rank = 9
            try await second.update(fromFailing)
            await #expect(throws: StoreError.self) { try await second.saveToStore() }
            #expect(try await stack.store.object(StackNote.self, id: 1)?.value == StackNote(id: 1, title: "behind", rank: 1))
        }
    }

    /// The version a queued write produced is kept apart from the cache: a change read from that write commits
    /// when nothing else wrote the row, though the row left the cache meanwhile (it conflicted, or under
    /// `.storeWins` was dropped without a word).
    @Test("On both stores: a change read from a queued write commits after the row left the cache, when nothing else wrote it", arguments: StackKind.allCases)
    func aChangeReadFromAQueuedWriteSurvivesEviction(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind, cacheLimit: CacheLimit(maxRows: 2)) { stack in
            try await stack.write(durability: .committed) { context in for id in 1...4 { try context.insert(note(id)) } }
            for policy in [MergePolicy.error, .storeWins] {
                stack.holdCommits()
                try await stack.editNote(1) { $0.title = "queued \(policy)" }
                try await stack.write(durability: .committed, mergePolicy: policy) { context in
                    var read = try #require(try await context.object(StackNote.self, id: 1))   // the queued write's value
                    stack.releaseCommits()
                    try await stack.newBackgroundContext().saveToStore()   // nothing to save: waits for the queue
                    for id in 2...4 { _ = try await stack.read { try await $0.object(StackNote.self, id: id) } }   // evicts row 1
                    read.tag = "\(policy)"
                    try await context.update(read)
                }
                #expect(try await stack.store.object(StackNote.self, id: 1)?.value.tag == "\(policy)", "\(policy)")
            }
        }
    }

    @Test("The stack's default policy applies when a write names none")
    func stackDefaultPolicy() async throws {
        try await StackTestServer.withStack(.postgres) { a in
            let store = try #require(a.store as? PostgresStore)
            var configuration = DataStackConfiguration(
                store: .postgres(try TestServer.configuration, schema: store.schema), entities: [StackNote.self])
            configuration.commitQueue.mergePolicy = .contextWins
            let b = try await DataStack.start(configuration)
            try await a.write(durability: .committed) { try $0.insert(StackNote(id: 1, title: "original", rank: 1)) }
            try await b.write(durability: .committed) { context in
                var row = try #require(try await context.object(StackNote.self, id: 1))
                try await a.write(durability: .committed) { try await $0.update(StackNote(id: 1, title: "from A", rank: 1)) }
                row.title = "from B"
                try await context.update(row)
            }
            #expect(try await a.store.object(StackNote.self, id: 1)?.value.title == "from B")
            await b.shutdown()
        }
    }
}

/// Commits the first group's transaction itself and then reports a lost connection: the client cannot tell
/// whether COMMIT happened (what a connection drop at COMMIT time looks like).
final class CommitThenFail: CommitTransactionHook {
    let calls = Locked(0)

    func willCommit(batch: [ChangeSetResult], on connection: PGConnection) async throws {
        let first = self.calls.withLock { count -> Bool in
            count += 1
            return count == 1
        }
        guard first else { return }
        _ = try await connection.execute(script: "COMMIT")
        throw PGError(kind: .connectionLost, message: "simulated: connection lost at COMMIT")
    }

    /// Needs the connection: groups take the savepoint path, which calls `willCommit`.
    func pipelinedStatement(announcing changes: [RowChange]) throws -> PGQuery? {
        throw PGError(kind: .invalidConfiguration, message: "this hook runs on the connection")
    }
}
