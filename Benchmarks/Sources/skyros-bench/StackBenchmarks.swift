import Foundation
import RawLibPQ
@_spi(Benchmarks) import Skyros
import SkyrosPostgres

/// A row of the benchmark table created by ClientBenchmarks (`bench_items`: 10,000 rows, score = id % 1000).
struct BenchItem: Entity {
    var id: Int
    var name: String
    var score: Double

    static let tableName = "bench_items"
    static let columns: [EntityColumn<BenchItem>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.score, "score"),
    ]
}

/// Store fetch (issue 4) and the main context's cache (issue 5), each against raw libpq in the same run.
struct StackBenchmarks {
    let url: String
    let rounds: Int
    let iterations: Int

    func run(into report: inout Report) async throws {
        let config = try PGConfiguration(url: self.url)
        guard let raw = raw_connect(self.url) else { throw BenchmarkFailure(description: "raw connect failed") }
        defer { raw_finish(raw) }

        // Fetch of 100 rows by predicate, decoded into entities, vs raw libpq + hand decoding.
        let pool = PGConnectionPool(configuration: .init(maximumConnections: 2), postgres: config)
        let store = PostgresStore(pool: pool)
        let descriptor = FetchDescriptor<BenchItem>(predicate: #Predicate { $0.score < 10 }, sortBy: [SortDescriptor(\.id)])
        let check = try await store.fetch(descriptor)
        guard check.count == 100 else { throw BenchmarkFailure(description: "expected 100 rows, got \(check.count)") }
        let fetchIterations = max(100, self.iterations / 10)
        var rawFetch = Measurement()
        var storeFetch = Measurement()
        _ = raw_fetch_100(raw, 50)
        for _ in 0..<50 { _ = try await store.fetch(descriptor) }
        for _ in 0..<self.rounds {
            let rawNs = raw_fetch_100(raw, Int32(fetchIterations))
            guard rawNs > 0 else { throw BenchmarkFailure(description: "raw fetch failed") }
            rawFetch.add(totalNanoseconds: rawNs, operations: fetchIterations)
            storeFetch.add(totalNanoseconds: try await elapsedNanoseconds {
                for _ in 0..<fetchIterations { _ = try await store.fetch(descriptor) }
            }, operations: fetchIterations)
        }
        report.add("Fetch 100 rows by predicate + decode (PostgresStore)", microseconds(rawFetch.median), microseconds(storeFetch.median), ratio(storeFetch.median, rawFetch.median), "≤ 1.3×")
        await pool.shutdown()

        // Building a query's SQL (every fetch does it): a compound predicate, two sorts and a limit.
        let (s, minimum) = ("item", 10.0)
        let names = ["item 1", "item 2"]
        let compound = FetchDescriptor<BenchItem>(
            predicate: #Predicate { ($0.name.contains(s) || names.contains($0.name)) && $0.score > minimum && $0.name.starts(with: s) },
            sortBy: [SortDescriptor(\.name), SortDescriptor(\.score, order: .reverse)], fetchLimit: 20)
        var translation = Measurement()
        let translations = self.iterations * 10
        for _ in 0..<self.rounds {
            translation.add(totalNanoseconds: try await elapsedNanoseconds {
                for _ in 0..<translations { _ = try SQLQueryBuilder.select(compound, schema: "app", includeVersion: true) }
            }, operations: translations)
        }

        // Cached read by id on the main context vs a primary-key round trip (raw libpq, C).
        let stack = try await DataStack.start(DataStackConfiguration(
            store: .postgres(config), entities: [BenchItem.self], cacheLimit: CacheLimit(maxRows: 20_000)).benchmarkCaptureSource())
        _ = try await stack.read { try await $0.fetch(FetchDescriptor<BenchItem>()) }  // warm the cache
        var rawPoint = Measurement()
        var cached = Measurement()
        let context = stack.mainContext
        for _ in 0..<self.rounds {
            let rawNs = raw_point_selects(raw, Int32(self.iterations), 10_000)
            guard rawNs > 0 else { throw BenchmarkFailure(description: "raw point select failed") }
            rawPoint.add(totalNanoseconds: rawNs, operations: self.iterations)
            let n = self.iterations * 10
            cached.add(totalNanoseconds: try await elapsedNanoseconds {
                for i in 0..<n {
                    guard try await context.object(BenchItem.self, id: 1 + i % 10_000) != nil else {
                        throw BenchmarkFailure(description: "missing cached row")
                    }
                }
            }, operations: n)
        }
        let stats = stack.cacheStatistics
        report.add("Cached read by id (main context) vs PK round trip", microseconds(rawPoint.median), microseconds(cached.median), String(format: "%.0f× faster", rawPoint.median / cached.median), "≥ 20× faster")
        report.add("  cache during that run", "—", "\(stats.rows) rows, \(stats.hits) hits, \(stats.misses) misses", "—", "—")
        report.add("Building a query's SQL (compound predicate, two sorts, limit) vs a PK round trip", microseconds(rawPoint.median), microseconds(translation.median), String(format: "%.1f%% of it", 100 * translation.median / rawPoint.median), "—")
        await stack.shutdown()
    }
}
