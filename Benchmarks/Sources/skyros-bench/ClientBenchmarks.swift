import Foundation
import RawLibPQ
import SkyrosPostgres

/// Issue: client overhead (point select, autocommit insert) and pipeline speed-up, against raw libpq in C.
struct ClientBenchmarks {
    let url: String
    let rounds: Int
    let iterations: Int

    func run(into report: inout Report) async throws {
        let config = try PGConfiguration(url: self.url)
        let setup = try await PGConnection.connect(to: config)
        try await setup.execute(script: """
            DROP TABLE IF EXISTS bench_items, bench_insert;
            CREATE TABLE bench_items (id int8 PRIMARY KEY, name text NOT NULL, score float8 NOT NULL);
            INSERT INTO bench_items SELECT g, 'item number ' || g, (g % 1000)::float8 FROM generate_series(1, 10000) g;
            CREATE TABLE bench_insert (id int8 PRIMARY KEY, name text NOT NULL);
            ANALYZE bench_items;
            """)
        guard let raw = raw_connect(self.url) else { throw BenchmarkFailure(description: "raw connect failed") }
        defer { raw_finish(raw) }
        let connection = try await PGConnection.connect(to: config)

        // The cost of reaching the connection's thread and coming back, with no I/O (from the shared pool).
        var hop = Measurement()
        for _ in 0..<self.rounds {
            let n = self.iterations * 5
            hop.add(totalNanoseconds: await elapsedNanoseconds {
                for _ in 0..<n { _ = await connection.isInTransaction }
            }, operations: n)
        }
        report.add("Hop to the connection thread and back (no I/O), from the shared pool", "—", microseconds(hop.median), "—", "—")

        // The raw baseline both as libpq's PQexecPrepared (sleeps in poll() for each reply) and busy-polling for
        // the reply like Skyros's PGConnection (PGConfiguration.busyPoll), to tell the wait strategy apart
        // from the Swift layer's overhead.
        func polling<R>(_ body: () -> R) -> R {
            raw_set_busy_poll(raw, defaultBusyPollNanoseconds)
            defer { raw_set_busy_poll(raw, 0) }
            return body()
        }

        // Point select.
        var rawSelect = Measurement()
        var rawPolledSelect = Measurement()
        var swiftSelect = Measurement()
        _ = raw_point_selects(raw, 200, 10_000)
        for i in 0..<200 { _ = try await connection.query("SELECT id, name, score FROM bench_items WHERE id = \(1 + i)") }
        for _ in 0..<self.rounds {
            let rawNs = raw_point_selects(raw, Int32(self.iterations), 10_000)
            guard rawNs > 0 else { throw BenchmarkFailure(description: "raw point select failed") }
            rawSelect.add(totalNanoseconds: rawNs, operations: self.iterations)
            let polledNs = polling { raw_point_selects(raw, Int32(self.iterations), 10_000) }
            guard polledNs > 0 else { throw BenchmarkFailure(description: "raw polled point select failed") }
            rawPolledSelect.add(totalNanoseconds: polledNs, operations: self.iterations)
            let n = self.iterations
            let ns = try await elapsedNanoseconds {
                try await connection.withOwnExecutor {
                for i in 0..<n {
                    let rows = try await connection.query("SELECT id, name, score FROM bench_items WHERE id = \(1 + i % 10_000)")
                    let row = rows[0]
                    _ = try row.decode(Int.self, at: 0)
                    _ = try row.decode(String.self, at: 1)
                    _ = try row.decode(Double.self, at: 2)
                }
                }
            }
            swiftSelect.add(totalNanoseconds: ns, operations: n)
        }
        report.add("Prepared point select + decode", microseconds(rawSelect.median), microseconds(swiftSelect.median), ratio(swiftSelect.median, rawSelect.median), "≤ 1.15×")
        report.add("Prepared point select + decode, raw libpq busy-polling like Skyros", microseconds(rawPolledSelect.median), microseconds(swiftSelect.median), ratio(swiftSelect.median, rawPolledSelect.median), "—")

        // Autocommit insert.
        var rawInsert = Measurement()
        var rawPolledInsert = Measurement()
        var swiftInsert = Measurement()
        var nextID: Int64 = 1
        for _ in 0..<self.rounds {
            let rawNs = raw_inserts(raw, Int32(self.iterations), nextID)
            guard rawNs > 0 else { throw BenchmarkFailure(description: "raw insert failed") }
            nextID += Int64(self.iterations)
            rawInsert.add(totalNanoseconds: rawNs, operations: self.iterations)
            let firstPolled = nextID
            let polledNs = polling { raw_inserts(raw, Int32(self.iterations), firstPolled) }
            guard polledNs > 0 else { throw BenchmarkFailure(description: "raw polled insert failed") }
            nextID += Int64(self.iterations)
            rawPolledInsert.add(totalNanoseconds: polledNs, operations: self.iterations)
            let first = nextID
            let n = self.iterations
            let ns = try await elapsedNanoseconds {
                try await connection.withOwnExecutor {
                    for i in 0..<n {
                        try await connection.query("INSERT INTO bench_insert (id, name) VALUES (\(first + Int64(i)), \("benchmark row"))")
                    }
                }
            }
            nextID += Int64(n)
            swiftInsert.add(totalNanoseconds: ns, operations: n)
        }
        report.add("Autocommit insert", microseconds(rawInsert.median), microseconds(swiftInsert.median), ratio(swiftInsert.median, rawInsert.median), "≤ 1.15×")
        report.add("Autocommit insert, raw libpq busy-polling like Skyros", microseconds(rawPolledInsert.median), microseconds(swiftInsert.median), ratio(swiftInsert.median, rawPolledInsert.median), "—")

        // PostgresNIO on the same two operations, same server, same run.
        let nio = try await PostgresNIOBenchmarks(url: self.url, rounds: self.rounds, iterations: self.iterations).run()
        report.add("Prepared point select + decode — PostgresNIO", microseconds(rawSelect.median), microseconds(nio.select), ratio(nio.select, rawSelect.median), "(comparison)")
        report.add("Autocommit insert — PostgresNIO", microseconds(rawInsert.median), microseconds(nio.insert), ratio(nio.insert, rawInsert.median), "(comparison)")
        try await setup.execute(script: "TRUNCATE bench_insert")

        // 10,000 rows in one transaction: sequential vs pipelined.
        let batch = 10_000
        var rawSequential = Measurement()
        var rawPipeline = Measurement()
        var swiftSequential = Measurement()
        var swiftPipeline = Measurement()
        for _ in 0..<max(3, self.rounds / 2) {
            try await setup.execute(script: "TRUNCATE bench_insert")
            rawSequential.add(totalNanoseconds: raw_sequential_transaction(raw, Int32(batch), 1), operations: 1)
            try await setup.execute(script: "TRUNCATE bench_insert")
            rawPipeline.add(totalNanoseconds: raw_pipeline_transaction(raw, Int32(batch), 1), operations: 1)
            try await setup.execute(script: "TRUNCATE bench_insert")
            swiftSequential.add(totalNanoseconds: try await elapsedNanoseconds {
                try await connection.withOwnExecutor {
                    try await connection.withTransaction { connection in
                        for i in 0..<batch {
                            try await connection.query("INSERT INTO bench_insert (id, name) VALUES (\(Int64(i + 1)), \("benchmark row"))")
                        }
                    }
                }
            }, operations: 1)
            try await setup.execute(script: "TRUNCATE bench_insert")
            let queries: [PGQuery] = ["BEGIN"] + (0..<batch).map { i in
                "INSERT INTO bench_insert (id, name) VALUES (\(Int64(i + 1)), \("benchmark row"))"
            } + ["COMMIT"]
            swiftPipeline.add(totalNanoseconds: try await elapsedNanoseconds { try await connection.pipeline(queries) }, operations: 1)
        }
        report.add("10,000 inserts, one transaction, sequential", milliseconds(rawSequential.median), milliseconds(swiftSequential.median), ratio(swiftSequential.median, rawSequential.median), "—")
        report.add("10,000 inserts, one transaction, pipelined", milliseconds(rawPipeline.median), milliseconds(swiftPipeline.median), ratio(swiftPipeline.median, rawPipeline.median), "—")
        report.add("Pipeline speed-up (sequential ÷ pipelined)", ratio(rawSequential.median, rawPipeline.median), ratio(swiftSequential.median, swiftPipeline.median), "—", "—")

        await connection.close()
        try await setup.execute(script: "DROP TABLE IF EXISTS bench_insert")
        await setup.close()
        // bench_items stays for StackBenchmarks.
    }
}
