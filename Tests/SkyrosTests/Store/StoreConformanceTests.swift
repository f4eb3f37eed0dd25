import Foundation
@testable import Skyros
@testable import SkyrosObservation
@testable import SkyrosStack
@testable import SkyrosStore
@testable import SkyrosSync
import SkyrosPostgres
import SkyrosTestEntities
import SkyrosTestSupport
import Testing

/// One suite, both stores: the in-memory store must behave exactly like PostgreSQL.
@Suite("Store conformance")
struct StoreConformanceTests {
    @Test(arguments: StoreKind.allCases)
    func insertAndReadBackEveryPropertyKind(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind) { harness in
            let store = harness.store
            let users = (1...6).map { StoreUser.make($0, age: $0 * 10) }
            for user in users { try await store.insert(user) }
            for user in users {
                let read = try #require(try await store.object(StoreUser.self, id: user.id))
                #expect(read.value == user)
            }
            let all = try await store.fetch(StoreUser.self)
            #expect(all.map(\.value) == users.sorted { $0.name < $1.name })
            #expect(try await store.object(StoreUser.self, id: 999) == nil)
        }
    }

    /// A stack caches the value an unguarded or merged update wrote only when the store says the stored row is
    /// that value; otherwise another writer's columns were kept and the stack reads the row again.
    @Test(
        "An update that may keep other writers' columns tells whether the stored row is the value written, for every property kind",
        arguments: StoreKind.allCases)
    func mergingUpdateTellsWhetherTheRowIsAsWritten(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind) { harness in
            let store = harness.store
            // 6 has every optional property set; 7 has them nil.
            for id in [6, 7] {
                try await store.insert(StoreUser.make(id, age: 1))
                func update(_ value: StoreUser, _ resolution: ConflictResolution) async throws -> RowChange {
                    var changes = ChangeSet()
                    changes.update(value, changedColumns: ["name"], expectedVersion: nil, resolution: resolution)
                    return try #require(try await store.apply(changes).changes.first)
                }
                var written = StoreUser.make(id, name: "a", age: 1)
                #expect(try await update(written, .fail).isStoredAsWritten == true, "\(id): unguarded, nothing else changed")
                // Another writer changes the age; this one writes the name to the copy it read.
                var other = ChangeSet()
                other.update(StoreUser.make(id, name: "a", age: 99), changedColumns: ["age"])
                _ = try await store.apply(other)
                written.name = "b"
                let merged = try await update(written, .compareColumns(originals: ["name": try PGValue("a")]))
                #expect(merged.isStoredAsWritten == false, "\(id): merged by property, the age was kept")
                #expect(try await store.object(StoreUser.self, id: id)?.value == StoreUser.make(id, name: "b", age: 99))
                #expect(try await update(written, .fail).isStoredAsWritten == false, "\(id): unguarded, the age was kept")
                written = StoreUser.make(id, name: "c", age: 99)
                let clean = try await update(written, .compareColumns(originals: ["name": try PGValue("b")]))
                #expect(clean.isStoredAsWritten == true, "\(id): merged by property, nothing else changed")
                #expect(try await store.object(StoreUser.self, id: id)?.value == written)
            }
        }
    }

    @Test(arguments: StoreKind.allCases)
    func duplicatePrimaryKeyIsAUniqueViolationNamingTheConstraint(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind) { harness in
            try await harness.store.insert(StoreUser.make(1))
            let error = await thrownError { try await harness.store.insert(StoreUser.make(1, name: "other")) }
            let postgresError = try #require(error as? PGError)
            #expect(postgresError.kind == .uniqueViolation)
            #expect(postgresError.sqlState == .uniqueViolation)
            #expect(postgresError.constraint == "store_users_pkey")
            #expect(try await harness.store.object(StoreUser.self, id: 1)?.value.name == "user 1")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func versionsChangeOnEveryWriteAndStaleWritesConflict(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind) { harness in
            let store = harness.store
            var user = StoreUser.make(1)
            let v1 = try await store.insert(user)
            #expect(try await store.object(StoreUser.self, id: 1)?.version == v1)

            user.name = "renamed"
            let v2 = try #require(try await store.update(user, changedColumns: ["name"], expectedVersion: v1))
            #expect(v2 != v1)
            #expect(try await store.object(StoreUser.self, id: 1)?.version == v2)

            user.name = "stale"
            let conflict = await thrownError { try await store.update(user, changedColumns: ["name"], expectedVersion: v1) }
            #expect(conflict as? StoreError == .versionConflict(entity: "StoreUser", id: "1", expected: v1, actual: v2))
            #expect(try await store.object(StoreUser.self, id: 1)?.value.name == "renamed")

            let staleDelete = await thrownError { try await store.delete(StoreUser.self, id: 1, expectedVersion: v1) }
            #expect(staleDelete as? StoreError == .versionConflict(entity: "StoreUser", id: "1", expected: v1, actual: v2))

            #expect(try await store.delete(StoreUser.self, id: 1, expectedVersion: v2))
            let gone = await thrownError { try await store.update(user, changedColumns: ["name"], expectedVersion: v2) }
            #expect(gone as? StoreError == .versionConflict(entity: "StoreUser", id: "1", expected: v2, actual: nil))
            let missing = await thrownError { try await store.update(user, changedColumns: ["name"]) }
            #expect(missing as? StoreError == .notFound(entity: "StoreUser", id: "1"))
            #expect(try await store.delete(StoreUser.self, id: 1) == false)
        }
    }

    /// A guarded update whose conflict resolution is to skip (`.storeWins`) of a row deleted meanwhile writes
    /// nothing and succeeds, on both stores (the in-memory store reported a conflict).
    @Test(arguments: StoreKind.allCases)
    func skippedUpdateOfADeletedRowSucceeds(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind) { harness in
            let store = harness.store
            #expect(try await store.insert(StoreCounter(id: "gone", value: 1)) == 1)
            var delete = ChangeSet()
            _ = delete.delete(StoreCounter.self, id: "gone")
            _ = try await store.apply(delete)
            var update = ChangeSet()
            _ = update.update(StoreCounter(id: "gone", value: 2), changedColumns: ["value"], expectedVersion: 1, resolution: .skip)
            #expect(try await store.apply(update).changes.isEmpty)
            #expect(try await store.object(StoreCounter.self, id: "gone") == nil)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func versionColumnCountsWrites(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind) { harness in
            let store = harness.store
            #expect(try await store.insert(StoreCounter(id: "a", value: 1)) == 1)
            #expect(try await store.update(StoreCounter(id: "a", value: 2), changedColumns: ["value"], expectedVersion: 1) == 2)
            #expect(try await store.upsert(StoreCounter(id: "a", value: 3)) == 3)
            #expect(try await store.upsert(StoreCounter(id: "b", value: 1)) == 1)
            let read = try #require(try await store.object(StoreCounter.self, id: "a"))
            #expect(read == Versioned(value: StoreCounter(id: "a", value: 3), version: 3))
            let conflict = await thrownError {
                try await store.update(StoreCounter(id: "a", value: 9), changedColumns: ["value"], expectedVersion: 2)
            }
            #expect(conflict as? StoreError == .versionConflict(entity: "StoreCounter", id: "a", expected: 2, actual: 3))
        }
    }

    @Test(arguments: StoreKind.allCases)
    func updateWritesOnlyTheGivenColumnsAndNothingWhenNoneChanged(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind) { harness in
            let store = harness.store
            let original = StoreUser.make(2, age: 20)
            let version = try await store.insert(original)
            var changed = original
            changed.name = "new name"
            changed.age = 99
            changed.tags = ["x"]
            try await store.update(changed, changedKeyPaths: [\StoreUser.name], expectedVersion: version)
            var expected = original
            expected.name = "new name"
            let read = try #require(try await store.object(StoreUser.self, id: 2))
            #expect(read.value == expected)

            #expect(try await store.update(changed, changedColumns: [], expectedVersion: read.version) == nil)
            #expect(try await store.object(StoreUser.self, id: 2) == read)

            let unknown = await thrownError { try await store.update(changed, changedColumns: ["nope"]) }
            #expect(unknown as? StoreError == .unknownColumn(entity: "StoreUser", column: "nope"))
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aChangeSetIsAtomic(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind) { harness in
            let store = harness.store
            let v = try await store.insert(StoreCounter(id: "kept", value: 1))

            var duplicate = ChangeSet()
            duplicate.insert(StoreUser.make(1))
            duplicate.update(StoreCounter(id: "kept", value: 2), changedColumns: ["value"], expectedVersion: v)
            duplicate.insert(StoreUser.make(1))
            let error = await thrownError { _ = try await store.apply(duplicate) }
            #expect((error as? PGError)?.kind == .uniqueViolation)

            var conflicting = ChangeSet()
            conflicting.insert(StoreUser.make(2))
            conflicting.delete(StoreCounter.self, id: "kept", expectedVersion: v + 100)
            let conflict = await thrownError { _ = try await store.apply(conflicting) }
            #expect(conflict as? StoreError == .versionConflict(entity: "StoreCounter", id: "kept", expected: v + 100, actual: v))

            #expect(try await store.count(FetchDescriptor<StoreUser>()) == 0)
            #expect(try await store.object(StoreCounter.self, id: "kept") == Versioned(value: StoreCounter(id: "kept", value: 1), version: v))

            var good = ChangeSet()
            let insertIndex = good.insert(StoreUser.make(3))
            good.update(StoreCounter(id: "kept", value: 5), changedColumns: ["value"], expectedVersion: v)
            good.delete(StoreCounter.self, id: "absent")
            let result = try await store.apply(good)
            #expect(result.operations.count == 3)
            let inserted = try #require(result.operations[insertIndex].first)
            #expect(inserted.kind == .inserted && inserted.table == "store_users" && inserted.id.text == "3")
            #expect(result.operations[1].first?.kind == .updated && result.operations[1].first?.version == v + 1)
            #expect(result.operations[2].isEmpty)
            #expect(try await store.object(StoreUser.self, id: 3)?.version == inserted.version)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func upsertInsertsThenOverwrites(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind) { harness in
            let store = harness.store
            var changes = ChangeSet()
            changes.upsert(StoreUser.make(1))
            let first = try await store.apply(changes)
            #expect(first.changes.map(\.kind) == [.inserted])

            var replacement = StoreUser.make(1, name: "replaced", age: 77)
            replacement.pets = [StorePet(name: "Tom", legs: 4), StorePet(name: "Polly", legs: 2)]
            var again = ChangeSet()
            again.upsert(replacement)
            let second = try await store.apply(again)
            #expect(second.changes.map(\.kind) == [.updated])
            #expect(second.changes[0].version != first.changes[0].version)
            let read = try #require(try await store.object(StoreUser.self, id: 1))
            #expect(read.value == replacement)
            #expect(read.version == second.changes[0].version)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func bulkInsertSmallAndLargeBatches(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind, copyThreshold: 50) { harness in
            let store = harness.store
            let small = (1...10).map { StoreUser.make($0) }
            let smallVersions = try await store.bulkInsert(small)
            #expect(smallVersions.count == 10)
            let large = (100..<220).map { StoreUser.make($0) }            // ≥ copyThreshold: COPY on PostgreSQL
            let largeVersions = try await store.bulkInsert(large)
            #expect(largeVersions.count == 120)
            let counters = (0..<60).map { StoreCounter(id: "c\($0)", value: $0) }
            #expect(try await store.bulkInsert(counters) == Array(repeating: 1, count: 60))

            #expect(try await store.count(FetchDescriptor<StoreUser>()) == 130)
            for (user, version) in zip(small + large, smallVersions + largeVersions) {
                let read = try #require(try await store.object(StoreUser.self, id: user.id))
                #expect(read.value == user)
                #expect(read.version == version)
            }
            let duplicate = await thrownError { try await store.bulkInsert([StoreUser.make(500), StoreUser.make(500)]) }
            #expect((duplicate as? PGError)?.constraint == "store_users_pkey")
            #expect(try await store.object(StoreUser.self, id: 500) == nil)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func fetchCountAndDeleteWhereFollowTheDescriptor(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind) { harness in
            let store = harness.store
            try await store.bulkInsert((1...20).map { StoreUser.make($0, age: $0 % 4 == 0 ? nil : $0) })
            let descriptor = FetchDescriptor<StoreUser>(
                predicate: #Predicate { ($0.age ?? 0) >= 10 }, sortBy: [SortDescriptor(\.score, order: .reverse)],
                fetchLimit: 3, fetchOffset: 1)
            let page = try await store.fetch(descriptor)
            #expect(page.map(\.value.id) == [18, 17, 15])
            #expect(try await store.count(FetchDescriptor<StoreUser>(predicate: #Predicate { ($0.age ?? 0) >= 10 })) == 8)
            #expect(try await store.count(descriptor) == 3)

            let deleted = try await store.delete(where: #Predicate<StoreUser> { $0.age == nil })
            #expect(deleted.sorted() == [4, 8, 12, 16, 20])
            #expect(try await store.count(FetchDescriptor<StoreUser>()) == 15)
            #expect(try await store.delete(where: nil as Predicate<StoreUser>?).count == 15)
            #expect(try await store.fetch(StoreUser.self).isEmpty)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func findOrCreateCreatesOnceThenReturnsTheStoredRow(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind) { harness in
            let store = harness.store
            let first = try await store.findOrCreate(StoreUser.make(7, name: "first"))
            #expect(first.created)
            #expect(first.value.value == StoreUser.make(7, name: "first"))
            let second = try await store.findOrCreate(StoreUser.make(7, name: "second"))
            #expect(!second.created)
            #expect(second.value == first.value)
        }
    }

    /// A group commit through the commit queue's seam (``GroupCommitStore``): PostgreSQL commits the group in
    /// one transaction with a savepoint per set, the in-memory store set by set; either way only the failing set
    /// is rolled back.
    @Test(arguments: StoreKind.allCases)
    func groupCommitRollsBackOnlyTheFailingSet(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind) { harness in
            let store = try #require(harness.store as? any GroupCommitStore)
            try await (store as? PostgresStore)?.createCommitLogIfNeeded()
            var a = ChangeSet()
            a.insert(StoreUser.make(1))
            var b = ChangeSet()
            b.insert(StoreUser.make(2))
            b.insert(StoreUser.make(1))
            var c = ChangeSet()
            c.insert(StoreUser.make(3))
            let sets = [a, b, c]
            let prefix = UUID.commitPrefix()
            let plan = GroupPlan(sets: sets.enumerated().map { index, changes in
                PlannedSet(id: UUID(commitPrefix: prefix, sequence: UInt64(index + 1)), writes: .changes(changes))
            })
            let outcome = try await store.commitGroup(plan, hook: nil, prepared: nil)
            let results = outcome.results
            #expect(results.count == 3)
            #expect((try? results[0].get())?.changes.first?.id.text == "1")
            #expect(throws: PGError.self) { try results[1].get() }
            #expect((try? results[2].get())?.changes.first?.id.text == "3")
            #expect(try await store.fetch(StoreUser.self).map(\.value.id).sorted() == [1, 3])
        }
    }

    /// A plan's set may guard a write with the version an earlier set of its group writes: each store fills it
    /// in once that set ran, and a set whose source failed conflicts instead of writing unguarded.
    @Test(arguments: StoreKind.allCases)
    func groupPlanTakesVersionsFromEarlierSets(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind) { harness in
            let store = try #require(harness.store as? any GroupCommitStore)
            try await (store as? PostgresStore)?.createCommitLogIfNeeded()
            try await store.insert(StoreUser.make(9))
            let prefix = UUID.commitPrefix()
            func plan(first: ChangeSet, ids: ClosedRange<UInt64>) throws -> GroupPlan {
                var rename = ChangeSet()
                rename.update(StoreUser.make(1, name: "renamed"), changedColumns: ["name"], expectedVersion: unknownRowVersion)
                let source = GroupVersion(operation: 0, key: try RowKey(StoreUser.self, id: 1), set: 0)
                return GroupPlan(sets: [
                    PlannedSet(id: UUID(commitPrefix: prefix, sequence: ids.lowerBound), writes: .changes(first)),
                    PlannedSet(id: UUID(commitPrefix: prefix, sequence: ids.upperBound), writes: .changes(rename), versionsFromGroup: [source]),
                ])
            }
            var insert = ChangeSet()
            insert.insert(StoreUser.make(1))
            let committed = try plan(first: insert, ids: 1...2)
            #expect(committed.dependsOnItself)
            #expect((store as? PostgresStore)?.prepareGroupPipeline(committed, hook: nil) == nil, "its versions are known only once set 0 ran")
            let results = try await store.commitGroup(committed, hook: nil, prepared: nil).results
            #expect(results.count == 2)
            #expect((try? results[1].get())?.changes.first?.id.text == "1")
            #expect(try await store.object(StoreUser.self, id: 1)?.value.name == "renamed")

            // The source set fails (a duplicate key): the dependent set conflicts and writes nothing.
            var failing = ChangeSet()
            failing.insert(StoreUser.make(2))
            failing.insert(StoreUser.make(9))
            let conflicted = try await store.commitGroup(try plan(first: failing, ids: 3...4), hook: nil, prepared: nil).results
            #expect(throws: PGError.self) { try conflicted[0].get() }
            #expect(throws: StoreError.self) { try conflicted[1].get() }
            #expect(try await store.object(StoreUser.self, id: 2) == nil)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func destroyNeedsConsentDeletesEverythingAndBumpsTheGeneration(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind) { harness in
            let store = harness.store
            try await store.insert(StoreUser.make(1))
            let before = store.generation
            var stale = ChangeSet(expectedGeneration: before)
            stale.insert(StoreUser.make(2))

            try await store.destroy(confirm: .iUnderstandThisDeletesData)
            #expect(store.generation != before)
            try await harness.createTables()                  // "re-run migrations" (PostgreSQL)
            #expect(try await store.count(FetchDescriptor<StoreUser>()) == 0)
            let refused = await thrownError { _ = try await store.apply(stale) }
            #expect(refused as? StoreError == .storeDestroyed(generation: store.generation))
            #expect(try await store.count(FetchDescriptor<StoreUser>()) == 0)
        }
    }
}
