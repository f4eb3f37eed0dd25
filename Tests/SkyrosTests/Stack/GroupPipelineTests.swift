import Foundation
@testable import Skyros
@testable import SkyrosObservation
@testable import SkyrosStack
@testable import SkyrosStore
@testable import SkyrosSync
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Group commits sent as one pipeline (one round trip), and their fall-back to the savepoint path.
@Suite("Group commit in one pipeline", .timeLimit(.minutes(3)))
struct GroupPipelineTests {
    @Test("Queued inserts, updates, deletes and upserts commit as one group in one pipeline, with one change-log entry")
    func mixedGroupInOnePipeline() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            let store = try #require(stack.store as? PostgresStore)
            for id in 1...3 { try await stack.write(durability: .committed) { try $0.insert(note(id)) } }
            try await stack.write(durability: .committed) { try $0.insert(StackCounter(id: "c", name: "counter", note: "v1")) }
            let logBefore = try await Self.changeLogEntries(store)
            let pathsBefore = store.groupCommitPaths.withLock { $0 }
            let groupsBefore = stack.commitQueueStatistics.groups

            stack.holdCommits()
            var writes = HeldWrites(stack: stack)
            try await writes.queue { try $0.insert(note(10)) }
            try await writes.queue { try $0.insert(note(11)) }
            try await writes.queue { context in
                var first = try #require(try await context.object(StackNote.self, id: 1))
                first.title = "renamed"
                try await context.update(first)
            }
            try await writes.queue { try await $0.delete(StackNote.self, id: 2) }
            try await writes.queue { try $0.upsert(StackNote(id: 3, title: "upserted", rank: 3)) }
            try await writes.queue { try $0.bulkInsert([note(12), note(13)]) }
            try await writes.queue { context in
                var counter = try #require(try await context.object(StackCounter.self, id: "c"))
                counter.note = "v2"
                try await context.update(counter)
            }
            stack.releaseCommits()
            try await writes.finish()

