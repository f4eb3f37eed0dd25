import Foundation
import SkyrosPostgres
import SkyrosSync
import SkyrosTestSupport
import Testing

/// The relay's check that the writers of a batch are visible to new snapshots before it hints them: a writer
/// still in progress counts, whether a snapshot lists it or it sits at the snapshot's `xmax` (the newest
/// transaction, not yet marked committed); a committed one does not.
@Suite("Relay: writers visible before their hint")
struct RelayVisibilityTests {
    @Test func aWriterInProgressCountsUntilItCommits() async throws {
        try await TestServer.withConnection { checker in
            try await TestServer.withConnection { writer in
                func inProgress(_ xids: [Int64]) async throws -> Int64 {
                    try await checker.query(ChangeRelay.writersInProgress(xids))[0].decode(Int64.self, at: 0)
                }
                func low32(_ xid8: String) throws -> Int64 { try #require(Int64(xid8)) % 4_294_967_296 }

                func committedXid(on connection: PGConnection) async throws -> Int64 {
                    try low32(try await connection.query("SELECT pg_current_xact_id()::text")[0].decode(String.self, at: 0))
                }
                // A transaction of our own that committed before the writer began (autocommit). Not `newest - k`:
                // on a shared server another test's transaction may hold that id, still running.
                let earlier = try await committedXid(on: checker)
                try await writer.execute(script: "BEGIN")
                let newest = try low32(try await writer.query("SELECT pg_current_xact_id()::text")[0].decode(String.self, at: 0))
                // The newest transaction: at the snapshot's xmax, listed nowhere.
                #expect(try await inProgress([newest]) == 1)
                // A later transaction that commits leaves it listed in the snapshot.
                let later = try await TestServer.withConnection { other in try await committedXid(on: other) }
                #expect(try await inProgress([newest]) == 1)
                try await writer.execute(script: "COMMIT")
                #expect(try await inProgress([newest]) == 0)
                // Committed before and after it, and several at once.
                #expect(try await inProgress([earlier, later, newest]) == 0)
                #expect(try await inProgress([earlier]) == 0)
                #expect(try await inProgress([]) == 0)
            }
        }
    }
}
