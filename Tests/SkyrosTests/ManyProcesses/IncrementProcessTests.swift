import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestFixtures
import SkyrosTestSupport
import Testing

/// Set-based increments from several OS processes at once (#34's "views = views + 1" proof).
@Suite("Increments from many processes", .timeLimit(.minutes(5)))
struct IncrementProcessTests {
    /// Rounds per task: 1,000 (64,000 increments) in the main pass; 100 under a sanitizer and in the trigger
    /// fallback pass, which run the whole suite again to check other things than this figure.
    static let rounds: Int = {
        let environment = ProcessInfo.processInfo.environment
        return environment["SKYROS_SANITIZE", default: ""].isEmpty && environment["SKYROS_TEST_LOGICAL"] != "off" ? 1000 : 100
    }()

    /// 4 processes × 16 tasks × 1,000 queued writes, each `value = value + 1` on one row: the stored total is
    /// exactly 64,000, no write conflicted or failed, and this process's main context (which cached the row
    /// before) ends with the total too.
    @Test func sixtyFourTasksInFourProcessesIncrementExactly() async throws {
        let rounds = Self.rounds
        try await ManyProcessHarness.withSchema { schema in
            let stack = try await ManyProcessHarness.stack(schema: schema)
            try await withCleanup {
                try await stack.write(durability: .committed) { try $0.insert(MPItem(id: 1, owner: 0, value: 0, title: "counter")) }
                #expect(try await stack.read { try await $0.object(MPItem.self, id: 1) }?.value == 0)
                let nodes = try (0..<4).map { _ in
                    try ManyProcessHarness.spawn(["mp-increment", "--schema", schema, "--id", "1", "--tasks", "16", "--rounds", String(rounds)])
                }
                defer { nodes.forEach { $0.removeOutput() } }
                for node in nodes {
                    #expect(await node.exitStatus() == 0, "\(node.report)")
                    #expect(node.lines.contains("incremented \(16 * rounds) failures 0 conflicts 0"), "\(node.report)")
                }
                let stored = try await TestServer.withConnection {
                    try await $0.query("SELECT value FROM \(unsafeRaw: quoteIdentifier(schema)).mp_items WHERE id = 1")[0].decode(Int.self, at: 0)
                }
                #expect(stored == 64 * rounds)
                try await expectEventually(within: .seconds(30), "the other processes' increments did not reach this main context") {
                    try await stack.read { try await $0.object(MPItem.self, id: 1) }?.value == 64 * rounds
                }
            } cleanup: {
                await stack.shutdown()
            }
        }
    }
}
