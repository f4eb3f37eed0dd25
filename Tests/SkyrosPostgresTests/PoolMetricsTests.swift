import Foundation
import Logging
import Metrics
import MetricsTestKit
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// The pool's swift-metrics, into a backend of the test's own (no process-wide bootstrap): the gauges follow
/// leases, idle connections and waiters; each lease's wait and each statement's duration are recorded, all
/// with the pool's dimensions.
@Suite("Pool metrics", .timeLimit(.minutes(2)))
struct PoolMetricsTests {
    static let dimensions = [("stack", "pool-metrics"), ("pool", "primary")]

    @Test("leased, idle and waiters gauges, the lease wait and statement timers, with the pool's dimensions")
    func gaugesAndTimersFollowThePool() async throws {
        let metrics = TestMetrics()
        let pool = PGConnectionPool(
            configuration: .init(maximumConnections: 1, leaseTimeout: .seconds(120)), postgres: try TestServer.configuration,
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
            metrics: MetricsScope(dimensions: Self.dimensions, factory: metrics))
        let leased = try metrics.expectGauge("skyros.pool.leased", Self.dimensions)
        let idle = try metrics.expectGauge("skyros.pool.idle", Self.dimensions)
        let waiters = try metrics.expectGauge("skyros.pool.waiters", Self.dimensions)
        // Reported from the start.
        #expect(leased.lastValue == 0 && idle.lastValue == 0 && waiters.lastValue == 0)

        let held = try await pool.lease()
        #expect(leased.lastValue == 1)
        // A second caller waits for the only connection.
        let waiting = Task { try await pool.withConnection { try await $0.query("SELECT 41 + 1")[0].decode(Int.self, at: 0) } }
        #expect(await expectEventually { waiters.lastValue == 1 })
        await pool.release(held)
        #expect(try await waiting.value == 42)
        #expect(await expectEventually { leased.lastValue == 0 && idle.lastValue == 1 && waiters.lastValue == 0 })
        #expect(pool.statistics.waiting == 0)

        // One wait per lease: the first (opened a connection) and the waiter's.
        #expect(try metrics.expectTimer("skyros.pool.lease_wait", Self.dimensions).values.count == 2)
        let statements = try metrics.expectTimer("skyros.pg.statement", Self.dimensions + [("operation", "SELECT")])
        #expect(statements.values.count >= 1)
        // The statement's text and values are in no metric.
        #expect(metrics.timers.allSatisfy { timer in !timer.dimensions.contains { $0.1.contains("41") } })
        await pool.shutdown()
    }

    @Test("a pipeline is timed as one statement of operation PIPELINE")
    func pipelineIsOneStatement() async throws {
        let metrics = TestMetrics()
        let pool = PGConnectionPool(
            configuration: .init(maximumConnections: 1), postgres: try TestServer.configuration,
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
            metrics: MetricsScope(dimensions: Self.dimensions, factory: metrics))
        let rows = try await pool.withConnection { try await $0.pipeline(["SELECT 1", "SELECT 2", "SELECT 3"]) }
        #expect(rows.count == 3)
        #expect(try metrics.expectTimer("skyros.pg.statement", Self.dimensions + [("operation", "PIPELINE")]).values.count == 1)
        await pool.shutdown()
    }
}
