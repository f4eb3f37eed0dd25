import Foundation
import Skyros
import SkyrosTestFixtures
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Several real OS processes (`skyros-test-node`) against one database: change log, listener, catch-up,
/// observers.
@Suite(.timeLimit(.minutes(3)))
struct ManyProcessTests {
    @Test func aRowCachedHereAndUpdatedByAnotherProcessIsSeenUpdated() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let stack = try await ManyProcessHarness.stack(schema: schema)
            try await stack.write(durability: .committed) { try $0.insert(MPItem(id: 1, owner: 0, value: 0, title: "original")) }
            let cached = try await stack.mainContext.object(MPItem.self, id: 1)
            #expect(cached?.value == 0)

            let child = try ManyProcessHarness.spawn(["mp-update", "--schema", schema, "--id", "1", "--value", "42"])
            defer { child.removeOutput() }
            #expect(await child.exitStatus() == 0, "\(child.report)")
            // The default deadline: with logical decoding every schema's relay of the parallel suite decodes the
            // whole database's WAL (another test's million-row transaction included) on two cores.
            try await expectEventually("process B's update did not reach A's main context") {
                try await stack.mainContext.object(MPItem.self, id: 1)?.value == 42
            }
            #expect(stack.changeFeedStatistics.remoteEntries >= 1)
            await stack.shutdown()
        }
    }

    @Test func aListenerTerminatedWhileAnotherProcessCommitsCatchesUpFromTheLog() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let stack = try await ManyProcessHarness.stack(schema: schema)
            let ids: [Int64] = [1, 2, 3, 4, 5]
            try await stack.write(durability: .committed) { context in
                for id in ids { try context.insert(MPItem(id: id, owner: 0, value: 0, title: "row \(id)")) }
            }
            for id in ids { _ = try await stack.mainContext.object(MPItem.self, id: id) }    // cached
            let observed = stack.observe(MPItem.self, id: 3)
            let lastObserved = ObservedValues()
            let observer = Task { for try await value in observed { await lastObserved.append(value?.value) } }

            let rounds = 60
            let child = try ManyProcessHarness.spawn([
                "mp-stream-updates", "--schema", schema, "--ids", ids.map(String.init).joined(separator: ","),
                "--rounds", String(rounds),
            ])
            defer { child.removeOutput() }
            await expectEventually(within: .seconds(20)) { child.lines.contains("round 5") }
            let name = try #require(stack.changeFeedApplicationName)
            #expect(try await ManyProcessHarness.terminateListener(applicationName: name) >= 1)
            // Terminate again only once the listener has reconnected (else the second call could hit the
            // first, still exiting backend).
            await expectEventually(within: .seconds(20)) { stack.changeFeedStatistics.catchUps >= 1 }
            await expectEventually(within: .seconds(20)) { child.lines.contains("round 20") }
            #expect(try await ManyProcessHarness.terminateListener(applicationName: name) >= 1)
            #expect(await child.exitStatus() == 0, "\(child.report)")

            let missed: Comment = "A's main context missed updates made while its listener was down"
            try await expectEventually(within: .seconds(5), missed) {
                for id in ids where try await stack.mainContext.object(MPItem.self, id: id)?.value != rounds { return false }
                return true
            }
            await expectEventually(within: .seconds(5)) { await lastObserved.last == rounds }
            // The final values can arrive through a read triggered by a later hint before the listener's
            // `.reconnected` events are processed: wait for them too.
            await expectEventually(within: .seconds(10), "catch-ups: \(stack.changeFeedStatistics.catchUps)") {
                stack.changeFeedStatistics.catchUps >= 2
            }
            #expect(stack.changeFeedStatistics.flushes == 0)
            observer.cancel()
            await stack.shutdown()
        }
    }

    @Test func fourProcessesWriteAndUpdateEachOthersRowsAndAgreeWithPostgreSQL() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let nodes = 4
            let children = try ManyProcessHarness.spawnWriters(schema: schema, nodes: nodes, rows: 1000, seed: 1000)
            defer { children.forEach { $0.removeOutput() } }
            var statuses: [Int32] = []
            for child in children { statuses.append(await child.exitStatus()) }
            var refreshedRows = 0
            for (child, status) in zip(children, statuses) {
                #expect(status == 0, "\(child.report)")
                guard let verdict = child.lines.last(where: { $0.hasPrefix("verdict ") }) else {
                    Issue.record("no verdict: \(child.report)")
                    continue
                }
                #expect(verdict.contains("main=true observer=true replayMismatches=0"), "\(verdict)")
                // Each node learned of the others' commits through the change log.
                let remote = verdict.split(separator: " ").first { $0.hasPrefix("remoteEntries=") }
                #expect((remote.flatMap { Int($0.dropFirst("remoteEntries=".count)) } ?? 0) > 0, "\(verdict)")
                let refreshed = verdict.split(separator: " ").first { $0.hasPrefix("refreshedRows=") }
                refreshedRows += refreshed.flatMap { Int($0.dropFirst("refreshedRows=".count)) } ?? 0
            }
            // Rows a node cached and an even-numbered node (whose hints carry rows) updated were refreshed from
            // the hints; the verdicts above say every node's main context still agrees with PostgreSQL.
            #expect(refreshedRows > 0)
            let stack = try await ManyProcessHarness.stack(schema: schema)
            #expect(try await stack.store.count(FetchDescriptor<MPItem>()) == nodes * 1000)
            await stack.shutdown()
        }
    }
}

