import Foundation
@testable import Skyros
import SkyrosPostgres
import SkyrosTestFixtures
import SkyrosTestSupport
import Testing

@Suite("Two stacks starting while the slot is created", .serialized, .timeLimit(.minutes(2)))
struct SlotRaceIsolatedTests {
    /// Stack A creates the schema's slot, and its creation waits for a transaction that holds an id. Stack B
    /// starts meanwhile: the slot exists already, but it is not consistent, and a change committed now would be
    /// decoded by no one. B's start waits for the slot to be ready, so that the row another writer inserts the
    /// moment B's start returns reaches both stacks.
    ///
    /// Runs alone (`Isolated`): the open transaction holds up every slot creation of the cluster while it lasts.
    @Test(.enabled(if: TestServer.allowsLogicalDecoding, "needs logical decoding"))
    func aStackStartingWhileAnotherCreatesTheSlotWaitsForIt() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let slot = CaptureSources.slotName(schema: schema)
            let blocker = try await PGConnection.connect(to: try TestServer.configuration)
            _ = try await blocker.execute(script: "BEGIN; SELECT pg_current_xact_id();")
            let startingA = Task { try await ManyProcessHarness.stack(schema: schema) }
            var blocked = true
            do {
                // A's creation has begun: the slot exists and is not consistent.
                let creating = try await expectEventually(within: .seconds(15)) {
                    try await blocker.query("""
                        SELECT count(*)::int FROM pg_replication_slots WHERE slot_name = \(slot) AND confirmed_flush_lsn IS NULL
                        """)[0].decode(Int.self, at: 0) == 1
                }
                try #require(creating, "stack A's slot creation never showed up as in progress")
                let startedB = Locked<Bool>(false)
                let startingB = Task {
                    let stack = try await ManyProcessHarness.stack(schema: schema)
                    startedB.withLock { $0 = true }
                    // The moment start returns, another writer commits a row.
                    let consistent = try await TestServer.withConnection {
                        try await $0.query("""
                            SELECT coalesce(bool_and(confirmed_flush_lsn IS NOT NULL), false) FROM pg_replication_slots WHERE slot_name = \(slot)
                            """)[0]
                            .decode(Bool.self, at: 0)
                    }
                    #expect(consistent, "stack B's start returned before the slot was consistent")
                    try await Psql.run("INSERT INTO mp_items VALUES (1, 0, 1, 'outside')", schema: schema)
                    return stack
                }
                // B stays in start while the slot is being created (checked for a while, not proved forever:
                // the assertion that matters is the one B makes when it returns).
                let returnedEarly = await eventually(within: .seconds(2)) { startedB.withLock { $0 } }
                #expect(!returnedEarly, "stack B's start returned while the slot was still being created")
                _ = try await blocker.execute(script: "ROLLBACK")
                blocked = false
                await blocker.close()
                let a = try await startingA.value
                let b = try await startingB.value
                try await withCleanup {
                    try await Self.expectBothFeedsApplyPsqlsRow(a, b)
                    try await CaptureSources.expectInstalled(.logicalDecoding, schema: schema, context: "two stacks started during the slot's creation")
                } cleanup: {
                    await a.shutdown()
                    await b.shutdown()
                }
            } catch {
                if blocked {
                    _ = try? await blocker.execute(script: "ROLLBACK")
                    await blocker.close()
                }
                startingA.cancel()
                throw error
            }
        }
    }

    /// Waits for stacks A and B to apply psql's row 1 through their change feeds, then reads it through each. The
    /// feed's count is the evidence: a read finds the row in PostgreSQL whether or not capture delivered it, and
    /// with logical decoding the relay writes the log entry a moment after the commit, not with it.
    static func expectBothFeedsApplyPsqlsRow(_ a: DataStack, _ b: DataStack) async throws {
        for (name, stack) in [("A", a), ("B", b)] {
            await expectEventually(within: .seconds(30), "stack \(name)'s feed never applied the row psql inserted") {
                stack.changeFeedStatistics.otherRows >= 1
            }
            #expect(try await stack.read { try await $0.object(MPItem.self, id: 1) }?.title == "outside")
        }
    }

    /// As above, but the slot's creation never finishes in time: stack A cancels it and removes the publication
    /// it made, and falls back to triggers. Stack B, which was waiting for that slot, falls back too (it does
    /// not fail its start), and another writer's row reaches both.
    @Test(.enabled(if: TestServer.allowsLogicalDecoding, "needs logical decoding"))
    func aStackWaitingForASlotWhoseCreationTimesOutFallsBackToo() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let slot = CaptureSources.slotName(schema: schema)
            let blocker = try await PGConnection.connect(to: try TestServer.configuration)
            _ = try await blocker.execute(script: "BEGIN; SELECT pg_current_xact_id();")
            let startingA = Task { try await ManyProcessHarness.stack(schema: schema) }
            let startingB: Task<DataStack, any Error>
            do {
                let creating = try await expectEventually(within: .seconds(15)) {
                    try await blocker.query("""
                        SELECT count(*)::int FROM pg_replication_slots WHERE slot_name = \(slot) AND confirmed_flush_lsn IS NULL
                        """)[0].decode(Int.self, at: 0) == 1
                }
                try #require(creating, "stack A's slot creation never showed up as in progress")
                startingB = Task { try await ManyProcessHarness.stack(schema: schema) }
                // Held until A's creation timed out and A removed the slot.
                let cancelled = try await expectEventually(within: .seconds(40)) {
                    try await blocker.query("SELECT count(*)::int FROM pg_replication_slots WHERE slot_name = \(slot)")[0]
                        .decode(Int.self, at: 0) == 0
                }
                try #require(cancelled, "stack A's slot creation was never cancelled")
                _ = try await blocker.execute(script: "ROLLBACK")
                await blocker.close()
            } catch {
                _ = try? await blocker.execute(script: "ROLLBACK")
                await blocker.close()
                startingA.cancel()
                throw error
            }
            let a = try await startingA.value
            let b = try await startingB.value
            try await withCleanup {
                try await Psql.run("INSERT INTO mp_items VALUES (1, 0, 1, 'outside')", schema: schema)
                try await Self.expectBothFeedsApplyPsqlsRow(a, b)
                try await CaptureSources.expectInstalled(.triggers, schema: schema, context: "after the slot's creation timed out under two stacks")
            } cleanup: {
                await a.shutdown()
                await b.shutdown()
            }
        }
    }
}
