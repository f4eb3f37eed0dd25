import Foundation
import Skyros
import SkyrosPostgres

/// A row of `bench_cache`: a million of them, each with a payload of about 130 characters.
struct BenchCacheRow: Entity {
    var id: Int
    var payload: String

    static let tableName = "bench_cache"
    static let columns: [EntityColumn<BenchCacheRow>] = [EntityColumn(\.id, "id"), EntityColumn(\.payload, "payload")]
}

/// SPEC §6: the main context's cache stays within its configured bound while a million rows pass through it
/// (fetched a page at a time through the main context, which caches every row it reads). The baseline is the
/// bound itself (1 MiB binds first: 10,000 of these rows take about 2.2 MiB); the process's resident memory is
/// sampled beside it.
struct CacheBoundBenchmark {
    let url: String
    static let rows = 1_000_000
    static let page = 1_000
    static let limit = CacheLimit(maxRows: 10_000, maxBytes: 1 << 20)

    func run(into report: inout Report) async throws {
        let config = try PGConfiguration(url: self.url)
        let setup = try await PGConnection.connect(to: config)
        try await setup.execute(script: """
            DROP TABLE IF EXISTS bench_cache;
            CREATE TABLE bench_cache (id int8 PRIMARY KEY, payload text NOT NULL);
            INSERT INTO bench_cache SELECT i, repeat(md5(i::text), 4) || lpad(i::text, 4, '0')
            FROM generate_series(1, \(Self.rows)) AS i;
            ANALYZE bench_cache;
            """)
        let stack = try await DataStack.start(DataStackConfiguration(
            store: .postgres(config), entities: [BenchCacheRow.self], cacheLimit: Self.limit).benchmarkCaptureSource())
        var peakRows = 0
        var peakBytes = 0
        var residentAtStart = 0
        var peakResident = 0
        var passed = 0
        let started = ContinuousClock.now
        for first in stride(from: 1, through: Self.rows, by: Self.page) {
            let last = first + Self.page - 1
            let fetched = try await stack.read { context in
                try await context.fetch(FetchDescriptor<BenchCacheRow>(
                    predicate: #Predicate { $0.id >= first && $0.id <= last }, sortBy: [SortDescriptor(\.id)]))
            }
            guard fetched.count == Self.page, fetched.first?.id == first else {
                throw BenchmarkFailure(description: "page at \(first): \(fetched.count) rows")
            }
            passed += fetched.count
            let statistics = stack.cacheStatistics
            peakRows = max(peakRows, statistics.rows)
            peakBytes = max(peakBytes, statistics.bytes)
            let resident = residentBytes()
            // Memory is counted from the first pages on: the cache has filled by then, and the allocator holds
            // what one page's fetch needs.
            if passed == 20 * Self.page { residentAtStart = resident }
            if passed > 20 * Self.page { peakResident = max(peakResident, resident) }
        }
        let elapsed = ContinuousClock.now - started
        let statistics = stack.cacheStatistics
        await stack.shutdown()
        _ = try await setup.execute(script: "DROP TABLE bench_cache")
        await setup.close()

        let maxRows = Self.limit.maxRows ?? 0
        let maxBytes = Self.limit.maxBytes ?? 0
        report.add(
            "A million rows through the main context's cache (1,000-row pages): peak cached rows vs the row bound",
            "\(maxRows) rows", "\(peakRows) rows (\(passed) passed, \(statistics.evictions) evicted)",
            String(format: "%.2f×", Double(peakRows) / Double(maxRows)), "≤ 1×")
        report.add(
            "  peak cached bytes (approximate) vs the byte bound", mebibytes(maxBytes), mebibytes(peakBytes),
            String(format: "%.2f×", Double(peakBytes) / Double(maxBytes)), "≤ 1×")
        report.add(
            "  resident memory growth after the first 20,000 rows, while the rest passed", "—",
            mebibytes(max(0, peakResident - residentAtStart)), "—", "—")
        report.add(
            "  time for the million rows", "—",
            String(format: "%.1f s", Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18), "—", "—")
    }
}

private func mebibytes(_ bytes: Int) -> String { String(format: "%.1f MiB", Double(bytes) / 1_048_576) }

/// This process's resident set size (`/proc/self/statm`, Linux).
private func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}
