import Foundation
import Logging
import PostgresNIO

/// The same point select and autocommit insert through PostgresNIO, for comparison (SPEC §6).
struct PostgresNIOBenchmarks {
    let url: String
    let rounds: Int
    let iterations: Int

    /// Median nanoseconds per operation for (point select, insert).
    func run() async throws -> (select: Double, insert: Double) {
        guard let components = URLComponents(string: self.url), let host = components.host else {
            throw BenchmarkFailure(description: "cannot parse DATABASE_URL for PostgresNIO")
        }
        let configuration = PostgresConnection.Configuration(
            host: host, port: components.port ?? 5432, username: components.user ?? "postgres",
            password: components.password, database: String(components.path.dropFirst()), tls: .disable)
        let logger = Logger(label: "bench.nio", factory: { _ in SwiftLogNoOpLogHandler() })
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        try await connection.query("TRUNCATE bench_insert", logger: logger)

        var select: [Double] = []
        var insert: [Double] = []
        var nextID = 1
        for i in 0..<200 {
            _ = try await connection.query("SELECT id, name, score FROM bench_items WHERE id = \(1 + i)", logger: logger).collect()
        }
        for _ in 0..<self.rounds {
            let n = self.iterations
            let s = try await elapsedNanoseconds {
                for i in 0..<n {
                    let rows = try await connection.query("SELECT id, name, score FROM bench_items WHERE id = \(1 + i % 10_000)", logger: logger)
                    for try await (id, name, score) in rows.decode((Int, String, Double).self) {
                        _ = (id, name, score)
                    }
                }
            }
            select.append(Double(s) / Double(n))
            let first = nextID
            let w = try await elapsedNanoseconds {
                for i in 0..<n {
                    try await connection.query("INSERT INTO bench_insert (id, name) VALUES (\(first + i), \("benchmark row"))", logger: logger)
                }
            }
            nextID += n
            insert.append(Double(w) / Double(n))
        }
        try await connection.close()
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        return (median(select), median(insert))
    }
}
