import CoreMetrics
import Foundation
import MetricsTestKit
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// The swift-metrics backend of this test process: bootstrapped once, before the stacks these tests create
/// (stacks created earlier by other suites keep the no-op backend). `TestMetrics` keeps one counter per label,
/// adding up every stack created after it (other suites run in parallel), so the tests compare increments and
/// check the stack's own count too: the counters behind a stack's statistics are the ones reported.
enum RecordedMetrics {
    static let shared: TestMetrics = {
        let metrics = TestMetrics()
        MetricsSystem.bootstrap(metrics)
        return metrics
    }()

    static func total(_ label: String) -> Int64 {
        self.shared.counters(label: label).reduce(0) { $0 + $1.totalValue }
    }
}

@Suite("Metrics", .serialized)
struct MetricsTests {
    @Test("the commit queue reports sets, batch sizes, latency, queue depth and conflicts to swift-metrics")
    func commitQueueMetrics() async throws {
        let metrics = RecordedMetrics.shared
        let label = [("stack", "metrics-commit-queue")]
        try await StackTestServer.withQueueStack({ $0.name = "metrics-commit-queue" }) { stack in
            let sets = RecordedMetrics.total("skyros.commit.sets")
            let conflicts = RecordedMetrics.total("skyros.commit.conflicts")
            for id in 1...50 { try await stack.write { try $0.insert(note(id)) } }
            try await stack.write(durability: .committed) { try $0.insert(note(51)) }
            #expect(RecordedMetrics.total("skyros.commit.sets") - sets >= 51)
            #expect(stack.commitQueueStatistics.sets == 51)
            #expect(metrics.counters(label: "skyros.commit.sets", dimensions: label).reduce(0) { $0 + $1.totalValue } == 51)
            #expect(try metrics.expectRecorder("skyros.commit.batch_size", label).values.contains { $0 >= 1 })
            #expect(try metrics.expectTimer("skyros.commit.latency", label).values.contains { $0 > 0 })
            #expect(try !metrics.expectGauge("skyros.commit.queue_depth", label).values.isEmpty)

            // A write from a read that another writer overtakes before it commits: a version conflict.
            _ = await thrownError {
                try await stack.write(durability: .committed) { context in
                    var changed = try #require(try await context.object(StackNote.self, id: 1))
                    try await StackTestServer.execute(stack, "UPDATE stack_notes SET title = 'outside' WHERE id = 1")
                    changed.title = "stale"
                    try await context.update(changed)
                }
            }
            #expect(RecordedMetrics.total("skyros.commit.conflicts") - conflicts >= 1)
            #expect(stack.commitQueueStatistics.conflicts == 1)
        }
    }

