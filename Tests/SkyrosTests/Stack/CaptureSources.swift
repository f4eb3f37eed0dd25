import Foundation
import Skyros
import SkyrosTestSupport
import Testing

/// The change capture sources the open-world tests run on.
enum CaptureSources {
    /// The sources the server under test allows, for tests that run on each: both, unless scripts/test runs the
    /// server without logical decoding (`SKYROS_TEST_WAL_LEVEL=replica`, the pass where every stack falls back to
    /// triggers).
    static let both: [ChangeCaptureSource] = TestServer.allowsLogicalDecoding ? [.triggers, .logicalDecoding] : [.triggers]

    /// The logical-decoding capture's slot name for `schema` in the test database.
    static func slotName(schema: String) -> String {
        LogicalCapture.slotName(schema: schema, database: (try? TestServer.configuration.database) ?? "postgres")
    }

    /// Checks that `schema` is captured by `source` alone: with logical decoding, its slot exists, no capture
    /// trigger does, and the log holds the relayed entries; with triggers, no slot exists.
    static func expectInstalled(_ source: ChangeCaptureSource, schema: String, context: String) async throws {
        let slot = CaptureSources.slotName(schema: schema)
        let (slots, triggers, entries) = try await TestServer.withConnection { connection in
            let row = try await connection.query("""
                SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name = \(slot))::int,
                       (SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'skyros\\_capture%'
                          AND tgrelid IN (SELECT c.oid FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
                                          WHERE n.nspname = \(schema)))::int,
                       (SELECT count(*) FROM \(qualified: [schema, "skyros_change_log"]))::int
                """)[0]
            return (try row.decode(Int.self, at: 0), try row.decode(Int.self, at: 1), try row.decode(Int.self, at: 2))
        }
        switch source {
        case .logicalDecoding:
            #expect(slots == 1 && triggers == 0 && entries > 0, "slots \(slots), triggers \(triggers), entries \(entries): \(context)")
        default:
            #expect(slots == 0 && triggers > 0 && entries > 0, "slots \(slots), triggers \(triggers), entries \(entries): \(context)")
        }
    }
}
