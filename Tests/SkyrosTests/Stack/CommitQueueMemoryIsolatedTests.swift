import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Resident memory under sustained overload: writers far faster than the database, the queue bounded.
/// Measures this process's resident memory, so it runs alone (scripts/test runs `*Isolated*` suites after the
/// parallel run, one at a time).
@Suite(
    "Commit queue memory", .serialized, .timeLimit(.minutes(3)),
    .enabled(if: ProcessInfo.processInfo.environment["SKYROS_SANITIZE"] == nil, "a sanitizer's shadow memory counts as resident")
)
struct CommitQueueMemoryIsolatedTests {
    /// 40,000 writes of 4 kB rows (160 MB of row data) from 20 tasks, queue bounded at 4 MiB / 1,000 sets,
    /// cache at 1,000 rows: resident memory grows by less than 64 MiB while writers wait.
    static let bound = 64 << 20

    @Test("Resident memory stays within 64 MiB of its start while 160 MB of writes wait for the queue")
    func memoryStaysFlat() async throws {
        try await StackTestServer.withQueueStack({ configuration in
            configuration.commitQueue.maximumQueuedBytes = 4 << 20
            configuration.commitQueue.maximumQueuedCommits = 1_000
            configuration.cacheLimit = CacheLimit(maxRows: 1_000)
        }) { stack in
            let payload = String(repeating: "m", count: 4_096)
            // Warm up (connections, statement caches, allocator) before the baseline.
            for id in 1...500 { try await stack.write { try $0.insert(StackNote(id: -id, title: payload, rank: 0)) } }
            try await stack.write(durability: .committed) { try $0.insert(note(0)) }
            let baseline = residentBytes()
            let peak = Locked(baseline)
            let sampling = Locked(true)
            let sampler = Task {
                while sampling.withLock({ $0 }) {
                    let now = residentBytes()
                    peak.withLock { $0 = max($0, now) }
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<20 {
                    group.addTask {
                        for index in 0..<2_000 {
                            let id = writer * 2_000 + index + 1
                            try await stack.write { try $0.insert(StackNote(id: id, title: payload, rank: id)) }
                        }
                    }
                }
                try await group.waitForAll()
            }
            try await stack.write(durability: .committed) { try $0.insert(note(40_001)) }
            sampling.withLock { $0 = false }
            await sampler.value

            let growth = peak.withLock { $0 } - baseline
            let statistics = stack.commitQueueStatistics
            print("commit queue memory: baseline \(baseline >> 20) MiB, peak growth \(growth >> 20) MiB, highest depth \(statistics.highestQueueDepth), \(statistics.groups) groups, largest \(statistics.largestGroup)")
            #expect(growth < Self.bound, "resident memory grew by \(growth >> 20) MiB")
            // The queue stayed within its bounds (count; bytes keep it lower still: ~1,000 rows of 4 kB).
            #expect(statistics.highestQueueDepth <= 1_000 + 20)
            #expect(try await stack.store.count(FetchDescriptor<StackNote>(predicate: #Predicate { $0.id > 0 })) == 40_001)
        }
    }
}
