import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

@Suite("PGConnectionPool")
struct ConnectionPoolTests {
    @Test func twoHundredTasksThroughEightConnections() async throws {
        // A generous lease timeout: this checks sharing, not speed (a loaded machine takes seconds here).
        let pool = PGConnectionPool(
            configuration: .init(maximumConnections: 8, leaseTimeout: .seconds(120)), postgres: try TestServer.configuration)
        let sum = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<200 {
                group.addTask {
                    try await pool.withConnection { connection in
                        try await connection.query("SELECT \(i)::int8, pg_sleep(0.005)")[0].decode(Int.self, at: 0)
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(sum == (0..<200).reduce(0, +))
        let stats = pool.statistics
        #expect(stats.inUse == 0)
        #expect(stats.idle <= 8)
        #expect(stats.opened <= 8)
        #expect(stats.waiting == 0)
        await pool.shutdown()
    }

    @Test func exhaustedPoolFailsWithLeaseTimeout() async throws {
        let pool = PGConnectionPool(
            configuration: .init(maximumConnections: 2, leaseTimeout: .milliseconds(300)),
            postgres: try TestServer.configuration)
        let first = try await pool.lease()
        let second = try await pool.lease()
        #expect(pool.statistics.inUse == 2)
        let clock = ContinuousClock()
        let start = clock.now
        let error = await #expect(throws: PGError.self) { try await pool.withConnection { _ in } }
        #expect(error?.kind == .poolTimeout)
        #expect(error?.message.contains("no connection became available") == true)
        // Not a hang (a bound, not a timing: under ThreadSanitizer beside the parallel suite this took 5.7 s).
        #expect(clock.now - start < .seconds(60))
        #expect(pool.statistics.leaseTimeouts == 1)
        // Releasing hands the connection to the next waiter.
        let waiter = Task { try await pool.withConnection { try await $0.query("SELECT 1")[0].decode(Int.self, at: 0) } }
        await expectEventually { pool.statistics.waiting == 1 }
        await pool.release(first)
        #expect(try await waiter.value == 1)
        await pool.release(second)
        await pool.shutdown()
        await #expect(throws: PGError.self) { try await pool.withConnection { _ in } }
    }

    @Test func cancellingAWaitingLeaseFailsWithQueryCancelled() async throws {
        let pool = PGConnectionPool(
            configuration: .init(maximumConnections: 1, leaseTimeout: .seconds(120)), postgres: try TestServer.configuration)
        let held = try await pool.lease()
        let waiter = Task { try await pool.withConnection { _ in } }
        #expect(await expectEventually { pool.statistics.waiting == 1 })
        waiter.cancel()
        // Long before the lease timeout: the cancellation ends the wait.
        let error = await #expect(throws: PGError.self) { try await waiter.value }
        #expect(error?.kind == .queryCancelled)
        #expect(pool.statistics.waiting == 0)
        #expect(pool.statistics.leaseTimeouts == 0)
        await pool.release(held)
        #expect(try await pool.withConnection { try await $0.query("SELECT 1")[0].decode(Int.self, at: 0) } == 1)
        await pool.shutdown()
    }

    @Test func waitersAreServedInArrivalOrder() async throws {
        let order = Locked<[Int]>([])
        var waiters: [Task<Void, any Error>] = []
        // A timeout no loaded machine reaches while the three waiters queue: this test is about their order.
        let pool = PGConnectionPool(configuration: .init(maximumConnections: 1, leaseTimeout: .seconds(120)), postgres: try TestServer.configuration)
        let held = try await pool.lease()
        for i in 0..<3 {
            waiters.append(Task {
                try await pool.withConnection { _ in order.withLock { $0.append(i) } }
            })
            #expect(await expectEventually { pool.statistics.waiting == i + 1 })
        }
        await pool.release(held)
        for waiter in waiters { try await waiter.value }
        #expect(order.withLock { $0 } == [0, 1, 2])
        #expect(pool.statistics.leaseTimeouts == 0)
        await pool.shutdown()
    }

    @Test func aServedWaiterDoesNotTimeOutAfterwards() async throws {
        // One waiter, released as soon as it queued; the check then outlasts its timeout, so a timer left
        // armed would fire and count.
        let leaseTimeout = Duration.seconds(5)
        let pool = PGConnectionPool(configuration: .init(maximumConnections: 1, leaseTimeout: leaseTimeout), postgres: try TestServer.configuration)
        let held = try await pool.lease()
        let queued = ContinuousClock.now
        let waiter = Task { try await pool.withConnection { _ in } }
        #expect(await expectEventually { pool.statistics.waiting == 1 })
        await pool.release(held)
        try await waiter.value
        let pastTheTimeout = queued + leaseTimeout + .milliseconds(500) - ContinuousClock.now
        #expect(await eventually(within: max(pastTheTimeout, .milliseconds(500))) { pool.statistics.leaseTimeouts != 0 } == false)
        await pool.shutdown()
    }

    @Test func transactionCommitsOrRollsBack() async throws {
        try await TestServer.withSchema { schema in
            let pool = PGConnectionPool(configuration: .init(maximumConnections: 2), postgres: try TestServer.configuration)
            try await pool.withConnection { try await $0.execute(script: "CREATE TABLE \(quoteIdentifier(schema)).t (n int)") }
            struct Boom: Error {}
            await #expect(throws: Boom.self) {
                try await pool.withTransaction { try await $0.query("INSERT INTO \(qualified: [schema, "t"]) VALUES (1)"); throw Boom() }
            }
            try await pool.withTransaction(isolation: .repeatableRead) {
                try await $0.query("INSERT INTO \(qualified: [schema, "t"]) VALUES (2)")
            }
            let values = try await pool.withConnection { try await $0.query("SELECT n FROM \(qualified: [schema, "t"])") }
            #expect(try values.map { try $0.decode(Int.self, at: 0) } == [2])
            await pool.shutdown()
        }
    }

    @Test func droppedIdleConnectionIsReplacedTransparently() async throws {
        let pool = PGConnectionPool(configuration: .init(maximumConnections: 1), postgres: try TestServer.configuration)
        let pid = try await pool.withConnection { await $0.backendPID }
        let admin = try await TestServer.connect()
        try await admin.query("SELECT pg_terminate_backend(\(pid))")
        try await expectEventually {
            try await admin.query("SELECT count(*) FROM pg_stat_activity WHERE pid = \(Int(pid))")[0].decode(Int.self, at: 0) == 0
        }
        let newPID = try await pool.withConnection { connection in
            _ = try await connection.query("SELECT 1")
            return await connection.backendPID
        }
        #expect(newPID != pid)
        await admin.close()
        await pool.shutdown()
    }

    /// An idle connection leased at once (the commit queue's drain starts on its thread) is checked before use:
    /// a dropped one is discarded and another leased; with none idle there is nothing to lease at once.
    @Test func anIdleConnectionLeasedAtOnceIsCheckedAndReturned() async throws {
        let pool = PGConnectionPool(configuration: .init(maximumConnections: 2), postgres: try TestServer.configuration)
        #expect(pool.leaseIdleNow() == nil, "nothing is idle before the first lease")
        let pid = try await pool.withConnection { await $0.backendPID }
        let leased = try #require(pool.leaseIdleNow())
        #expect(pool.statistics.inUse == 1 && pool.statistics.idle == 0)
        #expect(try await pool.withConnection(leased: leased) { await $0.backendPID } == pid)
        #expect(pool.statistics.inUse == 0 && pool.statistics.idle == 1)

        // Dropped while idle: the check finds it closed, and the body runs on a new connection.
        try await TestServer.withConnection { admin in
            try await admin.query("SELECT pg_terminate_backend(\(pid))")
            try await expectEventually {
                try await admin.query("SELECT count(*) FROM pg_stat_activity WHERE pid = \(Int(pid))")[0].decode(Int.self, at: 0) == 0
            }
        }
        let dropped = try #require(pool.leaseIdleNow())
        let other = try await pool.withConnection(leased: dropped) { connection in
            try await connection.query("SELECT pg_backend_pid()")[0].decode(Int.self, at: 0)
        }
        #expect(other != Int(pid))
        #expect(pool.statistics.closed == 1 && pool.statistics.inUse == 0 && pool.statistics.idle == 1)
        await pool.shutdown()
        #expect(pool.leaseIdleNow() == nil, "a shut pool leases nothing")
    }

    @Test func idleConnectionsAboveMinimumAreClosedByRun() async throws {
        let pool = PGConnectionPool(
            configuration: .init(minimumConnections: 1, maximumConnections: 4, idleTimeout: .milliseconds(100), healthCheckInterval: .milliseconds(50)),
            postgres: try TestServer.configuration)
        // Count open connections, not idle ones: run()'s health check leases an idle connection for a moment
        // every 50 ms, and under load a poll can keep landing inside that window.
        func open(_ statistics: PGConnectionPool.Statistics) -> Int { statistics.opened - statistics.closed }
        let runner = Task { try await pool.run() }
        await expectEventually(within: .seconds(30), "run() opens the minimum") { open(pool.statistics) == 1 }
        try await holdAtOnce(4, connectionsOf: pool)
        #expect(pool.statistics.opened == 4, "the four leases held at once opened three above the minimum")
        await expectEventually(within: .seconds(30), "idle connections above the minimum close") {
            open(pool.statistics) == 1
        }
        runner.cancel()
        _ = await runner.result
        #expect(pool.statistics.idle == 0)
    }
}

extension ConnectionPoolTests {
    /// A health check of an idle connection that ends after `shutdown()` must close the connection, not put it
    /// back among the idle ones (where nothing would ever close it). The check is held up deterministically: the
    /// connection's thread is busy with a statement waiting for an advisory lock the test holds.
    @Test(.timeLimit(.minutes(1))) func aHealthCheckThatEndsAfterShutdownClosesTheConnection() async throws {
        let pool = PGConnectionPool(
            configuration: .init(maximumConnections: 1, healthCheckInterval: .zero), postgres: try TestServer.configuration)
        let connection = try await pool.withConnection { $0 }
        #expect(pool.statistics.idle == 1)
        let key = Int.random(in: 1...1_000_000_000)
        try await TestServer.withConnection { locker in
            try await locker.query("SELECT pg_advisory_lock(\(key))")
            let pid = await connection.backendPID
            // Occupies the idle connection's thread (as a long statement would) until the lock is released.
            let blocked = Task { try await connection.query("SELECT pg_advisory_xact_lock(\(key))") }
            await expectEventually {
                let waiting = try? await locker.query("SELECT count(*) FROM pg_locks WHERE pid = \(pid) AND NOT granted")
                return (try? waiting?[0].decode(Int.self, at: 0)) == 1
            }
            let maintenance = Task { await pool.maintain() }
            await expectEventually("the check took the connection") {
                pool.statistics.idle == 0 && pool.statistics.inUse == 1
            }
            await pool.shutdown()
            try await locker.query("SELECT pg_advisory_unlock(\(key))")
            _ = try await blocked.value
            await maintenance.value
        }
        #expect(pool.statistics.idle == 0, "nothing went back to the idle list of a shut down pool")
        #expect(await connection.isClosed, "the connection was closed")
        #expect(pool.statistics.inUse == 0)
    }
}
