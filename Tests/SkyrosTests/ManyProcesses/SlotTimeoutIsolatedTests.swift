import Foundation
@testable import Skyros
import SkyrosPostgres
import SkyrosTestFixtures
import SkyrosTestSupport
import Testing

@Suite("Slot creation timeout", .timeLimit(.minutes(2)))
struct SlotTimeoutIsolatedTests {
    /// A fresh schema whose replication slot cannot be created in time (a transaction holding an id stays open
    /// through the stack's start, and creating a logical slot waits for it) falls back to the trigger source, and
    /// another writer's changes still reach a sectioned observer. The first parallel pass of a CI run starts many
    /// stacks at once, where slot creation can take that long.
    ///
    /// Runs alone (`Isolated`): the open transaction holds up every slot creation of the cluster for 20 s.
    @Test(.enabled(if: TestServer.allowsLogicalDecoding, "needs logical decoding"))
    func aStackWhoseSlotIsNotCreatedInTimeStillFollowsAnotherWriter() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let blocker = try await PGConnection.connect(to: try TestServer.configuration)
            let stack: DataStack
            do {
                _ = try await blocker.execute(script: "BEGIN; SELECT pg_current_xact_id();")
                stack = try await ManyProcessHarness.stack(schema: schema)
                _ = try await blocker.execute(script: "ROLLBACK")
                await blocker.close()
            } catch {
                await blocker.close()
                throw error
            }
            try await withCleanup {
                try await ObservationUpdateTests.seed(stack, [(1, 1, 10, "a"), (2, 1, 20, "b"), (3, 2, 30, "c")])
                let descriptor = FetchDescriptor<MPItem>(sortBy: [SortDescriptor(\.owner), SortDescriptor(\.value)])
                var iterator = stack.observe(descriptor, sectionedBy: \.owner).makeAsyncIterator()
                var replayed = try #require(try await iterator.next()).diff.applied(to: [])
                try await Psql.run("UPDATE mp_items SET owner = 2 WHERE id = 1; UPDATE mp_items SET owner = 5 WHERE id = 3;", schema: schema)
                let moved = try await ObservationUpdateTests.nextMatching(&iterator, replaying: &replayed, stack, descriptor, schema: schema)
                #expect(moved.sections.map { $0.values.map(\.id) } == [[2], [1], [3]])
                try await CaptureSources.expectInstalled(.triggers, schema: schema, context: "after the slot's creation timed out")
                // Nothing of the abandoned slot is left: its creation was cancelled on the server.
                let slots = try await TestServer.withConnection {
                    try await $0.query("SELECT count(*)::int FROM pg_replication_slots WHERE slot_name = \(CaptureSources.slotName(schema: schema))")[0]
                        .decode(Int.self, at: 0)
                }
                #expect(slots == 0)
            } cleanup: {
                await stack.shutdown()
            }
        }
    }
}