    @Test("the change feed reports applied entries, refreshed rows, listener reads, log reads and catch-ups to swift-metrics")
    func changeFeedMetrics() async throws {
        _ = RecordedMetrics.shared
        try await StackTestServer.withQueueStack({ $0.changeFeed.includesRowsInHints = true }) { writer in
            let store = try #require(writer.store as? PostgresStore)
            var readerConfiguration = DataStackConfiguration(
                store: .postgres(try TestServer.configuration, schema: store.schema), entities: [StackNote.self])
            // No horizon read on its own schedule: racing a hint, it would deliver the log's copy of the entry
            // (no rows) first, and the row would be evicted instead of refreshed.
            readerConfiguration.changeFeed.horizonReadInterval = .seconds(3600)
            let reader = try await DataStack.start(readerConfiguration)
            let entries = RecordedMetrics.total("skyros.feed.entries")
            let catchUps = RecordedMetrics.total("skyros.feed.catch_ups")
            let reads = RecordedMetrics.total("skyros.feed.log_reads")
            try await writer.write(durability: .committed) { try $0.insert(note(1)) }
            await expectEventually { RecordedMetrics.total("skyros.feed.entries") - entries >= 1 }
            await expectEventually { reader.changeFeedStatistics.remoteEntries >= 1 }

            // The reader caches the row; the writer's guarded update announces it whole: refreshed, not evicted.
            let refreshed = RecordedMetrics.total("skyros.feed.refreshed_rows")
            #expect(try await reader.mainContext.object(StackNote.self, id: 1) == note(1))
            try await writer.write(durability: .committed) { try await $0.update(note(1, rank: 10)) }
            await expectEventually { RecordedMetrics.total("skyros.feed.refreshed_rows") - refreshed >= 1 }
            await expectEventually { reader.changeFeedStatistics.refreshedRows == 1 }
            #expect(try await reader.mainContext.object(StackNote.self, id: 1)?.rank == 10)

            // A stack whose hints carry no rows updates the row an observer of the reader watches: the reader's
            // listener reads it again.
            let plain = try await DataStack.start(DataStackConfiguration(
                store: .postgres(try TestServer.configuration, schema: store.schema), entities: [StackNote.self]))
            let listenerReads = RecordedMetrics.total("skyros.feed.listener_reads")
            var observed = reader.observe(StackNote.self, id: 1).makeAsyncIterator()
            #expect(try await observed.next()??.rank == 10)
            try await plain.write(durability: .committed) { try await $0.update(note(1, rank: 20)) }
            // The reader's own count first: the recorded total is the process's, which other tests' stacks add to.
            await expectEventually { reader.changeFeedStatistics.rowsReadByListener >= 1 }
            await expectEventually { RecordedMetrics.total("skyros.feed.listener_reads") - listenerReads >= 1 }
            #expect(reader.changeFeedStatistics.rowsReadByListener == 1)
            #expect(try await observed.next()??.rank == 20)
            await plain.shutdown()

            // The reader's listener loses its connection: it reconnects and catches up from the log.
            let listener = try #require(reader.changeFeedApplicationName)
            let terminated = try await ManyProcessHarness.terminateListener(applicationName: listener)
            #expect(terminated == 1)
            await expectEventually(within: .seconds(30)) { RecordedMetrics.total("skyros.feed.catch_ups") - catchUps >= 1 }
            await expectEventually(within: .seconds(30)) { reader.changeFeedStatistics.catchUps >= 1 }
            // The catch-up is counted when it starts; its read, when it is done.
            await expectEventually { RecordedMetrics.total("skyros.feed.log_reads") - reads >= 1 }
            await reader.shutdown()
        }
    }

    /// Rows from this stack against rows from other writers, and the lag from commit to the cache, with a
    /// plain session (as psql) as the other writer: a one-row update (its entry in the hint) and a 40-row insert
    /// (too large for the hint: the log is read).
    @Test("the change feed reports own and other writers' rows and the lag from commit to the cache")
    func captureMetrics() async throws {
        let metrics = RecordedMetrics.shared
        let label = [("stack", "metrics-capture")]
        try await StackTestServer.withQueueStack({ $0.name = "metrics-capture" }) { stack in
            let other = RecordedMetrics.total("skyros.feed.other_rows")
            let own = RecordedMetrics.total("skyros.feed.own_rows")
            let lagSamples = (try? metrics.expectTimer("skyros.feed.apply_lag", label).values.count) ?? 0

            // This stack's own write: two rows in one transaction, named as its own by the capture.
            try await stack.write(durability: .committed) { context in
                try context.insert(note(1))
                try context.insert(note(2))
            }
            await expectEventually { stack.changeFeedStatistics.ownRows == 2 }
            #expect(RecordedMetrics.total("skyros.feed.own_rows") - own >= 2)

            // Another writer's one-row update: applied from its hint, with its commit time.
            #expect(try await stack.mainContext.object(StackNote.self, id: 1)?.rank == 1)
            try await StackTestServer.execute(stack, "UPDATE stack_notes SET rank = 100 WHERE id = 1")
            // The rows are counted before the entry's lag is recorded: wait for both.
            await expectEventually {
                let statistics = stack.changeFeedStatistics
                return statistics.otherRows == 1 && statistics.applyLagSamples == 1
            }
            #expect(try await stack.mainContext.object(StackNote.self, id: 1)?.rank == 100)

            // Another writer's 40 rows in one statement: the hint cannot carry them, the log is read.
            let reads = stack.changeFeedStatistics.reads
            try await StackTestServer.execute(
                stack, "INSERT INTO stack_notes (id, title, rank) SELECT g, 'bulk', g FROM generate_series(100, 139) AS g")
            await expectEventually {
                let statistics = stack.changeFeedStatistics
                return statistics.otherRows == 41 && statistics.applyLagSamples == 2
            }
            let statistics = stack.changeFeedStatistics
            #expect(statistics.reads > reads)
            #expect(statistics.ownRows == 2, "another writer's rows are not this stack's")
            // Same machine, so the two clocks agree: the lag is real and short.
            #expect(statistics.latestApplyLag > .zero && statistics.latestApplyLag < .seconds(30))
            #expect(statistics.averageApplyLag > .zero && statistics.averageApplyLag < .seconds(30))
            #expect(RecordedMetrics.total("skyros.feed.other_rows") - other >= 41)
            let lags = try metrics.expectTimer("skyros.feed.apply_lag", label).values
            #expect(lags.count >= lagSamples + 2)
            // A sample is never negative.
            #expect(lags.allSatisfy { $0 >= 0 })
        }
    }
}

