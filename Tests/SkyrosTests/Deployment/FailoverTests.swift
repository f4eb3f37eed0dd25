import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// A primary switch behind a libpq multi-host URL (`host=a,b target_session_attrs=read-write`), on a primary
/// with a streaming standby of its own (`scripts/pg-fixture pair`).
@Suite(
    "Failover", .timeLimit(.minutes(3)),
    .enabled(if: PostgresFixture.isAvailable, "starts its own primary and standby: run through scripts/test"))
struct FailoverTests {
    @Test("after a primary switch the pool and the listener reconnect to the new primary and queued commits resume")
    func primarySwitchUnderLoad() async throws {
        try await PostgresFixture.with("pair") { fixture in
            try await self.primarySwitch(fixture)
        }
    }

    /// The standby stops receiving WAL, the primary commits more, then the standby is promoted: those commits
    /// are lost, and the new primary hands out transaction ids below the horizon other stacks had read up to.
    @Test("after a failover that lost commits, every stack drops what it cached from them and hears new commits")
    func failoverThatLosesCommits() async throws {
        try await PostgresFixture.with("pair") { fixture in
            let failoverURL = try fixture.configuration("FAILOVER_URL")
            try await StackTestServer.withQueueStack(server: failoverURL, { _ in }) { writer in
                let schema = try #require((writer.store as? PostgresStore)?.schema)
                let reader = try await DataStack.start(DataStackConfiguration(
                    store: .postgres(failoverURL, schema: schema), entities: [StackNote.self, StackCounter.self]))
                try await withCleanup {
                    try await writer.write(durability: .committed) { try $0.insert(StackCounter(id: "phase", name: "phase", note: "kept")) }
                    let observed = Locked<[String]>([])
                    let observing = Task {
                        for try await counter in reader.observe(StackCounter.self, id: "phase") {
                            observed.withLock { $0.append(counter?.note ?? "(deleted)") }
                        }
                    }
                    defer { observing.cancel() }
                    await expectEventually { observed.withLock { $0 } == ["kept"] }

                    try await fixture.run("detach")
                    // Commits the standby never receives: an update the reader caches, and enough transactions
                    // that the ids the new primary hands out next are all below the reader's horizon.
                    try await writer.edit(StackCounter.self, id: "phase", durability: .committed) { $0.note = "lost" }
                    for id in 1...100 { try await writer.write(durability: .committed) { try $0.insert(note(id)) } }
                    await expectEventually(within: .seconds(30)) { observed.withLock { $0.last } == "lost" }
                    #expect(try await reader.mainContext.object(StackCounter.self, id: "phase")?.note == "lost")
                    // Both stacks' horizons pass those ids (a read follows the last hint of a run).
                    let readsBefore = (reader.changeFeedStatistics.reads, writer.changeFeedStatistics.reads)
                    await expectEventually(within: .seconds(30)) {
                        reader.changeFeedStatistics.reads > readsBefore.0 && writer.changeFeedStatistics.reads > readsBefore.1
                    }

                    try await fixture.run("promote")
                    // Both stacks notice the lost commits when their listeners reconnect, and drop their caches.
                    await expectEventually(within: .seconds(60)) {
                        reader.changeFeedStatistics.flushes >= 1 && writer.changeFeedStatistics.flushes >= 1
                    }
                    await expectEventually(within: .seconds(30)) { observed.withLock { $0.last } == "kept" }
                    #expect(try await reader.mainContext.object(StackCounter.self, id: "phase")?.note == "kept")

                    // A commit on the new primary (a transaction id below the old horizon) reaches the reader.
                    try await writer.edit(StackCounter.self, id: "phase", durability: .committed) { $0.note = "after" }
                    await expectEventually(within: .seconds(30)) { observed.withLock { $0.last } == "after" }
                    #expect(try await reader.mainContext.object(StackCounter.self, id: "phase")?.note == "after")
                } cleanup: {
                    await reader.shutdown()
                }
            }
        }
    }