extension ManyProcessTests {
    @Test func diffsOfAFilteredSortedLimitedQueryReplayToTheQueryResultUnderARandomWorkload() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let stack = try await ManyProcessHarness.stack(schema: schema)
            let descriptor = FetchDescriptor<MPItem>(
                predicate: #Predicate { $0.value >= 300 && $0.value < 900 },
                sortBy: [SortDescriptor(\MPItem.value), SortDescriptor(\MPItem.id, order: .reverse)], fetchLimit: 40)
            let replay = ReplayLog()
            let observation = stack.observe(descriptor)
            let observer = Task {
                for try await result in observation { await replay.apply(result) }
            }
            let nodes = 3
            let children = try ManyProcessHarness.spawnWriters(schema: schema, nodes: nodes, rows: 600, seed: 7)
            defer { children.forEach { $0.removeOutput() } }
            for child in children { #expect(await child.exitStatus() == 0, "\(child.report)") }
            let expected = try await stack.store.fetch(descriptor).map(\.value)
            await expectEventually(within: .seconds(10), "the replayed diffs do not reproduce the query's result") {
                await replay.rows == expected
            }
            #expect(await replay.mismatches == 0)
            // Bursts coalesce (a slow consumer gets one result per pull, not one per commit), so how many results
            // the processes' workload produced depends on speed. To exercise diffs mid-workload deterministically,
            // another stack (its commits reach this one through the change feed, as another process's do) moves
            // window rows in, out and within the window and inserts rows at its head, one step at a time, each
            // awaited by the observer.
            let other = try await ManyProcessHarness.stack(schema: schema)
            var generator = SeededGenerator(seed: 77)
            let before = await replay.results
            let steps = 12
            for step in 0..<steps {
                let window = try await stack.store.fetch(descriptor).map(\.value)
                let row = window[Int.random(in: 0..<window.count, using: &generator)]
                let moved = (row.value + Int.random(in: 1..<1200, using: &generator)) % 1200   // never its old value
                try await other.write(durability: .committed) { context in
                    switch step % 3 {
                    case 0: try await context.update(MPItem(id: row.id, owner: row.owner, value: moved, title: "moved"))
                    case 1: try await context.delete(MPItem.self, id: row.id)
                    default: try context.insert(MPItem(id: 1_000_000 + Int64(step), owner: 9, value: 300, title: "new"))
                    }
                }
                let expected = try await stack.store.fetch(descriptor).map(\.value)
                let comment: Comment = "step \(step): the replayed diffs do not reproduce the query's result"
                await expectEventually(within: .seconds(10), comment) {
                    await replay.rows == expected
                }
            }
            #expect(await replay.mismatches == 0)
            let results = await replay.results
            #expect(results >= before + steps, "\(results - before) results for \(steps) awaited steps")
            await other.shutdown()
            observer.cancel()
            await stack.shutdown()
        }
    }
}

/// Applies each observed diff to the previous rows and counts results the replay did not reproduce.
actor ReplayLog {
    private(set) var rows: [MPItem] = []
    private(set) var mismatches = 0
    private(set) var results = 0

    func apply(_ result: ObservedResult<MPItem>) {
        self.rows = result.diff.applied(to: self.rows)
        if self.rows != result.values { self.mismatches += 1 }
        self.results += 1
    }
}

/// Values an observer saw, in order.
actor ObservedValues {
    private(set) var values: [Int?] = []
    func append(_ value: Int?) { self.values.append(value) }
    var last: Int? { self.values.last ?? nil }
}