            #expect(stack.commitQueueStatistics.groups == groupsBefore + 1)
            let paths = store.groupCommitPaths.withLock { $0 }
            #expect(paths.onePipeline == pathsBefore.onePipeline + 1)
            #expect(paths.savepoints == pathsBefore.savepoints)
            let stored = try await store.fetch(StackNote.self).map(\.value)
            #expect(stored.map(\.id).sorted() == [1, 3, 10, 11, 12, 13])
            #expect(stored.first { $0.id == 1 }?.title == "renamed")
            #expect(stored.first { $0.id == 3 }?.title == "upserted")
            let counter = try #require(try await store.object(StackCounter.self, id: "c"))
            #expect(counter.value.note == "v2")
            #expect(counter.version == 2)
            // The versions the group produced are the store's: a later guarded update does not conflict.
            try await stack.write(durability: .committed) { context in
                var first = try #require(try await context.object(StackNote.self, id: 1))
                first.rank = 100
                try await context.update(first)
            }
            #expect(try await store.object(StackNote.self, id: 1)?.value.rank == 100)
            // The same for rows the group inserted: their version is the transaction's id, read once per group.
            try await stack.write(durability: .committed) { context in
                for id in [10, 12] {
                    var inserted = try #require(try await context.object(StackNote.self, id: id))
                    inserted.rank = 100
                    try await context.update(inserted)
                }
            }
            #expect(try await store.fetch(StackNote.self).filter { $0.value.rank == 100 }.count == 3)
            // One change-log entry announces every row of the group.
            let entries = try await Self.changeLogEntries(store)
            #expect(entries.count == logBefore.count + 1 + 2)
            let groupEntry = try #require(entries.dropFirst(logBefore.count).first)
            for id in ["10", "11", "1", "2", "3", "12", "13", "c"] {
                #expect(groupEntry.contains("\"\(id)\""), "\(id) missing from \(groupEntry)")
            }
        }
    }

    @Test("A stale guarded update in a pipelined group: the group runs again on the savepoint path, the others commit, the update conflicts")
    func staleUpdateFallsBack() async throws {
        try await StackTestServer.withStack(.postgres, listening: false) { stack in
            let store = try #require(stack.store as? PostgresStore)
            try await stack.write(durability: .committed) { try $0.insert(note(1)) }
            #expect(try await stack.mainContext.object(StackNote.self, id: 1) != nil)   // cached with its version
            try await StackTestServer.execute(stack, "UPDATE stack_notes SET rank = 99 WHERE id = 1")  // behind its back
            let pathsBefore = store.groupCommitPaths.withLock { $0 }

            stack.holdCommits()
            let first = Task { try await stack.write(durability: .committed) { try $0.insert(note(20)) } }
            await expectEventually { stack.queuedCommits == 1 }
            let stale = Task {
                try await stack.write(durability: .committed) { context in
                    var row = try #require(try await context.object(StackNote.self, id: 1))
                    row.title = "stale"
                    try await context.update(row)
                }
            }
            await expectEventually { stack.queuedCommits == 2 }
            let last = Task { try await stack.write(durability: .committed) { try $0.insert(note(21)) } }
            await expectEventually { stack.queuedCommits == 3 }
            stack.releaseCommits()

            _ = try await first.value
            _ = try await last.value
            let error = await thrownError { try await stale.value }
            guard case .versionConflict(let entity, let id, _, _)? = error as? StoreError else {
                Issue.record("expected a version conflict, got \(String(describing: error))")
                return
            }
            #expect(entity == "StackNote" && id == "1")
            let paths = store.groupCommitPaths.withLock { $0 }
            #expect(paths.savepoints == pathsBefore.savepoints + 1)
            let stored = try await store.fetch(StackNote.self).map(\.value)
            #expect(stored.map(\.id).sorted() == [1, 20, 21])
            #expect(stored.first { $0.id == 1 } == StackNote(id: 1, title: "note 1", rank: 99))
        }
    }

    @Test("Consecutive inserts into one table merge across sets into multi-row INSERTs; other writes keep their place")
    func insertsMergeInOrder() throws {
        func operation<T: Entity>(_ change: EntityChange<T>) throws -> GroupOperation {
            try #require(try change.groupOperation(schema: "s", copyThreshold: 500))
        }
        let sets: [[GroupOperation]] = [
            [try operation(EntityChange<StackNote>(payload: .insert(note(1))))],
            [try operation(EntityChange<StackNote>(payload: .bulkInsert([note(2), note(3)]))),
             try operation(EntityChange<StackNote>(payload: .delete(9, nil)))],
            [try operation(EntityChange<StackNote>(payload: .insert(note(4)))),
             try operation(EntityChange<StackCounter>(payload: .insert(StackCounter(id: "a", name: "a", note: "a"))))],
        ]
        let statements = PostgresStore.groupStatements(sets)
        #expect(statements.count == 4)
        #expect(statements[0].query.sql.hasPrefix("INSERT INTO \"s\".\"stack_notes\""))
        #expect(statements[0].query.binds.count == 3 * 4)
        // No version column, a few rows: they return their version (many rows: the group reads its transaction id).
        #expect(statements[0].query.sql.hasSuffix("RETURNING xmin::text::int8") && !statements[0].needsTransactionID)
        let many = PostgresStore.groupStatements(
            [try (1...20).map { try operation(EntityChange<StackNote>(payload: .insert(note($0)))) }])
        #expect(many.count == 1 && !many[0].query.sql.contains("RETURNING") && many[0].needsTransactionID)
        #expect(statements[1].query.sql.hasPrefix("DELETE FROM \"s\".\"stack_notes\""))
        #expect(statements[2].query.binds.count == 4)
        // A version column starts at 1: no RETURNING needed.
        #expect(statements[3].query.sql.hasSuffix(", 1)"))
        guard case .merged(let members, _) = statements[0].kind else {
            Issue.record("the first statement is not a merged insert")
            return
        }
        #expect(members.map(\.set) == [0, 1] && members.map(\.operation) == [0, 0])
        #expect(try EntityChange<StackNote>(payload: .bulkInsert(Array(repeating: note(1), count: 600)))
            .groupOperation(schema: nil, copyThreshold: 500) == nil)
    }

    @Test("Sets of plain inserts (made into their insert directly) and a set inserting two entities share one pipeline; versions are the store's")
    func insertSetsOfOneAndTwoEntities() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            let store = try #require(stack.store as? PostgresStore)
            let pathsBefore = store.groupCommitPaths.withLock { $0 }
            stack.holdCommits()
            var writes = HeldWrites(stack: stack)
            try await writes.queue { try $0.insert(note(1)) }
            try await writes.queue { context in
                try context.insert(note(2))
                try context.insert(StackCounter(id: "mixed", name: "in the same set", note: "m"))
                try context.insert(note(3))
            }
            try await writes.queue { try $0.bulkInsert([note(4), note(5)]) }
            try await writes.queue { try $0.insert(StackCounter(id: "alone", name: "its own set", note: "n")) }
            stack.releaseCommits()
            try await writes.finish()
            #expect(store.groupCommitPaths.withLock { $0 }.onePipeline == pathsBefore.onePipeline + 1)
            #expect(try await store.fetch(StackNote.self).map(\.value.id).sorted() == [1, 2, 3, 4, 5])
            let counters = try await store.fetch(StackCounter.self)
            #expect(counters.map(\.value.id).sorted() == ["alone", "mixed"] && counters.allSatisfy { $0.version == 1 })
            // Every cached version is the stored one: guarded updates of every row commit.
            try await stack.write(durability: .committed) { context in
                for id in 1...5 {
                    var row = try #require(try await context.object(StackNote.self, id: id))
                    row.rank = -1
                    try await context.update(row)
                }
                for id in ["alone", "mixed"] {
                    var counter = try #require(try await context.object(StackCounter.self, id: id))
                    counter.note = "updated"
                    try await context.update(counter)
                }
            }
            #expect(try await store.fetch(StackNote.self).allSatisfy { $0.value.rank == -1 })
            #expect(try await store.fetch(StackCounter.self).allSatisfy { $0.version == 2 && $0.value.note == "updated" })
        }
    }

    @Test("One set inserting two entity types mapped to the same table writes each row with its own type's columns", arguments: StackKind.allCases)
    func twoEntityTypesOfOneTableInOneSet(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { context in
                try context.insert(note(1))
                try context.insert(StackNoteHeadline(id: 2, rank: 20, title: "headline"))
                try context.insert(note(3))
            }
            let stored = try await stack.store.fetch(StackNote.self).map(\.value).sorted { $0.id < $1.id }
            #expect(stored == [note(1), StackNote(id: 2, title: "headline", rank: 20, tag: nil), note(3)])
            // Each type reads and writes the other's rows by column name; a column it does not map is kept.
            try await stack.write(durability: .committed) { context in
                var headline = try #require(try await context.object(StackNoteHeadline.self, id: 1))
                #expect(headline == StackNoteHeadline(id: 1, rank: 1, title: "note 1"))
                headline.title = "retitled"
                try await context.update(headline)
                var tagged = try #require(try await context.object(StackNote.self, id: 2))
                tagged.tag = "t"
                try await context.update(tagged)
            }
            let after = try await stack.store.fetch(StackNote.self).map(\.value).sorted { $0.id < $1.id }
            #expect(after[0] == StackNote(id: 1, title: "retitled", rank: 1, tag: nil))
            #expect(after[1] == StackNote(id: 2, title: "headline", rank: 20, tag: "t"))
            #expect(try await stack.store.object(StackNoteHeadline.self, id: 2)?.value == StackNoteHeadline(id: 2, rank: 20, title: "headline"))
        }
    }

    /// Two entity types of one table cannot be merged into one change of a row: the second change is refused
    /// with a clear error and nothing is recorded (it trapped, or dropped the row on commit).
    @Test("A context refuses to change a row as a second entity type of its table while it holds a change of it as the first", arguments: StackKind.allCases)
    func secondEntityTypeOfARowIsRefused(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { try $0.insert(note(1)) }
            func expectMismatch(_ body: () async throws -> Void) async {
                let error = await #expect(throws: DataStackError.self) { try await body() }
                #expect(error?.code == .entityTypeMismatch, "\(String(describing: error))")
            }
            try await stack.write(durability: .committed) { context in
                try context.insert(StackNoteHeadline(id: 5, rank: 5, title: "h"))
                await expectMismatch { try context.upsert(StackNote(id: 5, title: "n", rank: 5)) }
                var headline = try #require(try await context.object(StackNoteHeadline.self, id: 1))
                headline.title = "as headline"
                try await context.update(headline)
                await expectMismatch { try await context.update(StackNote(id: 1, title: "as note", rank: 1)) }
                await expectMismatch { try await context.delete(StackNote.self, id: 1) }
            }
            #expect(try await stack.store.object(StackNote.self, id: 5)?.value == StackNote(id: 5, title: "h", rank: 5))
            #expect(try await stack.store.object(StackNote.self, id: 1)?.value.title == "as headline")

            // A child's save into a parent holding the row as the other type.
            let parent = stack.newBackgroundContext()
            try parent.insert(StackNoteHeadline(id: 6, rank: 6, title: "parent"))
            let child = parent.newChildContext()
            try child.upsert(StackNote(id: 6, title: "child", rank: 6))
            await expectMismatch { try child.save() }
            #expect(child.hasChanges)   // kept: nothing was merged
            try await parent.saveToStore()
            #expect(try await stack.store.object(StackNote.self, id: 6)?.value == StackNote(id: 6, title: "parent", rank: 6))
        }
    }

    @Test("A large merged insert reads the transaction id once; its rows get it as their version")
    func largeMergedInsertVersions() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            let store = try #require(stack.store as? PostgresStore)
            let pathsBefore = store.groupCommitPaths.withLock { $0 }
            stack.holdCommits()
            var writes = HeldWrites(stack: stack)
            for id in 1...20 { try await writes.queue { try $0.insert(note(id)) } }
            stack.releaseCommits()
            try await writes.finish()
            #expect(store.groupCommitPaths.withLock { $0 }.onePipeline == pathsBefore.onePipeline + 1)
            let stored = try await store.fetch(StackNote.self)
            #expect(stored.count == 20 && Set(stored.map(\.version)).count == 1)
            // The cached versions are the stored ones: guarded updates of every row commit without a conflict.
            try await stack.write(durability: .committed) { context in
                for id in 1...20 {
                    var row = try #require(try await context.object(StackNote.self, id: id))
                    row.rank = -1
                    try await context.update(row)
                }
            }
            #expect(try await store.fetch(StackNote.self).allSatisfy { $0.value.rank == -1 })
        }
    }

    @Test("The commit log records a group as one range: its failed sets and other stacks' ids are not committed")
    func commitLogRecordsRanges() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            let store = try #require(stack.store as? PostgresStore)
            let mine = UUID.commitPrefix()
            let other = UUID.commitPrefix()
            let ids = (100...109).map { UUID(commitPrefix: mine, sequence: UInt64($0)) }
            // 104 failed inside the range, 109 after its last committed set.
            let committed = ids.filter { $0 != ids[4] && $0 != ids[9] }
            let theirs = (100...109).map { UUID(commitPrefix: other, sequence: UInt64($0)) }
            #expect(try store.recordCommitted([], attempted: ids) == nil)
            let records = [
                try #require(try store.recordCommitted(committed, attempted: ids)),
                try #require(try store.recordCommitted(theirs, attempted: theirs)),
            ]
            #expect(records[0].binds.count == 3 && records[1].binds.count == 2)
            try await store.pool.withTransaction { connection in
                for record in records { _ = try await connection.query(record) }
            }
            let later = UUID(commitPrefix: mine, sequence: 110)
            #expect(try await store.committedIDs(ids + [later], since: ids[0]) == Set(committed))
            #expect(try await store.committedIDs([theirs[3], theirs[9]], since: theirs[0]) == [theirs[3], theirs[9]])
            // The failed set retried alone and committed: its own one-id range.
            let retry = try #require(try store.recordCommitted([ids[4]], attempted: [ids[4]]))
            try await store.pool.withConnection { _ = try await $0.query(retry) }
            #expect(try await store.committedIDs([ids[4], ids[9]], since: ids[0]) == [ids[4]])
        }
    }

    /// A deferred constraint is checked when the transaction commits, after every statement succeeded: on the
    /// pipeline that is its sync. No savepoint can tell which set broke it (they were all released before the
    /// check), so the queue commits the group's sets again one by one, in order: only the set that breaks the
    /// constraint fails, with the constraint named, and a set that updates a row an earlier set of the group
    /// updated is guarded by the version that set wrote.
    @Test("A deferred constraint failing at the group's commit: the sets commit one by one, and only the one that breaks it fails")
    func deferredConstraintFailsAtCommit() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            let store = try #require(stack.store as? PostgresStore)
            try await Self.addDeferredTitleConstraint(stack)
            try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 20, title: "a", rank: 20)) }
            let logBefore = try await Self.changeLogEntries(store)
            let pathsBefore = store.groupCommitPaths.withLock { $0 }
            let groupsBefore = stack.commitQueueStatistics.groups
            stack.holdCommits()
            var writes = HeldWrites(stack: stack)
            // The second update's guard is the version the first one writes (not settled when it is built).
            for rank in [50, 99] {
                try await writes.queue { context in
                    var note = try #require(try await context.object(StackNote.self, id: 20))
                    note.rank = rank
                    try await context.update(note)
                }
            }
            try await writes.queue { try $0.insert(StackNote(id: 21, title: "a", rank: 21)) }
            try await writes.queue { try $0.insert(StackNote(id: 22, title: "b", rank: 22)) }
            stack.releaseCommits()
            try await writes.tasks[0].value
            try await writes.tasks[1].value
            let error = await thrownError { try await writes.tasks[2].value } as? PGError
            #expect(error?.kind == .uniqueViolation)
            #expect(error?.constraint == "stack_notes_title_once")
            try await writes.tasks[3].value

            // One group taken from the queue, on the savepoint path (a guard needs a version written in the same
            // group), which failed at its COMMIT; then each set alone, as one pipeline, the failing one included.
            #expect(stack.commitQueueStatistics.groups == groupsBefore + 1)
            let paths = store.groupCommitPaths.withLock { $0 }
            #expect(paths.savepoints == pathsBefore.savepoints + 1)
            #expect(paths.onePipeline == pathsBefore.onePipeline + 3)
            let stored = try await store.fetch(StackNote.self).map(\.value)
            #expect(stored.map(\.id).sorted() == [20, 22])
            #expect(stored.first { $0.id == 20 }?.rank == 99)
            // Each committed set announced itself in its own transaction.
            #expect(try await Self.changeLogEntries(store).count == logBefore.count + 3)
            // The main context reverted the failed set and holds the committed ones.
            let cached = try await stack.read { try await $0.fetch(FetchDescriptor<StackNote>()) }
            #expect(cached.map(\.id).sorted() == [20, 22])
            // The stack carries on.
            try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 23, title: "c", rank: 23)) }
            #expect(try await store.fetch(StackNote.self).map(\.value.id).sorted() == [20, 22, 23])
        }
    }

    /// The same failure on a group sent as one pipeline: it fails at the pipeline's sync, and goes straight to the
    /// sets one by one (the savepoint path would only fail again at its own `COMMIT`).
    @Test("A deferred constraint failing at a pipelined group's sync: no savepoint path, the sets commit one by one")
    func deferredConstraintFailsAtPipelineSync() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            let store = try #require(stack.store as? PostgresStore)
            try await Self.addDeferredTitleConstraint(stack)
            let pathsBefore = store.groupCommitPaths.withLock { $0 }
            stack.holdCommits()
            var writes = HeldWrites(stack: stack)
            for (id, title) in [(30, "a"), (31, "a"), (32, "b")] {
                try await writes.queue { try $0.insert(StackNote(id: id, title: title, rank: id)) }
            }
            stack.releaseCommits()
            try await writes.tasks[0].value
            let error = await thrownError { try await writes.tasks[1].value } as? PGError
            #expect(error?.constraint == "stack_notes_title_once")
            try await writes.tasks[2].value
            let paths = store.groupCommitPaths.withLock { $0 }
            #expect(paths.savepoints == pathsBefore.savepoints)
            #expect(paths.onePipeline == pathsBefore.onePipeline + 2)
            #expect(try await store.fetch(StackNote.self).map(\.value.id).sorted() == [30, 32])
        }
    }

    /// A group whose connection breaks after its transaction committed, when retrying stops at once
    /// (`maximumRetryDuration` zero, like a retry budget or a shutdown deadline running out): the commit log is
    /// asked before its sets are given up, so a committed write is reported committed, not failed and reverted;
    /// and when the log cannot be read either, the write fails as `commitOutcomeUnknown`, not as uncommitted.
    @Test("A commit whose reply is lost as retrying stops: the commit log decides; when it cannot, the outcome is reported unknown")
    func lostReplyWhenRetryingStops() async throws {
        try await StackTestServer.withQueueStack({ $0.commitQueue.maximumRetryDuration = .zero }) { stack in
            let store = try #require(stack.store as? PostgresStore)
            let lost = PGError(kind: .connectionLost, message: "server closed the connection unexpectedly")
            store.afterNextGroupCommitted.withLock { $0 = { throw lost } }
            try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 40, title: "committed", rank: 40)) }
            #expect(try await store.fetch(StackNote.self).map(\.value.id) == [40])

            // The log unreadable too (renamed away by the time it is asked).
            let log = store.quotedCommitLog
            store.afterNextGroupCommitted.withLock {
                $0 = {
                    try await store.pool.withConnection { _ = try await $0.execute(script: "ALTER TABLE \(log) RENAME TO skyros_commit_groups_away") }
                    throw lost
                }
            }
            let error = await thrownError {
                try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 41, title: "unknown", rank: 41)) }
            }
            #expect((error as? DataStackError)?.code == .commitOutcomeUnknown)
            #expect((error as? DataStackError)?.underlying is PGError)
            let away = store.schema.map { "\(quoteIdentifier($0)).skyros_commit_groups_away" } ?? "skyros_commit_groups_away"
            try await store.pool.withConnection { _ = try await $0.execute(script: "ALTER TABLE \(away) RENAME TO skyros_commit_groups") }
            // It did commit; the stack carries on.
            #expect(try await store.fetch(StackNote.self).map(\.value.id).sorted() == [40, 41])
            try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 42, title: "after", rank: 42)) }
            #expect(try await store.fetch(StackNote.self).map(\.value.id).sorted() == [40, 41, 42])
        }
    }

    /// A write that never reached the server (no connection could be leased before retrying stopped) fails
    /// with that error, not as an unknown outcome: no attempt could have committed.
    @Test("A commit that never reached the server fails with its error, not as an unknown outcome")
    func neverSentIsNotAnUnknownOutcome() async throws {
        try await StackTestServer.withQueueStack({
            $0.commitQueue.maximumRetryDuration = .zero
            $0.pool = .init(maximumConnections: 1, leaseTimeout: .milliseconds(200))
        }) { stack in
            let store = try #require(stack.store as? PostgresStore)
            let release = AsyncStream.makeStream(of: Void.self)
            let holding = Task {
                try await store.pool.withConnection { _ in for await _ in release.stream { break } }
            }
            await expectEventually { store.pool.statistics.inUse == 1 }
            let error = await thrownError {
                try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 90, title: "never sent", rank: 90)) }
            }
            #expect((error as? PGError)?.kind == .poolTimeout, "\(String(describing: error))")
            release.continuation.finish()
            try await holding.value
            #expect(try await store.fetch(StackNote.self).isEmpty)
        }
    }

    /// A delete by predicate whose reply is lost after it committed: the commit log says it committed, but not
    /// which rows it removed, so the cached rows of its table are dropped (one it removed would otherwise be
    /// served from the cache, deleted).
    @Test("A delete by predicate committed with its reply lost: its table's cached rows are read again")
    func deleteWhereCommittedUnseenDropsItsTablesCachedRows() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            let store = try #require(stack.store as? PostgresStore)
            try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 70, title: "keep", rank: 1)) }
            #expect(try await stack.mainContext.object(StackNote.self, id: 70)?.rank == 1)   // cached
            // The delete matches no row the stack knows of when it is saved, and is held in the queue.
            stack.holdCommits()
            let deleting = Task {
                try await stack.write(durability: .committed) { context in
                    let deleted = try await context.delete(where: #Predicate<StackNote> { $0.rank >= 100 })
                    #expect(deleted == 0)
                }
            }
            await expectEventually { stack.queuedCommits == 1 }
            // Changed behind the stack's back so that the delete matches it when it runs; the cache says rank 1.
            try await StackTestServer.execute(stack, "UPDATE stack_notes SET rank = 100 WHERE id = 70")
            store.afterNextGroupCommitted.withLock {
                $0 = { throw PGError(kind: .connectionLost, message: "server closed the connection unexpectedly") }
            }
            stack.releaseCommits()
            try await deleting.value
            #expect(try await store.fetch(StackNote.self).isEmpty)
            #expect(try await stack.mainContext.object(StackNote.self, id: 70) == nil)
        }
    }

    /// Makes `stack_notes.title` unique, checked only at commit (`stack_notes_title_once`).
    static func addDeferredTitleConstraint(_ stack: DataStack) async throws {
        try await StackTestServer.execute(
            stack, "ALTER TABLE stack_notes ADD CONSTRAINT stack_notes_title_once UNIQUE (title) DEFERRABLE INITIALLY DEFERRED")
    }

    /// The change log's entries (`changes` as text), oldest first.
    /// The log's entries, once every transaction committed before has reached it (at commit with triggers,
    /// once relayed with logical decoding).
    static func changeLogEntries(_ store: PostgresStore) async throws -> [String] {
        if let schema = store.schema { try await TestServer.settleCapture(schema: schema) }
        let table = ChangeLog(schema: store.schema).logTable
        return try await store.pool.withConnection { connection in
            try await connection.query("SELECT changes::text FROM \(unsafeRaw: table) ORDER BY position").map { try $0.decode(String.self, at: 0) }
        }
    }
}

/// Durable writes queued while the stack holds its commits, one at a time: each is queued before the next starts.
private struct HeldWrites {
    let stack: DataStack
    var tasks: [Task<Void, any Error>] = []

    init(stack: DataStack) { self.stack = stack }

    mutating func queue(_ body: @escaping @Sendable (DataContext) async throws -> Void) async throws {
        let stack = self.stack
        let expected = stack.queuedCommits + 1
        self.tasks.append(Task { try await stack.write(durability: .committed, body) })
        await expectEventually { stack.queuedCommits == expected }
    }

    /// Waits for every queued write (after the stack released its commits).
    func finish() async throws {
        for task in self.tasks { try await task.value }
    }
}

/// `stack_notes` through another entity type, its columns in another order and without `tag`.
private struct StackNoteHeadline: Entity, Equatable {
    var id: Int
    var rank: Int
    var title: String

    static let tableName = "stack_notes"
    static let columns: [EntityColumn<StackNoteHeadline>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.rank, "rank"), EntityColumn(\.title, "title"),
    ]
}
