import Foundation
import RawLibPQ
@_spi(Benchmarks) import Skyros
import SkyrosPostgres

struct BenchInsertRow: Entity {
    var id: Int
    var name: String

    static let tableName = "bench_insert"
    static let columns: [EntityColumn<BenchInsertRow>] = [EntityColumn(\.id, "id"), EntityColumn(\.name, "name")]
}

/// A row with a value for every kind of door check: int4, varchar(255), numeric(6,2), NOT NULL text, an enum
/// label, and a date with sub-microsecond digits (rounded at the door).
struct BenchCheckedRow: Entity {
    var id: Int
    var priority: Int
    var title: String
    var price: Decimal
    var note: String
    var mood: String
    var at: Date

    static let tableName = "bench_checked"
    static let columns: [EntityColumn<BenchCheckedRow>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.priority, "priority"), EntityColumn(\.title, "title"),
        EntityColumn(\.price, "price"), EntityColumn(\.note, "note"), EntityColumn(\.mood, "mood"), EntityColumn(\.at, "at"),
    ]
    static let definitions: [String: ColumnDefinition] = [
        "id": ColumnDefinition(.bigint), "priority": ColumnDefinition(.integer), "title": ColumnDefinition(.varchar(255)),
        "price": ColumnDefinition(.numeric(6, 2)), "note": ColumnDefinition(.text),
        "mood": ColumnDefinition(.enumeration("mood", labels: ["calm", "busy", "urgent"])),
        "at": ColumnDefinition(.named("timestamptz")),
    ]
}

/// A row whose `created_at` the database sets (`DEFAULT now()`), read back by the insert's `RETURNING`.
struct BenchOwnedRow: Entity {
    var id: Int
    var name: String
    var created_at: Date

    static let tableName = "bench_owned"
    static let columns: [EntityColumn<BenchOwnedRow>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.created_at, "created_at", generated: .onInsert),
    ]
}

/// The same table with `created_at` written by the app (no `RETURNING` beyond the version).
struct BenchOwnedPlainRow: Entity {
    var id: Int
    var name: String
    var created_at: Date

    static let tableName = "bench_owned"
    static let columns: [EntityColumn<BenchOwnedPlainRow>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.created_at, "created_at"),
    ]
}

struct BenchCounter: Entity {
    var id: Int
    var n: Int

    static let tableName = "bench_observe"
    static let columns: [EntityColumn<BenchCounter>] = [EntityColumn(\.id, "id"), EntityColumn(\.n, "n")]
}

/// A table the capture watches (a stack maps it), beside `bench_plain`, the same table unmapped: what the
/// capture's triggers cost another writer.
struct BenchCaptured: Entity {
    var id: Int
    var n: Int

    static let tableName = "bench_captured"
    static let columns: [EntityColumn<BenchCaptured>] = [EntityColumn(\.id, "id"), EntityColumn(\.n, "n")]
}

/// The commit queue (issue 6) and cross-stack observation latency (issue 7), each against raw libpq in the same run.
struct SyncBenchmarks {
    let url: String
    let rounds: Int
    let iterations: Int
    /// Which of the measurements to run (`--only queue|durable|observe|capture`; `--only sync` runs all).
    let parts: Set<Part>

    enum Part: String, CaseIterable {
        case queue, durable, observe, capture
    }

