import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Snapshot reads on a streaming replica (`scripts/pg-fixture pair`): read-your-writes through the primary's
/// log position, the primary when the replica lags or is gone.
@Suite(
    "ReadReplica", .timeLimit(.minutes(3)),
    .enabled(if: PostgresFixture.isAvailable, "starts its own primary and standby: run through scripts/test"))
struct ReadReplicaTests {
    @Test("replica reads see every write acknowledged before them, and fall back to the primary when the replica lags or is unreachable")
    func replicaReads() async throws {
        try await PostgresFixture.with("pair") { fixture in
            try await self.replicaReads(fixture)
        }
    }

    private func replicaReads(_ fixture: PostgresFixture) async throws {
        let primary = try fixture.configuration("PRIMARY_URL")
        let standby = try fixture.configuration("STANDBY_URL")
        let notes = { (reader: SnapshotReader) in try await reader.fetch(FetchDescriptor<StackNote>()).map(\.id) }
        try await StackTestServer.withQueueStack(server: primary, {
            $0.readReplica = ReadReplica(standby, maximumLagWait: .seconds(20))
        }) { stack in
            let schema = try #require((stack.store as? PostgresStore)?.schema)
            // Read-your-writes: the replica read waits until the standby replayed the durable write.
            for id in 1...20 {
                try await stack.write(durability: .committed) { try $0.insert(note(id)) }
                #expect(try await stack.readSnapshot(from: .replica, notes) == Array(1...id))
            }
            #expect(stack.replicaReadStatistics.replicaReads == 20)
            #expect(stack.replicaReadStatistics.fallbacks == 0)

            // The standby stops replaying: a stack that waits at most 300 ms for it reads the primary instead (and
            // still sees the write).
            var impatient = DataStackConfiguration(store: .postgres(primary, schema: schema), entities: [StackNote.self])
            impatient.readReplica = ReadReplica(standby, maximumLagWait: .milliseconds(300))
            let other = try await DataStack.start(impatient)
            let replica = try await PGConnection.connect(to: standby)
            try await replica.query("SELECT pg_wal_replay_pause()")
            try await stack.write(durability: .committed) { try $0.insert(note(21)) }
            #expect(try await other.readSnapshot(from: .replica, notes) == Array(1...21))
            #expect(other.replicaReadStatistics.fallbacks == 1)
            #expect(other.replicaReadStatistics.replicaReads == 0)
            let onStandby = try await replica.query("SELECT count(*)::int8 FROM \(qualified: [schema, "stack_notes"])")
            #expect(try onStandby[0].decode(Int.self, at: 0) == 20, "the standby had not replayed the write")

            // Replaying again, reads go back to the replica.
            try await replica.query("SELECT pg_wal_replay_resume()")
            #expect(try await stack.readSnapshot(from: .replica, notes) == Array(1...21))
            #expect(stack.replicaReadStatistics.replicaReads == 21)
            #expect(stack.replicaReadStatistics.fallbacks == 0)
            await replica.close()
            await other.shutdown()
        }

        // A replica that cannot be reached: reads run on the primary.
        var unreachable = standby
        unreachable["port"] = "1"
        try await StackTestServer.withQueueStack(server: primary, { $0.readReplica = ReadReplica(unreachable) }) { stack in
            try await stack.write(durability: .committed) { try $0.insert(note(1)) }
            #expect(try await stack.readSnapshot(from: .replica, notes) == [1])
            #expect(stack.replicaReadStatistics.fallbacks == 1)
            #expect(stack.replicaReadStatistics.replicaReads == 0)
        }
    }
}
