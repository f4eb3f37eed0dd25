import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Synchronization
import Testing

/// A one-shot signal between tasks of a test.
private actor Gate {
    private(set) var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func open() {
        self.isOpen = true
        for waiter in self.waiters { waiter.resume() }
        self.waiters = []
    }

    func wait() async {
        if self.isOpen { return }
        await withCheckedContinuation { self.waiters.append($0) }
    }
}

/// A counter shared by a test's tasks.
private final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    var value: Int { self.count.load(ordering: .relaxed) }
    func increment() -> Int { self.count.add(1, ordering: .relaxed).newValue }
}

/// Interactive transactions (`DataStack.transaction`) on the real server: row locks, savepoints, isolation and
/// retries, rollback, and what the main context, its observers and another stack see afterwards.
@Suite("Interactive transactions", .serialized)
struct TransactionTests {
    private static func seed(_ stack: DataStack, _ ids: ClosedRange<Int>) async throws {
        try await stack.write(durability: .committed) { context in
            for id in ids { try context.insert(note(id)) }
        }
    }

    private static func schema(_ stack: DataStack) throws -> String {
        try #require((stack.store as? PostgresStore)?.schema)
    }

    /// Backends waiting for a lock (`wait_event_type = 'Lock'`) in a statement on this stack's schema.
    private static func lockWaiters(_ stack: DataStack) async throws -> Int {
        let store = try #require(stack.store as? PostgresStore)
        let schema = quoteIdentifier(try #require(store.schema))
        return try await store.pool.withConnection { connection in
            try await connection.query(
                "SELECT count(*)::int8 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND strpos(query, \(schema)) > 0"
            )[0].decode(Int.self, at: 0)
        }
    }

    @Test func skipLockedSkipsNoWaitFailsAndWaitingWaits() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            try await Self.seed(stack, 1...3)
            let locked = Gate()
            let release = Gate()
            let holder = Task {
                try await stack.transaction { tx in
                    var one = try #require(try await tx.object(StackNote.self, id: 1, lock: .forUpdate))
                    one.title = "held"
                    try await tx.update(one)
                    await locked.open()
                    await release.wait()
                }
            }
            await locked.wait()

            // SKIP LOCKED leaves the held row out.
            let free = try await stack.transaction { tx in
                try await tx.fetch(FetchDescriptor<StackNote>(sortBy: [SortDescriptor(\.id)]), lock: .forUpdate(.skipLocked)).map(\.id)
            }
            #expect(free == [2, 3])

            // NOWAIT fails at once with 55P03, typed.
            let error = await thrownError {
                try await stack.transaction { tx in _ = try await tx.object(StackNote.self, id: 1, lock: .forUpdate(.noWait)) }
            }
            let pgError = try #require(error as? PGError)
            #expect(pgError.sqlState == .lockNotAvailable)

            // A plain FOR UPDATE waits for the holder, then reads the row as it committed it.
            let waiter = Task {
                try await stack.transaction { tx in try await tx.object(StackNote.self, id: 1, lock: .forUpdate)?.title }
            }
            try await expectEventually("the second transaction waits for the row lock") { try await Self.lockWaiters(stack) >= 1 }
            await release.open()
            try await holder.value
            #expect(try await waiter.value == "held")
        }
    }

    @Test func aSavepointRollsBackOnlyItsOwnPart() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            try await Self.seed(stack, 1...1)
            struct Abandon: Error {}
            let seen = try await stack.transaction { tx -> [Int] in
                try await tx.insert(note(10))
                await #expect(throws: Abandon.self) {
                    try await tx.savepoint { tx in
                        try await tx.insert(note(11))
                        throw Abandon()
                    }
                }
                // A failed statement aborts only the savepoint: the transaction goes on.
                let duplicate = await thrownError { try await tx.savepoint { tx in try await tx.insert(note(1)) } }
                #expect((duplicate as? PGError)?.sqlState == .uniqueViolation)
                try await tx.savepoint { tx in try await tx.insert(note(12)) }
                return try await tx.fetch(FetchDescriptor<StackNote>(sortBy: [SortDescriptor(\.id)])).map(\.id)
            }
            #expect(seen == [1, 10, 12])
            let after = try await stack.read { try await $0.fetch(FetchDescriptor<StackNote>(sortBy: [SortDescriptor(\.id)])).map(\.id) }
            #expect(after == [1, 10, 12])
        }
    }

    @Test func aThrowingBodyRollsBack() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            try await Self.seed(stack, 1...1)
            struct Refused: Error {}
            await #expect(throws: Refused.self) {
                try await stack.transaction { tx in
                    try await tx.insert(note(20))
                    try await tx.update(StackNote(id: 1, title: "changed", rank: 1, tag: nil))
                    #expect(try await tx.object(StackNote.self, id: 20) != nil)    // its own write, read back
                    throw Refused()
                }
            }
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 20) } == nil)
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 1) }?.title == "note 1")
            #expect(try await stack.fetch(Int.self, sql: "SELECT count(*) FROM \(qualified: [try Self.schema(stack), "stack_notes"])") == [1])
        }
    }

    @Test func cancellingTheTaskRollsBack() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            let running = Gate()
            let marker = UUID().uuidString
            let task = Task {
                try await stack.transaction { tx in
                    try await tx.insert(note(30))
                    await running.open()
                    try await tx.execute("SELECT pg_sleep(60), \(unsafeRaw: "'\(marker)'")")
                }
            }
            await running.wait()
            try await expectEventually("the statement runs") {
                let store = try #require(stack.store as? PostgresStore)
                return try await store.pool.withConnection { connection in
                    try await connection.query(
                        "SELECT count(*)::int8 FROM pg_stat_activity WHERE strpos(query, \(marker)) > 0 AND state = 'active' AND pid <> pg_backend_pid()"
                    )[0].decode(Int.self, at: 0)
                } >= 1
            }
            task.cancel()
            let error = await thrownError { try await task.value }
            #expect((error as? PGError)?.kind == .queryCancelled)
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 30) } == nil)
            // The connection went back to the pool outside any transaction: the next one commits.
            try await stack.transaction { tx in try await tx.insert(note(31)) }
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 31) } != nil)
        }
    }

    @Test func aSerializationFailureIsRetried() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            try await Self.seed(stack, 1...1)
            let attempts = Atomic<Int>(0)
            let secondRead = Gate()
            let firstCommitted = Gate()
            // Each increments rank; the second's first attempt read before the first committed, so its update
            // fails with 40001 and it runs again.
            func increment(_ tx: DataTransaction, wait: Bool) async throws {
                var row = try #require(try await tx.object(StackNote.self, id: 1))
                if wait {
                    await secondRead.open()
                    await firstCommitted.wait()
                }
                row.rank += 1
                try await tx.update(row)
            }
            let second = Task {
                try await stack.transaction(isolation: .serializable, maxAttempts: 3) { tx in
                    let attempt = attempts.add(1, ordering: .relaxed).newValue
                    try await increment(tx, wait: attempt == 1)
                }
            }
            await secondRead.wait()
            try await stack.transaction(isolation: .serializable) { tx in try await increment(tx, wait: false) }
            await firstCommitted.open()
            try await second.value
            #expect(attempts.load(ordering: .relaxed) == 2)
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 1) }?.rank == 3)

            // Without retries the same race throws 40001.
            let thirdRead = Gate()
            let released = Gate()
            let single = Task {
                try await stack.transaction(isolation: .serializable) { tx in
                    var row = try #require(try await tx.object(StackNote.self, id: 1))
                    await thirdRead.open()
                    await released.wait()
                    row.rank += 1
                    try await tx.update(row)
                }
            }
            await thirdRead.wait()
            try await stack.transaction(isolation: .serializable) { tx in try await increment(tx, wait: false) }
            await released.open()
            let error = await thrownError { try await single.value }
            #expect((error as? PGError)?.sqlState == .serializationFailure)
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 1) }?.rank == 4)
        }
    }

    /// Two transactions lock two rows in opposite orders: the server breaks the deadlock by failing one with
    /// 40P01, which runs again and commits; both increments are stored.
    @Test func aDeadlockIsRetried() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            try await Self.seed(stack, 1...2)
            let attempts = Counter()
            let (first, second) = (Gate(), Gate())
            // Each locks and updates its own row, waits until the other holds its own (first attempts only), then
            // locks the other's row.
            let one = Task { try await Self.crossing(stack, 1, 2, holding: first, waitFor: second, attempts: attempts) }
            let two = Task { try await Self.crossing(stack, 2, 1, holding: second, waitFor: first, attempts: attempts) }
            try await one.value
            try await two.value
            #expect(attempts.value == 3)
            let ranks = try await stack.read { try await $0.fetch(FetchDescriptor<StackNote>(sortBy: [SortDescriptor(\.id)])).map(\.rank) }
            #expect(ranks == [21, 22])
        }
    }

    private static func crossing(
        _ stack: DataStack, _ mine: Int, _ theirs: Int, holding: Gate, waitFor other: Gate, attempts: Counter
    ) async throws {
        try await stack.transaction(maxAttempts: 3) { tx in
            let attempt = attempts.increment()
            for (index, id) in [mine, theirs].enumerated() {
                var row = try #require(try await tx.object(StackNote.self, id: id, lock: .forUpdate))
                row.rank += 10
                try await tx.update(row)
                if index == 0 && attempt <= 2 {
                    await holding.open()
                    await other.wait()
                }
            }
        }
    }

    @Test func aTransactionSeesWritesQueuedBeforeIt() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            stack.holdCommits()
            try await stack.write { context in try context.insert(note(50)) }     // visible, queued
            #expect(stack.queuedCommits == 1)
            let task = Task { try await stack.transaction { tx in try await tx.object(StackNote.self, id: 50)?.title } }
            stack.releaseCommits()
            #expect(try await task.value == "note 50")
        }
    }

    @Test func observersAndAnotherStackSeeTheCommit() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            try await Self.seed(stack, 1...2)
            var other = DataStackConfiguration(
                store: .postgres(try TestServer.configuration, schema: try Self.schema(stack)), entities: [StackNote.self, StackCounter.self])
            other.pool.leaseTimeout = .seconds(60)
            let second = try await DataStack.start(other)
            defer { Task { await second.shutdown() } }
            // Both stacks cache row 1.
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 1) }?.title == "note 1")
            #expect(try await second.read { try await $0.object(StackNote.self, id: 1) }?.title == "note 1")
            // An observer that has delivered its first result before the transaction, then waits for the commit.
            let primed = Gate()
            let sawCommit = Gate()
            let observer = Task {
                var first = true
                for try await result in stack.observe(FetchDescriptor<StackNote>(sortBy: [SortDescriptor(\.id)])) {
                    let titles = result.values.map(\.title)
                    if first {
                        #expect(titles == ["note 1", "note 2"])
                        first = false
                        await primed.open()
                    } else if titles == ["paid", "note 3"] {
                        await sawCommit.open()
                        return
                    }
                }
            }
            defer { observer.cancel() }
            await primed.wait()

            try await stack.transaction { tx in
                var one = try #require(try await tx.object(StackNote.self, id: 1, lock: .forUpdate))
                one.title = "paid"
                try await tx.update(one)
                try await tx.insert(note(3))
                try await tx.delete(StackNote.self, id: 2)
            }
            // Read-your-writes in this stack as soon as it returned.
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 1) }?.title == "paid")
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 2) } == nil)
            // Its observer re-ran.
            await expectEventually("the observer yields the committed rows") { await sawCommit.isOpen }
            // The other stack hears of it through the change feed.
            try await expectEventually("the other stack's cache follows") {
                let one = try await second.read { try await $0.object(StackNote.self, id: 1) }
                let two = try await second.read { try await $0.object(StackNote.self, id: 2) }
                return one?.title == "paid" && two == nil
            }
        }
    }

    @Test func theInMemoryStoreRefusesClearly() async throws {
        try await StackTestServer.withStack(.inMemory) { stack in
            let transaction = await thrownError { try await stack.transaction { _ in } }
            #expect((transaction as? DataStackError)?.code == .unsupportedByStore)
            let raw = await thrownError { _ = try await stack.fetch(StackNote.self, sql: "SELECT 1") }
            #expect((raw as? DataStackError)?.code == .unsupportedByStore)
        }
    }
}