    /// Runs the parts, each under its deadline, between a setup and a shutdown they share (phases of their own).
    func run(into report: inout Report, deadlines: PhaseDeadlines) async throws {
        let config = try PGConfiguration(url: self.url)
        let (setup, raw, stack) = try await deadlines.run(.syncSetup) { () async throws -> (PGConnection, OpaquePointer, DataStack) in
            let setup = try await PGConnection.connect(to: config)
            try await setup.execute(script: """
                DROP TABLE IF EXISTS bench_insert, bench_observe, bench_observe_raw, bench_owned, bench_captured, bench_plain;
                CREATE TABLE bench_insert (id int8 PRIMARY KEY, name text NOT NULL);
                CREATE TABLE bench_owned (id int8 PRIMARY KEY, name text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
                CREATE TABLE bench_observe (id int8 PRIMARY KEY, n int8 NOT NULL);
                INSERT INTO bench_observe VALUES (1, 0), (2, 0), (3, 0);
                CREATE TABLE bench_captured (id int8 PRIMARY KEY, n int8 NOT NULL);
                INSERT INTO bench_captured SELECT g, 0 FROM generate_series(1, 1000) AS g;
                CREATE TABLE bench_plain (id int8 PRIMARY KEY, n int8 NOT NULL);
                INSERT INTO bench_plain SELECT g, 0 FROM generate_series(1, 1000) AS g;
                CREATE TABLE bench_observe_raw (id int8 PRIMARY KEY, n int8 NOT NULL);
                INSERT INTO bench_observe_raw VALUES (1, 0);
                """)
            guard let raw = raw_connect(self.url) else { throw BenchmarkFailure(description: "raw connect failed") }
            do {
                let stack = try await DataStack.start(DataStackConfiguration(
                    store: .postgres(config), entities: [BenchInsertRow.self, BenchCounter.self, BenchOwnedRow.self, BenchOwnedPlainRow.self, BenchCaptured.self]
                ).benchmarkCaptureSource(), logger: benchmarkLogger)
                return (setup, raw, stack)
            } catch {
                raw_finish(raw)
                throw error
            }
        }
        defer { raw_finish(raw) }

        var nextID = 1
        if self.parts.contains(.queue) {
            try await deadlines.run(.queue) {
                try await self.queue(stack: stack, setup: setup, raw: raw, nextID: &nextID, into: &report)
            }
        }
        if self.parts.contains(.durable) {
            try await deadlines.run(.durable) {
                try await self.durable(stack: stack, raw: raw, nextID: &nextID, into: &report)
            }
        }
        if self.parts.contains(.observe) {
            try await deadlines.run(.observe) {
                try await self.observe(stack: stack, config: config, raw: raw, into: &report)
            }
        }
        if self.parts.contains(.capture) {
            try await deadlines.run(.capture) { try self.captureCost(raw: raw, into: &report) }
        }
        await deadlines.run(.syncShutdown) {
            await stack.shutdown()
            await setup.close()
        }
    }

    /// A stack on the same server without the change feed (no change-log row, no NOTIFY, no listener).
    func stackWithoutChangeFeed() async throws -> DataStack {
        var configuration = DataStackConfiguration(store: .postgres(try PGConfiguration(url: self.url)), entities: [BenchInsertRow.self])
        configuration.changeFeed.isEnabled = false
        return try await DataStack.start(configuration, logger: benchmarkLogger)
    }

