import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Restarts scripts/test's cluster while queued writes flow: run alone, after the other tests.
@Suite(
    "CommitQueueServerRestart", .serialized, .timeLimit(.minutes(3)),
    .enabled(if: TestServer.mayRestartServer, "needs scripts/test's own cluster"))
struct CommitQueueServerRestartTests {
    @Test("pg_ctl restart -m fast while 10,000 queued writes flow: afterwards every write is in the database exactly once")
    func restartUnderLoad() async throws {
        let total = 10_000
        try await StackTestServer.withStack(.postgres) { stack in
            let schema = try #require((stack.store as? PostgresStore)?.schema)
            let errors = Task {
                var collected: [DataStackError] = []
                for await error in stack.errors { collected.append(error) }
                return collected
            }
            // Writers: 20 tasks, each a run of queued (visible) writes, one insert and one counter bump each.
            try await stack.write(durability: .committed) { try $0.insert(StackCounter(id: "writes", name: "writes", note: "0")) }
            let writers = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for writer in 0..<20 {
                        group.addTask {
                            for index in 0..<(total / 20) {
                                let id = writer * (total / 20) + index + 1
                                try await stack.write { try $0.insert(note(id)) }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            // Restart once commits are flowing and many are still queued.
            await expectEventually(within: .seconds(60)) { stack.commitQueueStatistics.sets >= 500 }
            let committedBefore = stack.commitQueueStatistics.sets
            try await TestServer.pgCtl("restart -m fast -w -t 60")
            try await writers.value
            // A durable write after all of them returns once every earlier one finished (commits are ordered).
            try await stack.write(durability: .committed) { try $0.insert(note(total + 1)) }
            let statistics = stack.commitQueueStatistics
            #expect(committedBefore < total, "the restart happened while writes were still queued")
            #expect(statistics.retries >= 1, "the restart interrupted the commit queue")

            let rows = try await CommitQueueTestServer.query(
                "SELECT count(*)::int8, count(DISTINCT id)::int8, min(id)::int8, max(id)::int8 FROM \(qualified: [schema, "stack_notes"])")
            #expect(try rows[0].decode(Int.self, at: 0) == total + 1)
            #expect(try rows[0].decode(Int.self, at: 1) == total + 1)
            #expect(try rows[0].decode(Int.self, at: 2) == 1)
            #expect(try rows[0].decode(Int.self, at: 3) == total + 1)
            // Each set's commit id was recorded once: the groups' ranges do not overlap and, less their failed
            // ids, cover one id per set written.
            let sequence = { (column: String) in
                "(('x' || right(replace(\(column)::text, '-', ''), 16))::bit(64)::int8 & 4611686018427387903)"
            }
            let commits = try await CommitQueueTestServer.query(
                """
                SELECT sum(\(unsafeRaw: sequence("last_id")) - \(unsafeRaw: sequence("first_id")) + 1 - cardinality(failed))::int8
                FROM \(qualified: [schema, "skyros_commit_groups"])
                """)
            #expect(try commits[0].decode(Int.self, at: 0) == total + 2)
            let overlaps = try await CommitQueueTestServer.query(
                """
                SELECT count(*)::int8 FROM \(qualified: [schema, "skyros_commit_groups"]) a
                JOIN \(qualified: [schema, "skyros_commit_groups"]) b ON a.first_id < b.first_id AND b.first_id <= a.last_id
                """)
            #expect(try overlaps[0].decode(Int.self, at: 0) == 0)
            await stack.shutdown()
            let failures = await errors.value
            #expect(failures.isEmpty, "\(failures.prefix(3))")
        }
    }

    @Test("With PostgreSQL stopped, a durable write with a 2 s deadline throws deadlineExceeded; every write queued in the outage commits after it")
    func deadlineDuringOutage() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            let schema = try #require((stack.store as? PostgresStore)?.schema)
            try await stack.write(durability: .committed) { try $0.insert(note(1)) }
            try await TestServer.pgCtl("stop -m fast -w -t 60")
            let outcome: Result<Duration, any Error>
            do {
                // Queued writes are accepted while the database is down: the queue keeps them and retries.
                for id in 2...51 { try await stack.write { try $0.insert(note(id)) } }
                let clock = ContinuousClock()
                let started = clock.now
                let error = await #expect(throws: DataStackError.self) {
                    try await stack.write(durability: .committed, deadline: .now + .seconds(2)) { try $0.insert(note(52)) }
                }
                #expect(error?.code == .deadlineExceeded)
                #expect(error?.mayStillCommit == true)
                outcome = .success(started.duration(to: clock.now))
            } catch {
                outcome = .failure(error)
            }
            try await TestServer.startStoppedServer()
            let elapsed = try outcome.get()
            // The figure the README quotes; a hang is caught by the suite's time limit, not by a bound here.
            print("deadlineDuringOutage: the 2 s deadline ended the durable write after \(elapsed)")
            // A durable write after the outage returns once every earlier write finished (commits are ordered).
            try await stack.write(durability: .committed) { try $0.insert(note(53)) }
            let rows = try await CommitQueueTestServer.query(
                "SELECT count(*)::int8, count(DISTINCT id)::int8 FROM \(qualified: [schema, "stack_notes"])")
            #expect(try rows[0].decode(Int.self, at: 0) == 53)
            #expect(try rows[0].decode(Int.self, at: 1) == 53)
        }
    }
}