    private func primarySwitch(_ fixture: PostgresFixture) async throws {
        let failoverURL = try fixture.configuration("FAILOVER_URL")
        let standby = try fixture.configuration("STANDBY_URL")
        let total = 3_000
        try await StackTestServer.withQueueStack(server: failoverURL, { _ in }) { writer in
            let schema = try #require((writer.store as? PostgresStore)?.schema)
            // A second stack (another service instance) observing a row the first one updates.
            let observer = try await DataStack.start(DataStackConfiguration(
                store: .postgres(failoverURL, schema: schema), entities: [StackNote.self, StackCounter.self]))
            let errors = Task {
                var collected: [DataStackError] = []
                for await error in writer.errors { collected.append(error) }
                return collected
            }
            try await writer.write(durability: .committed) { try $0.insert(StackCounter(id: "phase", name: "phase", note: "before")) }
            let primaryPort = try #require(try fixture.configuration("PRIMARY_URL").port)
            try await StackTestServer.execute(
                writer,
                """
                CREATE FUNCTION hold_on_old_primary() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF NEW.id = 'held' AND inet_server_port() = \(primaryPort) THEN PERFORM pg_sleep(60); END IF;
                    RETURN NEW;
                END $$;
                CREATE TRIGGER hold BEFORE INSERT ON stack_counters FOR EACH ROW EXECUTE FUNCTION hold_on_old_primary();
                """)
            let observed = Locked<[String]>([])
            let observing = Task {
                for try await counter in observer.observe(StackCounter.self, id: "phase") {
                    if let counter { observed.withLock { $0.append(counter.note) } }
                }
            }
            await expectEventually { observed.withLock { $0 } == ["before"] }

            // Queued writes from 10 tasks; the primary goes away while many are still queued.
            let writers = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for task in 0..<10 {
                        group.addTask {
                            for index in 0..<(total / 10) {
                                try await writer.write { try $0.insert(note(task * (total / 10) + index + 1)) }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            await expectEventually(within: .seconds(60)) { writer.commitQueueStatistics.sets >= 300 }
            // A group in flight when the primary stops: the old primary holds the insert of counter `held` (the
            // trigger sleeps only there), so the switch always meets a commit under way. Without it the switch
            // may land between two groups, and the next lease simply connects to the new primary.
            try await writer.write { try $0.insert(StackCounter(id: "held", name: "held", note: "held")) }
            let primary = try await PGConnection.connect(to: fixture.configuration("PRIMARY_URL"))
            await expectEventually(within: .seconds(60)) {
                let sleeping = try? await primary.query("SELECT count(*)::int8 FROM pg_stat_activity WHERE wait_event = 'PgSleep'")
                return (try? sleeping?[0].decode(Int.self, at: 0)) == 1
            }
            await primary.close()
            let committedBefore = writer.commitQueueStatistics.sets
            try await fixture.run("promote")
            try await writers.value
            // Ordered commits: once this durable write returns, every queued write before it committed.
            try await writer.write(durability: .committed) { context in
                guard var phase = try await context.object(StackCounter.self, id: "phase") else { return }
                phase.note = "after"
                try await context.update(phase)
            }
            #expect(committedBefore < total, "the primary switched while writes were still queued")
            #expect(writer.commitQueueStatistics.retries >= 1, "the switch interrupted the commit queue")

            // The observer's listener reconnected to the new primary and heard the update made there.
            await expectEventually(within: .seconds(30)) { observed.withLock { $0 } == ["before", "after"] }
            #expect(try await observer.read { try await $0.object(StackCounter.self, id: "phase") }?.note == "after")
            #expect(observer.changeFeedStatistics.catchUps >= 1, "the listener reconnected and caught up from the log")

            // Everything is on the new primary (the old standby), each write once.
            let newPrimary = try await PGConnection.connect(to: standby)
            let state = try await newPrimary.query("SELECT pg_is_in_recovery()")
            #expect(try state[0].decode(Bool.self, at: 0) == false)
            let rows = try await newPrimary.query(
                "SELECT count(*)::int8, count(DISTINCT id)::int8, min(id)::int8, max(id)::int8 FROM \(qualified: [schema, "stack_notes"])")
            #expect(try rows[0].decode(Int.self, at: 0) == total)
            #expect(try rows[0].decode(Int.self, at: 1) == total)
            #expect(try rows[0].decode(Int.self, at: 2) == 1)
            #expect(try rows[0].decode(Int.self, at: 3) == total)
            // The writer's pool now talks to the new primary.
            let standbyPort = try #require(standby.port)
            let port = try await (writer.store as? PostgresStore)?.pool.withConnection {
                try await $0.query("SELECT inet_server_port()")[0].decode(Int.self, at: 0)
            }
            #expect(port == standbyPort)
            await newPrimary.close()

            observing.cancel()
            await observer.shutdown()
            await writer.shutdown()
            let failures = await errors.value
            #expect(failures.isEmpty, "\(failures.prefix(3))")
        }
    }
}