    /// Queued one-row writes from 64 tasks vs one pipelined libpq transaction of the same rows (and without the
    /// change feed: no change-log row, no NOTIFY, no listener — what announcing costs the queue).
    func queue(stack: DataStack, setup: PGConnection, raw: OpaquePointer, nextID: inout Int, into report: inout Report) async throws {
        let quiet = try await self.stackWithoutChangeFeed()
        let rows = 10_000
        var rawPipeline = Measurement()
        var queued = Measurement()
        var quietQueued = Measurement()
        func queueRound(_ stack: DataStack, into measurement: inout Measurement) async throws {
            try await setup.execute(script: "TRUNCATE bench_insert")
            let before = stack.commitQueueStatistics
            let first = nextID
            let ns = try await elapsedNanoseconds {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for task in 0..<64 {
                        group.addTask {
                            var i = task
                            while i < rows {
                                let id = first + i
                                try await stack.write { try $0.insert(BenchInsertRow(id: id, name: "benchmark row")) }
                                i += 64
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                // Commits are applied in order: when this one is durable, every earlier one is too.
                try await stack.write(durability: .committed) { try $0.insert(BenchInsertRow(id: first + rows, name: "fence")) }
            }
            nextID += rows + 1
            measurement.add(totalNanoseconds: ns, operations: rows)
            if ProcessInfo.processInfo.environment["SKYROS_BENCH_DEBUG"] != nil {
                // Where the round's time went: groups sent and the time they were on the server (drain busy).
                let after = stack.commitQueueStatistics
                let groups = after.groups - before.groups
                let busy = percentileMicroseconds(after.averageGroupLatency * after.groups - before.averageGroupLatency * before.groups)
                FileHandle.standardError.write(Data(String(
                    format: "[queue] round %.1f ms: %d groups (%.0f sets each), groups on the server %.1f ms, highest depth %d\n",
                    Double(ns) / 1e6, groups, Double(after.sets - before.sets) / Double(max(1, groups)), busy / 1000,
                    after.highestQueueDepth).utf8))
            }
            let count = try await setup.query("SELECT count(*) FROM bench_insert")[0].decode(Int.self, at: 0)
            guard count == rows + 1 else { throw BenchmarkFailure(description: "expected \(rows + 1) rows, found \(count)") }
        }
        // One round of each, not counted: the first round of a fresh stack grows its maps and the allocator's
        // arenas (it measured 67-86 ms against 45-71 ms for the rounds after it).
        for round in 0...self.rounds {
            let counted = round > 0
            var discarded = Measurement()
            try await setup.execute(script: "TRUNCATE bench_insert")
            let rawNs = raw_pipeline_transaction(raw, Int32(rows), 1)
            guard rawNs > 0 else { throw BenchmarkFailure(description: "raw pipeline failed") }
            if counted { rawPipeline.add(totalNanoseconds: rawNs, operations: rows) }
            if counted { try await queueRound(stack, into: &queued) } else { try await queueRound(stack, into: &discarded) }
            if counted { try await queueRound(quiet, into: &quietQueued) } else { try await queueRound(quiet, into: &discarded) }
        }
        await quiet.shutdown()
        // The door's checks on the queued-write path, in the same run: what `insert` adds to encoding the row
        // (which the commit then reuses), for the queue's rows (id int8, name text NOT NULL: the definitions
        // the stack read at start) and for a row with every kind of check.
        let plain = (0..<rows).map { BenchInsertRow(id: $0, name: "benchmark row") }
        let plainCost = try ColumnDoorBenchmark.nanosecondsPerRow(plain, store: stack.store, rounds: self.rounds)
        func checkedRows(subMicrosecond: Bool) -> [BenchCheckedRow] {
            (0..<rows).map {
                // Whole microseconds built as decoding builds them (no rounding needed), or with a tenth more.
                let at = subMicrosecond ? Date(timeIntervalSince1970: 1_800_000_000.1234567 + Double($0))
                    : Date(timeIntervalSince1970: Double(1_800_000_000_123_456 + Int64($0) * 1_000_000) / 1_000_000)
                return BenchCheckedRow(
                    id: $0, priority: $0 % 1000, title: "ticket number \($0)", price: Decimal($0 % 99_999) / 100, note: "n",
                    mood: "busy", at: at)
            }
        }
        let checkedCost = try ColumnDoorBenchmark.nanosecondsPerRow(
            checkedRows(subMicrosecond: false), definitions: BenchCheckedRow.definitions, rounds: self.rounds)
        let normalisedCost = try ColumnDoorBenchmark.nanosecondsPerRow(
            checkedRows(subMicrosecond: true), definitions: BenchCheckedRow.definitions, rounds: self.rounds)
        report.add("Door checks per queued row (the queue's rows: int8, text NOT NULL), admit vs encode alone", String(format: "%.0f ns", plainCost.encode), String(format: "%.0f ns", plainCost.admit), String(format: "+%.0f ns", plainCost.admit - plainCost.encode), "< 1 µs")
        report.add("Door checks per row with every check (int4, varchar(255), numeric(6,2), NOT NULL, enum, date), admit vs encode alone", String(format: "%.0f ns", checkedCost.encode), String(format: "%.0f ns", checkedCost.admit), String(format: "+%.0f ns", checkedCost.admit - checkedCost.encode), "< 1 µs")
        report.add("The same rows with sub-µs dates (normalised: each date rounded through its key path)", String(format: "%.0f ns", normalisedCost.encode), String(format: "%.0f ns", normalisedCost.admit), String(format: "+%.0f ns", normalisedCost.admit - normalisedCost.encode), "< 1 µs")
        report.add("10,000 one-row writes from 64 tasks (per row), queue vs one libpq pipeline", microseconds(rawPipeline.median), microseconds(queued.median), String(format: "%.0f%% of pipeline throughput", 100 * rawPipeline.median / queued.median), "≥ 50%")
        report.add("The same without the change feed", microseconds(rawPipeline.median), microseconds(quietQueued.median), String(format: "%.0f%% of pipeline throughput", 100 * rawPipeline.median / quietQueued.median), "—")
    }

    /// What the capture costs a writer outside Skyros: a plain libpq client's autocommit one-row UPDATEs, and
    /// UPDATEs of 1,000 rows in one statement, on a captured table (the stack maps it) against the same table
    /// without the capture's triggers, alternating rounds on one connection.
    func captureCost(raw: OpaquePointer, into report: inout Report) throws {
        var captured = Measurement()
        var plain = Measurement()
        var capturedBulk = Measurement()
        var plainBulk = Measurement()
        let n = max(200, self.iterations / 2)
        let bulk = max(10, self.iterations / 100)
        func round(_ measurement: inout Measurement, _ operations: Int, _ run: () -> Int64) throws {
            let ns = run()
            guard ns > 0 else { throw BenchmarkFailure(description: "raw capture round failed") }
            measurement.add(totalNanoseconds: ns, operations: operations)
        }
        for index in 0..<self.rounds {
            // Which table goes first alternates, so drift hits both.
            let order = index % 2 == 0 ? ["bench_captured", "bench_plain"] : ["bench_plain", "bench_captured"]
            for table in order {
                if table == "bench_captured" {
                    try round(&captured, n) { raw_single_row_updates(raw, table, Int32(n), 1000) }
                    try round(&capturedBulk, bulk) { raw_repeat_statement(raw, "UPDATE bench_captured SET n = n + 1", Int32(bulk)) }
                } else {
                    try round(&plain, n) { raw_single_row_updates(raw, table, Int32(n), 1000) }
                    try round(&plainBulk, bulk) { raw_repeat_statement(raw, "UPDATE bench_plain SET n = n + 1", Int32(bulk)) }
                }
            }
        }
        report.add("Capture's cost to a writer outside Skyros: autocommit one-row UPDATE (raw libpq), captured table vs the same table uncaptured", microseconds(plain.median), microseconds(captured.median), ratio(captured.median, plain.median), "—")
        report.add("The same, one UPDATE of 1,000 rows per transaction", milliseconds(plainBulk.median), milliseconds(capturedBulk.median), ratio(capturedBulk.median, plainBulk.median), "—")
    }

    /// Durable single write vs raw autocommit INSERT (and vs the same transaction in raw libpq; and without the
    /// change feed: no change-log row, no NOTIFY, no listener — what announcing costs).
    func durable(stack: DataStack, raw: OpaquePointer, nextID: inout Int, into report: inout Report) async throws {
        let quiet = try await self.stackWithoutChangeFeed()
        var rawInsert = Measurement()
        var rawPolledInsert = Measurement()
        var rawDurable = Measurement()
        var rawQuietDurable = Measurement()
        var durable = Measurement()
        var quietDurable = Measurement()
        let n = max(200, self.iterations / 4)
        var rawID: Int64 = 1_000_000
        func rawRound(_ run: (OpaquePointer, Int32, Int64) -> Int64, _ name: String, into measurement: inout Measurement) throws {
            let ns = run(raw, Int32(n), rawID)
            guard ns > 0 else { throw BenchmarkFailure(description: "raw \(name) failed") }
            rawID += Int64(n)
            measurement.add(totalNanoseconds: ns, operations: n)
        }
        func stackRound(_ stack: DataStack, into measurement: inout Measurement) async throws {
            let first = nextID
            measurement.add(totalNanoseconds: try await elapsedNanoseconds {
                for i in 0..<n {
                    try await stack.write(durability: .committed) { try $0.insert(BenchInsertRow(id: first + i, name: "benchmark row")) }
                }
            }, operations: n)
            nextID += n
        }
        // Issue 26: the same durable write when a column the database sets comes back by RETURNING.
        var owned = Measurement()
        var ownedPlain = Measurement()
        func ownedRound<T: Entity>(_ make: @escaping @Sendable (Int) -> T, into measurement: inout Measurement) async throws {
            let first = nextID
            measurement.add(totalNanoseconds: try await elapsedNanoseconds {
                for i in 0..<n {
                    try await stack.write(durability: .committed) { try $0.insert(make(first + i)) }
                }
            }, operations: n)
            nextID += n
        }
        for round in 0..<self.rounds {
            // Alternating which goes first, so drift hits both.
            let now = Date()
            if round % 2 == 0 {
                try await ownedRound({ BenchOwnedRow(id: $0, name: "benchmark row", created_at: now) }, into: &owned)
                try await ownedRound({ BenchOwnedPlainRow(id: $0, name: "benchmark row", created_at: now) }, into: &ownedPlain)
            } else {
                try await ownedRound({ BenchOwnedPlainRow(id: $0, name: "benchmark row", created_at: now) }, into: &ownedPlain)
                try await ownedRound({ BenchOwnedRow(id: $0, name: "benchmark row", created_at: now) }, into: &owned)
            }
            try rawRound(raw_inserts, "insert", into: &rawInsert)
            // The same INSERT busy-polling for its reply as Skyros's connections do (PGConfiguration.busyPoll).
            raw_set_busy_poll(raw, defaultBusyPollNanoseconds)
            try rawRound(raw_inserts, "polled insert", into: &rawPolledInsert)
            raw_set_busy_poll(raw, 0)
            try rawRound({ raw_durable_transactions($0, $1, $2, 1) }, "durable transaction", into: &rawDurable)
            try rawRound({ raw_durable_transactions($0, $1, $2, 0) }, "durable transaction without the change log", into: &rawQuietDurable)
            try await stackRound(stack, into: &durable)
            try await stackRound(quiet, into: &quietDurable)
        }
        await quiet.shutdown()
        report.add("Durable single write without the change feed vs raw autocommit INSERT", microseconds(rawInsert.median), microseconds(quietDurable.median), ratio(quietDurable.median, rawInsert.median), "—")
        report.add("Durable single write without the change feed vs the same transaction by raw libpq (the INSERT and the commit-id row, one pipeline)", microseconds(rawQuietDurable.median), microseconds(quietDurable.median), ratio(quietDurable.median, rawQuietDurable.median), "—")
        report.add("Durable single write vs raw autocommit INSERT", microseconds(rawInsert.median), microseconds(durable.median), ratio(durable.median, rawInsert.median), "≤ 1.3×")
        report.add("Durable single write vs raw autocommit INSERT busy-polling like Skyros", microseconds(rawPolledInsert.median), microseconds(durable.median), ratio(durable.median, rawPolledInsert.median), "—")
        report.add("Durable single write vs the same transaction sent by raw libpq (one pipeline)", microseconds(rawDurable.median), microseconds(durable.median), ratio(durable.median, rawDurable.median), "—")
        report.add("Durable single write reading back a DEFAULT now() column (RETURNING) vs the same row with the column written", microseconds(ownedPlain.median), microseconds(owned.median), ratio(owned.median, ownedPlain.median), "≤ 1.05×")
        // No Skyros code in this row: what the durable write's transaction costs against the target's baseline
        // when C sends it (the third column holds that C figure).
        report.add("Floor (no Skyros code): the same transaction by raw libpq vs raw autocommit INSERT", microseconds(rawInsert.median), microseconds(rawDurable.median), ratio(rawDurable.median, rawInsert.median), "—")
    }

    /// Commit in one stack → observer event in another stack (own pool, own listener), vs raw LISTEN/NOTIFY; then
    /// again with a writer whose hints carry updated rows (`includesRowsInHints`), against baselines measured
    /// again beside it (that writer's listener is one more backend every NOTIFY signals).
    func observe(stack: DataStack, config: PGConfiguration, raw: OpaquePointer, into report: inout Report) async throws {
        // The observing stack runs in another OS process, as in a deployment of several instances; it stamps
        // each observed value with CLOCK_MONOTONIC, which this process reads too.
        let observerProcess = try ObserverProcess(url: self.url, ids: [1, 2, 3])
        var observed = observerProcess.observations.makeAsyncIterator()
        var initial: Set<Int> = []
        while initial.count < 3, let first = await observed.next() { initial.insert(first.id) }
        guard initial.count == 3 else { throw BenchmarkFailure(description: "the observer process did not start") }
        let listener = try await PGListener.start(configuration: config, channels: ["skyros_bench"])
        let clock = ContinuousClock()
        let (notifiedArrivals, notifiedArrival) = AsyncStream.makeStream(of: (payload: String, at: ContinuousClock.Instant).self)
        let listening = Task {
            for await event in listener.events {
                if case .notification(let note) = event { notifiedArrival.yield((note.payload, clock.now)) }
            }
        }
        var notified = notifiedArrivals.makeAsyncIterator()
        let notifier = try await PGConnection.connect(to: config)
        // The same work by hand (transaction with NOTIFY, notification, re-read), from C on one thread.
        guard let rawWriter = raw_connect(self.url), let rawObserver = raw_connect(self.url) else {
            throw BenchmarkFailure(description: "raw connect failed")
        }
        defer {
            raw_finish(rawWriter)
            raw_finish(rawObserver)
        }
        guard raw_observe_prepare(rawWriter, rawObserver) == 0 else { throw BenchmarkFailure(description: "raw observer setup failed") }
        let samples = max(200, self.iterations / 4)
        // Rounds run first and not counted, in each phase: the first events after a start pay one-time costs on
        // every side (statements prepared, caches and maps filled), 0.5-5 ms each for the first five, and with
        // 500 samples those five alone would be the p99.
        let warmUp = max(20, samples / 10)
        var sample = 0

        /// One phase: `write` sets row `id` to a value, observed in the observer process, interleaved with the
        /// baselines. Returns the phase's p50 and p99 (ns).
        @discardableResult
        func phase(
            writer: DataStack, id: Int, label: String, target: String,
            write: ((Int) async throws -> Void)? = nil
        ) async throws -> (p50: Double, p99: Double) {
            var sameWorkLatencies: [Duration] = []
            var rawLatencies: [Duration] = []
            var stackLatencies: [Duration] = []
            var writeLatencies: [Duration] = []
            var warmUpLatencies: [Duration] = []
            var cacheBefore = writer.cacheStatistics
            for i in 1...(warmUp + samples) {
                if i == warmUp + 1 {
                    // Counting starts here.
                    warmUpLatencies = stackLatencies
                    (sameWorkLatencies, rawLatencies, stackLatencies, writeLatencies) = ([], [], [], [])
                    cacheBefore = writer.cacheStatistics
                }
                sample += 1
                let t0 = clock.now
                try await notifier.query("SELECT pg_notify('skyros_bench', \(String(sample)))")
                while let arrival = await notified.next() {
                    if arrival.payload == String(sample) {
                        rawLatencies.append(arrival.at - t0)
                        break
                    }
                }

                let t1 = monotonicNanoseconds()
                if let write {
                    try await write(i)
                } else {
                    try await writer.write(durability: .committed) { context in
                        try await context.update(BenchCounter(id: id, n: i))
                    }
                }
                writeLatencies.append(.nanoseconds(Int64(monotonicNanoseconds() - t1)))
                while let arrival = await observed.next() {
                    if arrival.id == id, arrival.n == i {
                        stackLatencies.append(.nanoseconds(Int64(arrival.nanoseconds) - Int64(t1)))
                        break
                    }
                }

                // Last in the round: its NOTIFY wakes every listening backend, which slowed a stack sample taken
                // right after it.
                let sameWork = raw_observe_once(rawWriter, rawObserver, Int64(sample))
                guard sameWork > 0 else { throw BenchmarkFailure(description: "raw observer sample failed") }
                sameWorkLatencies.append(.nanoseconds(sameWork))
            }
            func percentile(_ values: [Duration], _ p: Double) -> Double {
                let sorted = values.sorted()
                let d = sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
                return Double(d.components.seconds) * 1e9 + Double(d.components.attoseconds) / 1e9
            }
            if ProcessInfo.processInfo.environment["SKYROS_BENCH_DEBUG"] != nil {
                let sorted = stackLatencies.sorted().map { Int(percentileMicroseconds($0)) }
                let rawSorted = rawLatencies.sorted().map { Int(percentileMicroseconds($0)) }
                let writes = writeLatencies.sorted().map { Int(percentileMicroseconds($0)) }
                let cache = writer.cacheStatistics
                FileHandle.standardError.write(Data("""
                    [\(label)] write p50 \(writes[writes.count / 2]) tail: \(writes.suffix(12))
                    stack tail: \(sorted.suffix(12))
                    stack warm-up rounds (not counted), slowest: \(warmUpLatencies.sorted().suffix(8).map { Int(percentileMicroseconds($0)) })
                    raw tail: \(rawSorted.suffix(12))
                    writer's cache: \(cache.hits - cacheBefore.hits) hits, \(cache.misses - cacheBefore.misses) misses

                    """.utf8))
            }
            let (rawP50, rawP99) = (percentile(rawLatencies, 0.5), percentile(rawLatencies, 0.99))
            let (stackP50, stackP99) = (percentile(stackLatencies, 0.5), percentile(stackLatencies, 0.99))
            let (sameP50, sameP99) = (percentile(sameWorkLatencies, 0.5), percentile(sameWorkLatencies, 0.99))
            report.add("Commit → observer in another process\(label), p50", microseconds(rawP50), microseconds(stackP50), ratio(stackP50, rawP50), "—")
            report.add("Commit → observer in another process\(label), p99", microseconds(rawP99), microseconds(stackP99), ratio(stackP99, rawP99), target)
            report.add("Commit → observer\(label), vs the same work by raw libpq (the transaction with NOTIFY, then re-reading the row), p50", microseconds(sameP50), microseconds(stackP50), ratio(stackP50, sameP50), "—")
            report.add("Commit → observer\(label), vs the same work by raw libpq, p99", microseconds(sameP99), microseconds(stackP99), ratio(stackP99, sameP99), "—")
            if label.isEmpty {
                // No Skyros code in this row: the same work done by hand in C against the target's baseline (the
                // third column holds that C figure).
                report.add("Floor (no Skyros code): the same work by raw libpq vs raw NOTIFY, p99", microseconds(rawP99), microseconds(sameP99), ratio(sameP99, rawP99), "—")
            }
            return (stackP50, stackP99)
        }

        let own = try await phase(writer: stack, id: 1, label: "", target: "p99 ≤ 2× raw")
        // A writer outside Skyros (psql, a job in another language): an autocommit UPDATE from raw libpq, which the
        // capture's triggers announce.
        let foreign = try await phase(
            writer: stack, id: 3, label: " (writer: psql-style raw libpq UPDATE, no Skyros)", target: "—",
            write: { value in
                guard raw_update_counter(raw, 3, Int64(value)) > 0 else { throw BenchmarkFailure(description: "raw update failed") }
            })
        report.add("psql-style write → observer vs a Skyros durable write → observer (same run), p50", microseconds(own.p50), microseconds(foreign.p50), ratio(foreign.p50, own.p50), "—")
        report.add("psql-style write → observer vs a Skyros durable write → observer (same run), p99", microseconds(own.p99), microseconds(foreign.p99), ratio(foreign.p99, own.p99), "—")
        var rowsConfiguration = DataStackConfiguration(store: .postgres(config), entities: [BenchCounter.self]).benchmarkCaptureSource()
        rowsConfiguration.changeFeed.includesRowsInHints = true
        let rowsWriter = try await DataStack.start(rowsConfiguration, logger: benchmarkLogger)
        try await phase(writer: rowsWriter, id: 2, label: " (hints carrying rows: the observer refreshes, no re-read)", target: "—")
        await rowsWriter.shutdown()
        listening.cancel()
        listener.stop()
        await notifier.close()
        observerProcess.stop()
    }
}

private func percentileMicroseconds(_ d: Duration) -> Double {
    Double(d.components.seconds) * 1e6 + Double(d.components.attoseconds) / 1e12
}
