import Foundation
import Notes
import Skyros
import SkyrosTesting
import Synchronization
import Testing

extension NotesAppTests {
    /// How the service starts, and what it answers when the store is not there: driven by the kit's starters
    /// (`.failing`, `.delayed(by:then:)`, `.live` in a test schema) and by `DataStackDouble`, a test double of
    /// `DataStackProtocol`.
    @Suite struct StartupTests {
        /// The production path in a test schema: the service's own starter (`.live`) starts the stack, which
        /// applies the app's migrations; in memory, `.inMemory` with the same configuration.
        @Test(arguments: TestRun.stores)
        func theServiceStartsItsOwnStack(on store: TestStore) async throws {
            let prefix = TestRun.prefix("ownstarter")
            func check(_ starter: StackStarter) async throws {
                let service = NotesService(starter: starter)
                #expect(await service.status == .notStarted)
                #expect(await service.start() == .ready)
                #expect(await service.createFolder(named: "Inbox").value != nil)
                await service.shutdown()
            }
            switch store {
            case .inMemory:
                try await check(.inMemory(TestRun.app))
            case .postgres(let database):
                try await database.withSchema(prefix: prefix) { schema in
                    try await check(.live(schema.stackConfiguration(TestRun.app)))
                }
                #expect(try await database.schemaNames(prefix: prefix + "_").isEmpty)
            }
        }

        /// The store is unreachable at start (`StackStarter.failing()` throws what `DataStack.start` throws
        /// then): the service is "store unavailable", answers `.unavailable`, and does not crash.
        @Test func anUnreachableStoreAtStartMakesTheServiceUnavailable() async {
            let service = NotesService(starter: .failing())
            let status = await service.start()
            guard case .storeUnavailable(let reason) = status else {
                Issue.record("status \(status)")
                return
            }
            #expect(reason.contains("unreachable"))
            #expect(await service.createFolder(named: "Inbox") == .unavailable(reason))
            #expect(await service.notes(in: UUID()) == .unavailable(reason))
        }

        /// A start that fails for good (a migration) is `failed`, not "try again".
        @Test func aFailedMigrationAtStartIsAFailure() async {
            let migrationFailed = DataStackError(code: .migrationFailed, message: "1_folders_and_notes.sql")
            let service = NotesService(starter: .failing(migrationFailed))
            guard case .failed(let reason) = await service.start() else {
                Issue.record("status \(await service.status)")
                return
            }
            #expect(reason.contains("1_folders_and_notes.sql"))
            #expect(await service.createFolder(named: "Inbox") == .unavailable(reason))
        }

        /// A double of the stack protocol: the stack starts, but the store does not answer its first read
        /// (unreachable) — the service is "store unavailable"; once the store answers, a second `start()` makes it
        /// ready, on the same stack. On each store: the double wraps the test's stack.
        @Test(arguments: TestRun.stores)
        func aStoreUnreachableAfterStartIsUnavailableUntilItAnswers(on store: TestStore) async throws {
            try await withTestStack(TestRun.app, on: store, prefix: TestRun.prefix("double")) { stack in
                let double = DataStackDouble(wrapping: stack)
                let refused = DataStackError(code: .storeUnreachable, message: "connection refused (simulated)")
                double.fail(.read, with: refused)
                let service = NotesService(stack: double)
                guard case .storeUnavailable(let reason) = await service.start() else {
                    Issue.record("status \(await service.status)")
                    return
                }
                #expect(reason.contains("connection refused (simulated)"))
                #expect(await service.createFolder(named: "Inbox") == .unavailable(reason))
                #expect(double.calls(.write) == 0, "an unavailable service sends nothing to the store")

                double.succeed(.read)
                #expect(await service.start() == .ready)
                #expect(await service.createFolder(named: "Inbox").value != nil)
                #expect(double.calls(.write) == 1)
            }
        }

        /// The store goes away while the service runs: a write answers `.unavailable`, and nothing is stored.
        @Test(arguments: TestRun.stores)
        func anOutageDuringAWriteAnswersUnavailable(on store: TestStore) async throws {
            try await withTestStack(TestRun.app, on: store, prefix: TestRun.prefix("outage")) { stack in
                let double = DataStackDouble(wrapping: stack)
                let service = NotesService(stack: double)
                #expect(await service.start() == .ready)
                double.fail(.write, with: DataStackError(code: .storeUnreachable, message: "simulated outage"))
                let answer = await service.createFolder(named: "Inbox")
                #expect(answer == .unavailable("the database is unreachable; try again shortly"))
                double.succeed(.write)
                let folders = try await stack.read { try await $0.count(FetchDescriptor<Folder>()) }
                #expect(folders == 0)
                #expect(await service.createFolder(named: "Inbox").value != nil)
            }
        }

        /// A slow start: while the starter has not returned, the service is `starting` and answers `.unavailable`;
        /// then it is ready. The test holds the start with a gate (no timing involved), and a second service
        /// goes through `StackStarter.delayed(by:then:)`.
        @Test func aSlowStartAnswersUnavailableUntilReady() async throws {
            let (gate, open) = AsyncStream.makeStream(of: Void.self)
            let held = StackStarter { logger in
                for await _ in gate { break }
                return try await StackStarter.inMemory(TestRun.app).start(logger: logger)
            }
            let service = NotesService(starter: held)
            async let started = service.start()
            #expect(await eventually(within: .seconds(10)) { await service.status == .starting })
            #expect(await service.createFolder(named: "Inbox") == .unavailable("the service is starting"))
            open.yield()
            #expect(await started == .ready)
            #expect(await service.createFolder(named: "Inbox").value != nil)
            await service.shutdown()

            let delayed = NotesService(starter: .delayed(by: .milliseconds(20), then: .inMemory(TestRun.app)))
            #expect(await delayed.start() == .ready)
            await delayed.shutdown()
        }

        /// A test whose body fails — an expectation that does not hold, then an error thrown out of the stack's
        /// body — still leaves no schema behind: the kit drops it on the way out. `withKnownIssue` expects
        /// that failure (it records one if the body did not fail).
        @Test(arguments: TestRun.stores)
        func aFailingTestStillDropsItsSchema(on store: TestStore) async throws {
            struct Broken: Error {}
            let prefix = TestRun.prefix("failing")
            let during = Mutex<[String]?>(nil)
            await withKnownIssue("this test fails on purpose") {
                try await withTestStack(TestRun.app, on: store, prefix: prefix) { stack in
                    let service = NotesService(stack: stack)
                    #expect(await service.start() == .ready)
                    #expect(await service.createFolder(named: "Inbox").value != nil)
                    if let database = TestRun.database, case .postgres = store {
                        let names = try await database.schemaNames(prefix: prefix + "_")
                        during.withLock { $0 = names }
                    }
                    #expect(await service.createFolder(named: "Inbox").value != nil, "a second Inbox: fails")
                    throw Broken()
                }
            }
            guard case .postgres(let database) = store else { return }
            #expect(during.withLock { $0?.count } == 1, "the test's schema existed while it ran")
            #expect(try await database.schemaNames(prefix: prefix + "_").isEmpty, "and is gone")
        }
    }
}
