import Foundation
import Logging
import Skyros
import SkyrosPostgres
import SkyrosTestEntities
import SkyrosTestSupport
import Testing

/// A readiness handler as an app writes it: it starts its stack through the starter it was given, and answers
/// 503 when the store is unavailable at start.
func health(_ starter: StackStarter) async -> (status: Int, body: String) {
    do {
        let stack = try await starter.start()
        let open: Int
        do {
            open = try await stack.read { try await $0.count(FetchDescriptor<KitTask>(predicate: #Predicate { !$0.done })) }
        } catch {
            await stack.shutdown()
            throw error
        }
        await stack.shutdown()
        return (200, "ok, \(open) open")
    } catch let error as DataStackError where error.code == .storeUnreachable {
        return (503, "store unavailable")
    } catch {
        return (500, "\(error)")
    }
}

/// SkyrosTesting without a server: `eventually`, the double, the starters, the in-memory test stack, the log
/// recorder.
@Suite struct TestKitTests {
    let app = DataStackConfiguration(store: .inMemory, entities: [KitTask.self])

    @Test func eventuallyReturnsOnceTheConditionHolds() async {
        let calls = Locked(0)
        let held = await eventually(within: .seconds(10), every: .milliseconds(1)) {
            calls.withLock { $0 += 1; return $0 == 3 }
        }
        #expect(held)
        #expect(calls.withLock { $0 } == 3)
    }

    @Test func eventuallyGivesUpAtTheDeadline() async {
        let start = ContinuousClock.now
        let held = await eventually(within: .milliseconds(30), every: .milliseconds(5)) { false }
        #expect(!held)
        #expect(ContinuousClock.now - start >= .milliseconds(30))
    }

    @Test func eventuallyRethrowsTheConditionsError() async {
        struct Broken: Error {}
        await #expect(throws: Broken.self) { _ = try await eventually { throw Broken() } }
    }

    @Test func waitUntilThrowsATimeoutNamingTheCondition() async throws {
        let error = try #require(await #expect(throws: ConditionTimeout.self) {
            try await waitUntil("the queue is empty", within: .milliseconds(20)) { false }
        })
        #expect(error.condition == "the queue is empty")
        #expect(error.deadline == .milliseconds(20))
        try await waitUntil(within: .seconds(10)) { true }
    }

    @Test func recordingLogHandlerKeepsEveryRecord() {
        let (logger, handler) = RecordingLogHandler.logger()
        logger.debug("one", metadata: ["k": "v"])
        logger.warning("two")
        #expect(handler.entries.map(\.level) == [.debug, .warning])
        #expect(handler.entries.first?.metadata["k"] == "v")
    }

    @Test func theDoublePassesCallsThroughToTheWrappedStack() async throws {
        let stack = try await DataStackDouble.inMemory(self.app)
        try await stack.write { try $0.insert(KitTask(id: 1, title: "a", done: false)) }
        try await stack.write(durability: .committed) { try $0.insert(KitTask(id: 2, title: "b", done: true)) }
        try await stack.write(deadline: .now + .seconds(30)) { try $0.insert(KitTask(id: 3, title: "c", done: false)) }
        try await stack.write(mergePolicy: .mergeByProperty) { try $0.insert(KitTask(id: 4, title: "d", done: false)) }
        let (logger, _) = RecordingLogHandler.logger()
        try await stack.write(logger: logger) { try $0.insert(KitTask(id: 5, title: "e", done: false)) }
        #expect(try await stack.read { try await $0.count(FetchDescriptor<KitTask>()) } == 5)
        // A snapshot reads committed rows only: the visible writes' commits may still be queued.
        #expect(await eventually { (try? await stack.readSnapshot { try await $0.count(FetchDescriptor<KitTask>()) }) == 5 })
        #expect(try await stack.mainContext.object(KitTask.self, id: 2)?.done == true)
        #expect(stack.calls(.write) == 5)
        #expect(stack.calls(.read) == 1)
        #expect(stack.calls(.readSnapshot) >= 1)
        await stack.shutdown()
        #expect(stack.isShutDown)
    }

    @Test func aFailedWriteOfTheDoubleSavesNothing() async throws {
        let stack = try await DataStackDouble.inMemory(self.app)
        stack.fail(.write, with: DataStackError(code: .storeUnreachable, message: "simulated"))
        let error = await #expect(throws: DataStackError.self) {
            try await stack.write { try $0.insert(KitTask(id: 1, title: "a", done: false)) }
        }
        #expect(error?.code == .storeUnreachable)
        let completed = Locked<Result<Int, any Error>?>(nil)
        stack.write({ _ in 1 }, completion: { result in completed.withLock { $0 = result } })
        #expect(await eventually { completed.withLock { $0 != nil } })
        #expect(throws: DataStackError.self) { try completed.withLock { $0 }?.get() }
        #expect(try await stack.read { try await $0.count(FetchDescriptor<KitTask>()) } == 0)
        stack.succeed(.write)
        try await stack.write { try $0.insert(KitTask(id: 1, title: "a", done: false)) }
        #expect(try await stack.read { try await $0.count(FetchDescriptor<KitTask>()) } == 1)
        #expect(stack.calls(.write) == 3)
        await stack.shutdown()
    }

    @Test func aDelayedReadOfTheDoubleWaitsAndACancelledOneStops() async throws {
        let stack = try await DataStackDouble.inMemory(self.app)
        stack.delay(.read, by: .milliseconds(40))
        let start = ContinuousClock.now
        _ = try await stack.read { try await $0.count(FetchDescriptor<KitTask>()) }
        #expect(ContinuousClock.now - start >= .milliseconds(40))
        stack.delay(.read, by: .seconds(3600))
        let read = Task { try await stack.read { _ in 1 } }
        read.cancel()
        await #expect(throws: CancellationError.self) { try await read.value }
        await stack.shutdown()
    }

    @Test func theDoublesErrorsAreTheOnesTheTestSends() async throws {
        let stack = try await DataStackDouble.inMemory(self.app)
        stack.send(DataStackError(code: .storeUnreachable, message: "commit failed"))
        var errors = stack.errors.makeAsyncIterator()
        #expect(await errors.next()?.code == .storeUnreachable)
        await stack.shutdown()
        #expect(await errors.next() == nil)
    }

    @Test func theHealthHandlerAnswers503WhenTheStoreIsUnavailableAtStart() async {
        let answer = await health(.failing())
        #expect(answer.status == 503)
        let migration = await health(.failing(DataStackError(code: .migrationFailed, message: "1_tasks.sql")))
        #expect(migration.status == 500)
    }

    @Test func theHealthHandlerAnswers503WhenTheDoublesStoreFailsAfterStart() async throws {
        let double = try await DataStackDouble.inMemory(self.app)
        double.fail(.read, with: DataStackError(code: .storeUnreachable, message: "connection lost"))
        let answer = await health(StackStarter { _ in double })
        #expect(answer.status == 503)
        #expect(double.isShutDown)
    }

    @Test func theHealthHandlerAnswers200OnAStackThatStartsLate() async {
        let start = ContinuousClock.now
        let answer = await health(.delayed(by: .milliseconds(50), then: .inMemory(self.app)))
        #expect(answer.status == 200 && answer.body == "ok, 0 open")
        #expect(ContinuousClock.now - start >= .milliseconds(50))
    }

    @Test func aCancelledDelayedStartEndsWithoutWaiting() async {
        let probe = Task { await health(.delayed(by: .seconds(3600), then: .inMemory(self.app))) }
        probe.cancel()
        #expect(await probe.value.status == 500)
    }

    @Test func anInMemoryTestStackRunsTheAppsConfigurationWithoutItsMigrations() async throws {
        var app = self.app
        app.migrations = .directory(path: "/nonexistent")   // not read in memory
        let (logger, handler) = RecordingLogHandler.logger()
        let count = try await withTestStack(app, on: .inMemory, logger: logger) { stack in
            try await stack.write { try $0.insert(KitTask(id: 1, title: "a", done: false)) }
            return try await stack.read { try await $0.count(FetchDescriptor<KitTask>()) }
        }
        #expect(count == 1)
        #expect(!handler.entries.contains { $0.level >= .warning })
        struct Failed: Error {}
        await #expect(throws: Failed.self) { try await withTestStack(app, on: .inMemory) { _ in throw Failed() } }
    }
}
