import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestFixtures
import SkyrosTestSupport
import Testing

/// A replication slot that PostgreSQL invalidates (it kept more WAL than `max_slot_wal_keep_size` allows) is
/// detected and replaced by the relay, and the stacks drop what they cached of the schema's tables, since the
/// changes in between cannot be read any more.
///
/// Runs alone (`Isolated`): it sets `max_slot_wal_keep_size` for the whole cluster while it runs.
@Suite(
    "Lost replication slot", .timeLimit(.minutes(2)),
    .enabled(if: TestServer.allowsLogicalDecoding, "needs logical decoding"))
struct SlotLossIsolatedTests {
    @Test func anInvalidatedSlotIsRecreatedAndStacksRefetchWhatTheyMissed() async throws {
        try await CaptureHarness.withSchema { schema in
            let qualified = quoteIdentifier(schema)
            let slot = CaptureSources.slotName(schema: schema)
            let (logger, records) = RecordingLogHandler.logger()
            var configuration = DataStackConfiguration(
                store: .postgres(try TestServer.configuration, schema: schema), entities: [CaptureBook.self])
            configuration.changeFeed.captureSource = .logicalDecoding
            let stack = try await DataStack.start(configuration, logger: logger)
            let admin = try await PGConnection.connect(to: try TestServer.configuration)
            // A transaction that stays open holds the slot's restart position back, so that the WAL written
            // meanwhile exceeds the bound, and PostgreSQL invalidates the slot at the next checkpoint.
            let open = try await PGConnection.connect(to: try TestServer.configuration)
            try await withCleanup {
                let latest = LatestStamped.Titles()
                let observer = Task { for try await book in stack.observe(CaptureBook.self, id: 2) { await latest.set(book?.title) } }
                defer { observer.cancel() }
                await expectEventually("the observer gave no first result") { await latest.title == "book2" }

                // ALTER SYSTEM runs outside a transaction block: a statement of its own.
                try await admin.query("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'")
                try await admin.query("SELECT pg_reload_conf()")
                _ = try await open.execute(script: "BEGIN; UPDATE \(qualified).cap_books SET title = 'written while the slot was lost' WHERE id = 2;")
                var filler = 0
                await expectEventually(within: .seconds(30), "the slot was not invalidated") {
                    filler += 1
                    _ = try? await admin.execute(script: """
                        INSERT INTO \(qualified).cap_audit SELECT \(filler) * 1000 + g, repeat('x', 100) FROM generate_series(1, 200) AS g
                        """)
                    _ = try? await admin.query("SELECT pg_switch_wal()")
                    _ = try? await admin.query("CHECKPOINT")
                    let row = try? await admin.query("""
                        SELECT wal_status, confirmed_flush_lsn IS NULL FROM pg_replication_slots WHERE slot_name = \(slot)
                        """).first
                    guard let row else { return true }      // already dropped by the relay that found it lost
                    let status = try? row.decode(String?.self, at: 0)
                    // Lost, or the relay's new slot being created (no confirmed position yet): it waits for the open
                    // transaction, and more WAL and a checkpoint now would invalidate it too, so that the relay
                    // would find no slot at all the next time.
                    return status == "lost" || (try? row.decode(Bool.self, at: 1)) == true
                }
                // The relay's new slot waits for this transaction to end before it exists.
                _ = try await open.execute(script: "COMMIT")

                await expectEventually(within: .seconds(30), "the stack did not read again the row changed while the slot was lost") {
                    await latest.title == "written while the slot was lost"
                }
                // The new slot relays: a later change arrives as usual.
                _ = try await Psql.run("UPDATE cap_books SET title = 'after the new slot' WHERE id = 2", schema: schema)
                await expectEventually(within: .seconds(30), "a change after the new slot did not reach the observer") {
                    await latest.title == "after the new slot"
                }
                let status = try await admin.query("SELECT wal_status FROM pg_replication_slots WHERE slot_name = \(slot)")
                    .first?.decode(String?.self, at: 0)
                #expect(status != nil && status != "lost", "the slot's state: \(String(describing: status))")
                let markers = try await admin.query("""
                    SELECT count(*)::int FROM \(qualified: [schema, "skyros_change_log"]) AS l, jsonb_array_elements(l.changes::jsonb) AS c
                    WHERE c ->> 'k' = 't' AND c ->> 't' = 'cap_books'
                    """)[0].decode(Int.self, at: 0)
                #expect(markers == 1, "entries marking cap_books as truncated: \(markers)")
                let errors = records.entries.filter { $0.level == .error && "\($0.message)".contains("replication slot was lost") }
                #expect(errors.count == 1, "error records: \(errors.map(\.text))")
                #expect(errors.first?.metadata["skyros.capture.slot_status"] == "invalidated (max_slot_wal_keep_size)")
            } cleanup: {
                _ = try? await open.execute(script: "ROLLBACK")
                _ = try? await admin.query("ALTER SYSTEM RESET max_slot_wal_keep_size")
                _ = try? await admin.query("SELECT pg_reload_conf()")
                await open.close()
                await admin.close()
                await stack.shutdown()
            }
        }
    }
}
