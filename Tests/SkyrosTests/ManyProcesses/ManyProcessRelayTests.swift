import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestFixtures
import SkyrosTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The logical-decoding relay across real processes: one stack streams the schema's slot; when its process is
/// killed another takes over from the slot's confirmed position, and nothing is lost or logged twice; stacks
/// killed at any moment of their start leave one slot per schema. (Named ManyProcess: the ThreadSanitizer pass
/// skips the suites that time real processes.)
@Suite(.timeLimit(.minutes(6)), .enabled(if: TestServer.allowsLogicalDecoding, "needs logical decoding (scripts/test's logical-decoding pass)"))
struct ManyProcessRelayTests {
    /// Three `capture-node` children relay by election while psql-like writers (a plain connection, outside
    /// Skyros) commit continuously; the relaying child is SIGKILLed. Another child relays within the deadline
    /// (the figure is printed), every remaining child's cache and observers equal the tables, and the change log
    /// holds every writer transaction once, in commit order.
    @Test func aKilledRelaysSuccessorTakesOverAndNothingIsLostOrDoubled() async throws {
        try await CaptureHarness.withSchema { schema in
            try await CaptureHarness.withNodes(3, schema: schema, watchBook: 1, logical: true) { nodes in
                let slot = CaptureSources.slotName(schema: schema)
                let admin = try await TestServer.connect()
                defer { Task { await admin.close() } }
                /// The child whose relay streams the slot, and its walsender's pid.
                func relaying() async throws -> (node: CaptureNode, pid: Int32)? {
                    let row = try await admin.query("""
                        SELECT a.application_name::text, s.active_pid FROM pg_replication_slots AS s
                        JOIN pg_stat_activity AS a ON a.pid = s.active_pid WHERE s.slot_name = \(slot)
                        """).first
                    guard let row, let name = try row.decode(String?.self, at: 0) else { return nil }
                    for node in nodes where await node.listenerName.replacingOccurrences(of: "skyros-listener-", with: "skyros-relay-") == name {
                        return (node, try row.decode(Int32.self, at: 1))
                    }
                    return nil
                }
                var relay: (node: CaptureNode, pid: Int32)?
                await expectEventually(within: .seconds(20), "no child relays the slot") {
                    relay = try? await relaying()
                    return relay != nil
                }
                let first = try #require(relay)

                // A writer outside Skyros: one audit row per transaction, ids in commit order, until told to stop.
                let writing = Locked(true)
                let writer = Task { () -> Int64 in
                    let connection = try await TestServer.connect()
                    var id: Int64 = 0
                    while writing.withLock({ $0 }) {
                        id += 1
                        try await connection.query("INSERT INTO \(qualified: [schema, "cap_audit"]) VALUES (\(id), 'w')")
                        if id % 20 == 0 {
                            try await connection.query("UPDATE \(qualified: [schema, "cap_books"]) SET title = \("t\(id)") WHERE id = 1")
                        }
                    }
                    await connection.close()
                    return id
                }
                try await Task.sleep(for: .milliseconds(500))    // writes flow before the kill (not a synchronisation)
                await first.node.kill()
                let killed = ContinuousClock.now
                var successor: (node: CaptureNode, pid: Int32)?
                await expectEventually(within: .seconds(20), "no other child took the relay over") {
                    successor = try? await relaying()
                    return successor.map { $0.pid != first.pid && $0.node !== first.node } ?? false
                }
                let takeover = ContinuousClock.now - killed
                print("relay takeover after SIGKILL: \(takeover)")
                try await Task.sleep(for: .milliseconds(500))    // and flow after it
                writing.withLock { $0 = false }
                let written = try await writer.value
                #expect(written > 0)

                // Every writer transaction is in the log once, in commit order.
                try await TestServer.settleCapture(schema: schema)
                let logged = try await admin.query("""
                    SELECT (c ->> 'i')::int8 FROM \(qualified: [schema, "skyros_change_log"]) AS l,
                         jsonb_array_elements(l.changes::jsonb) AS c
                    WHERE c ->> 't' = 'cap_audit' ORDER BY l.position
                    """).map { try $0.decode(Int64.self, at: 0) }
                #expect(logged == Array(1...written), "\(logged.count) audit inserts logged of \(written), first gap at \(zip(logged, 1...written).first { $0 != $1 }.map { "\($0)" } ?? "-")")

                // The surviving children converge on the tables.
                let survivors = nodes.filter { $0 !== first.node }
                let title = written >= 20 ? "t\(written / 20 * 20)" : "book1"
                try await CaptureProcessTests.expectEveryNode(
                    survivors, schema: schema, objects: [1: title, 2: "book2"], watchedBook: title,
                    after: "the relay's SIGKILL and \(written) writer transactions")
            }
        }
    }

    /// 64 `capture-node` children, 16 at a time, started side by side and SIGKILLed (half of each round as soon
    /// as they are spawned, at any point of their start, half once ready), with psql writing between the rounds:
    /// afterwards the schema has exactly one slot and one publication, and once a stack runs again its relay
    /// confirms the slot up to the present (the WAL it keeps is what it has not relayed yet).
    @Test func stacksKilledAtAnyMomentLeaveOneSlotThatARunningStackKeepsCurrent() async throws {
        try await CaptureHarness.withSchema { schema in
            let slot = CaptureSources.slotName(schema: schema)
            for round in 1...4 {
                var nodes: [CaptureNode] = []
                for number in 1...16 {
                    nodes.append(try CaptureNode.spawn(name: "round \(round) child \(number)", schema: schema, watchBook: 1, logical: true))
                }
                for node in nodes.prefix(8) { await node.kill() }
                for node in nodes.dropFirst(8) { try? await node.waitUntilReady() }
                for node in nodes.dropFirst(8) { await node.kill() }
                for node in nodes {
                    _ = await node.stop()
                    node.removeOutput()
                }
                _ = try await Psql.run("UPDATE cap_books SET title = 'round-\(round)' WHERE id = 1", schema: schema)
            }
            let (slots, publications) = try await TestServer.withConnection { connection in
                let row = try await connection.query("""
                    SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE \(String(slot.prefix(slot.count - 16)) + "%"))::int,
                           (SELECT count(*) FROM pg_publication WHERE pubname LIKE \(String(slot.prefix(slot.count - 16)) + "%"))::int
                    """)[0]
                return (try row.decode(Int.self, at: 0), try row.decode(Int.self, at: 1))
            }
            #expect(slots == 1 && publications == 1, "\(slots) slots and \(publications) publications for schema \(schema)")

            // A stack runs again: it relays what the rounds left (psql's updates reach it) and keeps the slot current.
            try await CaptureHarness.withNodes(1, schema: schema, watchBook: 1, logical: true) { nodes in
                try await CaptureProcessTests.expectEveryNode(
                    nodes, schema: schema, objects: [1: "round-4"], watchedBook: "round-4", after: "64 killed stacks")
                try await TestServer.settleCapture(schema: schema)
                let behind = try await TestServer.withConnection { connection in
                    try await connection.query("""
                        SELECT (pg_current_wal_lsn() - restart_lsn)::int8 FROM pg_replication_slots WHERE slot_name = \(slot)
                        """)[0].decode(Int64.self, at: 0)
                }
                print("WAL retained by \(slot) with a stack running: \(behind) bytes")
                #expect(behind < 64 << 20, "the slot keeps \(behind) bytes of WAL with a relay running")
            }
        }
    }
}