/// Two stacks in one process, into one backend of the test's own (`DataStackConfiguration.metricsFactory`: no
/// process-wide bootstrap): every metric carries its stack's `stack` dimension — the configured name, else the
/// schema — and each stack's pool reports its gauges, lease waits and statements under it.
@Suite("Stack metrics labels", .timeLimit(.minutes(2)))
struct StackMetricsLabelTests {
    @Test("two stacks report under their own stack label; the pool's gauges and timers carry it too")
    func twoStacksAreToldApart() async throws {
        let metrics = TestMetrics()
        try await StackTestServer.withQueueStack({ $0.name = "alpha"; $0.metricsFactory = metrics }) { alpha in
            try await StackTestServer.withQueueStack({ $0.metricsFactory = metrics }) { other in
                let schema = try #require((other.store as? PostgresStore)?.schema)
                for id in 1...3 { try await alpha.write(durability: .committed) { try $0.insert(note(id)) } }
                for id in 1...2 { try await other.write(durability: .committed) { try $0.insert(note(id)) } }

                func total(_ label: String, _ stack: String) -> Int64 {
                    metrics.counters(label: label, dimensions: [("stack", stack)]).reduce(0) { $0 + $1.totalValue }
                }
                #expect(total("skyros.commit.sets", "alpha") == 3)
                #expect(total("skyros.commit.sets", schema) == 2, "the default name is the schema")
                #expect(metrics.counters(label: "skyros.commit.sets").count == 2, "one counter per stack, none unlabelled")

                let alphaPool = [("stack", "alpha"), ("pool", "primary")]
                #expect(try metrics.expectGauge("skyros.pool.leased", alphaPool).values.contains { $0 >= 1 })
                #expect(try metrics.expectGauge("skyros.pool.idle", alphaPool).values.contains { $0 >= 1 })
                #expect(try metrics.expectGauge("skyros.pool.waiters", alphaPool).lastValue != nil)
                #expect(try !metrics.expectTimer("skyros.pool.lease_wait", alphaPool).values.isEmpty)
                #expect(try !metrics.expectGauge("skyros.pool.leased", [("stack", schema), ("pool", "primary")]).values.isEmpty)
                let statements = metrics.timers.filter { $0.label == "skyros.pg.statement" }
                #expect(statements.contains { timer in timer.dimensions.contains { $0 == ("stack", "alpha") } })
                #expect(statements.allSatisfy { timer in timer.dimensions.contains { $0.0 == "operation" } })

                // Every metric the stacks made carries a stack dimension: nothing is shared between them.
                let all = metrics.counters.map { ($0.label, $0.dimensions) } + metrics.timers.map { ($0.label, $0.dimensions) }
                    + metrics.recorders.map { ($0.label, $0.dimensions) }
                let unlabelled = all
                    .filter { _, dimensions in !dimensions.contains { $0.0 == "stack" } }
                #expect(unlabelled.isEmpty, "\(unlabelled.map(\.0))")
                #expect(try !metrics.expectCounter("skyros.feed.log_reads", [("stack", "alpha")]).values.isEmpty)
            }
        }
    }
}
