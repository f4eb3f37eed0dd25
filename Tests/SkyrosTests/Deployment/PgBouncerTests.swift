import Foundation
import Skyros
import SkyrosMigrations
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Stacks whose pool goes through PgBouncer in transaction pooling mode (`scripts/pg-fixture pgbouncer`, in
/// front of the test server), the listener and migrations on a direct URL, as the README documents.
@Suite(
    "PgBouncer", .serialized, .timeLimit(.minutes(3)),
    .enabled(if: PostgresFixture.isAvailable, "starts its own PgBouncer: run through scripts/test"),
    .enabled(if: PostgresFixture.hasPgBouncer, "pgbouncer is not installed (scripts/test installs it as root with apt-get)"))
struct PgBouncerTests {
    @Test("two instances behind PgBouncer in transaction mode: group commits, conflicts, snapshots and observation work")
    func twoInstancesThroughTransactionPooling() async throws {
        try await PostgresFixture.with("pgbouncer", [TestServer.url]) { fixture in
            try await self.twoInstances(bouncer: fixture.configuration("BOUNCER_URL"))
        }
    }

    @Test("a listener behind PgBouncer in transaction mode fails the start with an error naming the direct connection")
    func listenerBehindTransactionPoolingIsDetected() async throws {
        try await PostgresFixture.with("pgbouncer", [TestServer.url]) { fixture in
            let schema = TestServer.uniqueSchemaName("bounced")
            do {
                var configuration = DataStackConfiguration(store: .postgres(try fixture.configuration("BOUNCER_URL"), schema: schema))
                configuration.pool.usePreparedStatements = false
                configuration.changeFeed.deliveryCheckTimeout = .seconds(2)
                let error = await thrownError { _ = try await DataStack.start(configuration) }
                let stackError = try #require(error as? DataStackError)
                #expect(stackError.code == .changeFeedUnavailable)
                #expect(stackError.message.contains("directConnection"))
                #expect(!stackError.description.contains(try fixture.value("PASSWORD")))
            } catch {
                await TestServer.dropSchema(schema)
                throw error
            }
            await TestServer.dropSchema(schema)
        }
    }

    @Test("migrations through PgBouncer in transaction mode are refused before the lock is taken; over the direct URL they apply")
    func migrationsThroughTransactionPoolingAreRefused() async throws {
        try await PostgresFixture.with("pgbouncer", [TestServer.url]) { fixture in
            let schema = TestServer.uniqueSchemaName("bounced")
            do {
                let bouncer = try fixture.configuration("BOUNCER_URL")
                // Make PgBouncer open several server connections: transactions held open at once each need their own.
                var clients: [PGConnection] = []
                var serverPIDs: Set<Int32> = []
                for _ in 0..<4 {
                    let client = try await PGConnection.connect(to: bouncer, usePreparedStatements: false)
                    try await client.execute(script: "BEGIN")
                    serverPIDs.insert(try await client.query("SELECT pg_backend_pid()")[0].decode(Int32.self, at: 0))
                    clients.append(client)
                }
                #expect(serverPIDs.count == 4)
                for client in clients {
                    try await client.execute(script: "COMMIT")
                    await client.close()
                }

                try await StackTestServer.withMigrations(["1_stack.sql": StackTestServer.migrationSQL]) { directory in
                    var configuration = DataStackConfiguration(
                        store: .postgres(bouncer, schema: schema), migrations: .directory(directory), entities: [StackNote.self])
                    configuration.pool.usePreparedStatements = false
                    let error = await thrownError { _ = try await DataStack.start(configuration) }
                    let stackError = try #require(error as? DataStackError)
                    #expect(stackError.code == .migrationFailed)
                    let migrationError = try #require(stackError.underlying as? MigrationError)
                    #expect(migrationError.kind == .sessionChanged)
                    #expect(migrationError.message.contains("direct URL"))

                    // Nothing was applied, and no lock was left behind: over the direct URL the same start succeeds.
                    let direct = try await TestServer.connect()
                    let tables = try await direct.query("SELECT count(*)::int8 FROM pg_tables WHERE schemaname = \(schema)")
                    #expect(try tables[0].decode(Int.self, at: 0) == 0)
                    await direct.close()
                    configuration.directConnection = try TestServer.configuration
                    configuration.migrator.lockWaitTimeout = .seconds(20)
                    let stack = try await DataStack.start(configuration)
                    try await stack.write(durability: .committed) { try $0.insert(note(1)) }
                    #expect(try await stack.read { try await $0.count(FetchDescriptor<StackNote>()) } == 1)
                    await stack.shutdown()
                }
            } catch {
                await TestServer.dropSchema(schema)
                throw error
            }
            await TestServer.dropSchema(schema)
        }
    }

    private func twoInstances(bouncer: PGConfiguration) async throws {
        let direct = try TestServer.configuration
        // PgBouncer 1.18 (Debian 12's) keeps no prepared statements across transactions.
        let behindBouncer = { (configuration: inout DataStackConfiguration) in
            configuration.pool.usePreparedStatements = false
            configuration.directConnection = direct
        }
        try await StackTestServer.withQueueStack(server: bouncer, behindBouncer) { a in
            let schema = try #require((a.store as? PostgresStore)?.schema)
            var configuration = DataStackConfiguration(store: .postgres(bouncer, schema: schema), entities: [StackNote.self, StackCounter.self])
            behindBouncer(&configuration)
            let b = try await DataStack.start(configuration)
            let errors = Task {
                var collected: [DataStackError] = []
                for await error in a.errors { collected.append(error) }
                return collected
            }

            // B observes a filtered, sorted, limited query while A writes through the pooler.
            let latest = Locked<[StackNote]>([])
            let observing = Task {
                let top = FetchDescriptor<StackNote>(predicate: #Predicate { $0.rank >= 1000 }, sortBy: [SortDescriptor(\.rank)], fetchLimit: 5)
                for try await result in b.observe(top) { latest.withLock { $0 = result.values } }
            }
            let total = 2_000
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<20 {
                    group.addTask {
                        for index in 0..<(total / 20) {
                            let id = task * (total / 20) + index + 1
                            try await a.write { try $0.insert(note(id, rank: id)) }
                        }
                    }
                }
                try await group.waitForAll()
            }
            try await a.write(durability: .committed) { try $0.insert(StackCounter(id: "c", name: "counter", note: "a")) }
            #expect(try await a.read { try await $0.count(FetchDescriptor<StackNote>()) } == total)
            // The writes went through PgBouncer (its admin console counts the transactions it served).
            let console = try await PGConnection.connect(to: bouncer.withDatabase("pgbouncer"))
            let stats = try await console.execute(script: "SHOW STATS")
            let served = try (stats.first { try $0.decode(String.self, at: 0) == "postgres" }?.decode(String.self, at: 1)).flatMap { Int($0) }
            #expect((served ?? 0) >= 10, "transactions served by PgBouncer: \(String(describing: served))")
            await console.close()
            await expectEventually(within: .seconds(30)) { latest.withLock { $0.map(\.id) } == [1000, 1001, 1002, 1003, 1004] }

            // B updates a row A has cached: A's listener (direct) evicts it, A reads the new value.
            #expect(try await a.read { try await $0.object(StackCounter.self, id: "c") }?.note == "a")
            try await b.write(durability: .committed) { context in
                guard var counter = try await context.object(StackCounter.self, id: "c") else { return }
                counter.note = "b"
                try await context.update(counter)
            }
            try await expectEventually(within: .seconds(30)) { try await a.read { try await $0.object(StackCounter.self, id: "c") }?.note == "b" }

            // Optimistic locking through the pooler: another writer overtakes A's read before A's update commits.
            let conflict = await thrownError {
                try await a.write(durability: .committed) { context in
                    var changed = try #require(try await context.object(StackCounter.self, id: "c"))
                    let outside = try await TestServer.connect()
                    try await outside.query("UPDATE \(qualified: [schema, "stack_counters"]) SET note = 'outside', row_version = row_version + 1 WHERE id = 'c'")
                    await outside.close()
                    changed.note = "a again"
                    try await context.update(changed)
                }
            }
            guard case StoreError.versionConflict(_, let id, _, _)? = conflict else {
                Issue.record("expected a version conflict, got \(String(describing: conflict))")
                return
            }
            #expect(id == "c")

            // A snapshot read (one REPEATABLE READ transaction) through the pooler.
            let (count, sum) = try await b.readSnapshot { reader in
                (try await reader.count(FetchDescriptor<StackNote>()), try await reader.fetch(FetchDescriptor<StackNote>()).reduce(0) { $0 + $1.rank })
            }
            #expect(count == total)
            #expect(sum == total * (total + 1) / 2)

            observing.cancel()
            await b.shutdown()
            await a.shutdown()
            let failures = await errors.value
            #expect(failures.count == 1, "only the provoked conflict: \(failures.prefix(3))")
        }
    }
}
