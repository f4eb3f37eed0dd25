import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Backpressure (writers wait when the queue is full) and shutdown (refuse, drain, deadline report).
@Suite("Commit queue backpressure", .timeLimit(.minutes(3)))
struct CommitQueueBackpressureTests {
    @Test("Writers wait while the queue holds the maximum number of sets, and continue when it drains")
    func boundedByCount() async throws {
        try await StackTestServer.withQueueStack({ $0.commitQueue.maximumQueuedCommits = 50 }) { stack in
            stack.holdCommits()
            let written = Locked(0)
            let writer = Task {
                for id in 1...200 {
                    try await stack.write { try $0.insert(note(id)) }
                    written.withLock { $0 += 1 }
                }
            }
            await expectEventually { stack.queuedCommits == 50 }
            // The writer is parked: its next write waits for room (checked over several polls).
            for _ in 0..<20 {
                #expect(written.withLock { $0 } == 50)
                #expect(stack.queuedCommits == 50)
                await Task.yield()
            }
            stack.releaseCommits()
            try await writer.value
            try await stack.write(durability: .committed) { try $0.insert(note(201)) }
            #expect(try await stack.store.count(FetchDescriptor<StackNote>()) == 201)
            #expect(stack.commitQueueStatistics.highestQueueDepth <= 51)
        }
    }

    @Test("A writer waiting for room when the store is destroyed and rebuilt stops waiting, with a clear error")
    func writerWaitingForRoomWhenTheStoreIsRebuilt() async throws {
        try await StackTestServer.withQueueStack({ $0.commitQueue.maximumQueuedCommits = 5 }) { stack in
            stack.holdCommits()
            let outcome = Locked<(any Error)?>(nil)
            let finished = Locked(false)
            let writer = Task {
                do {
                    for id in 1...10 { try await stack.write { try $0.insert(note(id)) } }
                } catch {
                    outcome.withLock { $0 = error }
                }
                finished.withLock { $0 = true }
            }
            await expectEventually { stack.queuedCommits == 5 }
            try await stack.destroyAndRebuild(confirm: .iUnderstandThisDeletesData)
            await expectEventually { finished.withLock { $0 } }
            let error = outcome.withLock { $0 } as? DataStackError
            #expect(error?.code == .contextInvalidated)
            writer.cancel()
            // The rebuilt store takes writes.
            try await stack.write(durability: .committed) { try $0.insert(note(11)) }
            #expect(try await stack.store.count(FetchDescriptor<StackNote>()) == 1)
        }
    }

    @Test("With a pool of one connection, a read gets it between two groups while writes keep coming")
    func drainHandsItsConnectionToAWaitingReader() async throws {
        try await StackTestServer.withQueueStack({ $0.pool = .init(maximumConnections: 1, leaseTimeout: .seconds(5)) }) { stack in
            let writes = 100_000
            let written = Locked(0)
            let writer = Task {
                for id in 1...writes {
                    try await stack.write { try $0.insert(note(id)) }
                    written.withLock { $0 += 1 }
                }
            }
            // The drain holds the only connection while the queue has work; it gives it back when a read waits.
            // (A generous deadline: on a loaded machine the first thousand rows took over ten seconds.)
            try await expectEventually(within: .seconds(60)) { try await stack.store.count(FetchDescriptor<StackNote>()) >= 1_000 }
            for _ in 0..<5 {
                _ = try await stack.store.count(FetchDescriptor<StackNote>())
                #expect(written.withLock { $0 } < writes, "the reads finished only after the writer")
            }
            try await writer.value
            try await stack.write(durability: .committed) { try $0.insert(note(writes + 1)) }
            #expect(try await stack.store.count(FetchDescriptor<StackNote>()) == writes + 1)
        }
    }

    @Test("With a pool of one connection, durable writes alternate with reads: a drain waiting for the next set lets them in")
    func lingeringDrainLetsReadsIn() async throws {
        try await StackTestServer.withQueueStack({ $0.pool = .init(maximumConnections: 1, leaseTimeout: .seconds(5)) }) { stack in
            for id in 1...300 {
                try await stack.write(durability: .committed) { try $0.insert(note(id)) }
                // The drain that committed it may still hold the only connection, waiting a moment for a next set.
                #expect(try await stack.store.count(FetchDescriptor<StackNote>()) == id)
            }
            stack.holdCommits()
            try await stack.write { try $0.insert(note(301)) }
            #expect(stack.queuedCommits == 1)
            stack.releaseCommits()
            try await stack.write(durability: .committed) { try $0.insert(note(302)) }
            #expect(try await stack.store.count(FetchDescriptor<StackNote>()) == 302)
        }
    }

    @Test("With a pool of one connection, a durable write whose body reads through the pool, queues nothing or throws completes: the drain started ahead of it gives the connection back")
    func drainStartedAheadGivesTheConnectionBack() async throws {
        try await StackTestServer.withQueueStack({ $0.pool = .init(maximumConnections: 1, leaseTimeout: .seconds(5)) }) { stack in
            let pool = try #require(stack.store as? PostgresStore).pool
            for id in 1...100 {
                // The body needs the only connection while the drain started ahead of the write may hold it.
                try await stack.write(durability: .committed) { context in
                    let stored = try await context.count(FetchDescriptor<StackNote>())
                    #expect(stored == id - 1)
                    try context.insert(note(id))
                }
                try await stack.write(durability: .committed) { _ in }
                await #expect(throws: CancellationError.self) {
                    try await stack.write(durability: .committed) { _ in throw CancellationError() }
                }
            }
            // Each drain ends once its wait for a set is over: the connection goes back to the pool.
            await expectEventually { pool.statistics.inUse == 0 && pool.statistics.idle == 1 }
            #expect(try await stack.store.count(FetchDescriptor<StackNote>()) == 100)
        }
    }

    @Test("Writers wait while the queued sets hold the maximum number of bytes")
    func boundedByBytes() async throws {
        try await StackTestServer.withQueueStack({ $0.commitQueue.maximumQueuedBytes = 100_000 }) { stack in
            stack.holdCommits()
            let big = String(repeating: "x", count: 10_000)
            let writer = Task {
                for id in 1...100 { try await stack.write { try $0.insert(StackNote(id: id, title: big, rank: id)) } }
            }
            await expectEventually { stack.queuedCommits >= 9 }
            for _ in 0..<20 { await Task.yield() }
            // About 100 kB of 10 kB rows: ten sets (the tenth crosses the bound), never all hundred.
            #expect((9...11).contains(stack.queuedCommits))
            stack.releaseCommits()
            try await writer.value
            try await stack.write(durability: .committed) { try $0.insert(note(101)) }
            #expect(try await stack.store.count(FetchDescriptor<StackNote>()) == 101)
        }
    }

    @Test("After shutdown writes are refused with stackShutDown; queued writes were committed first")
    func shutdownDrainsThenRefuses() async throws {
        try await StackTestServer.withQueueStack({ _ in }) { stack in
            stack.holdCommits()
            for id in 1...100 { try await stack.write { try $0.insert(note(id)) } }
            let schema = try #require((stack.store as? PostgresStore)?.schema)
            let report = await stack.shutdown(timeout: .seconds(60))
            #expect(report.isComplete)
            let rows = try await CommitQueueTestServer.query("SELECT count(*)::int8 FROM \(qualified: [schema, "stack_notes"])")
            #expect(try rows[0].decode(Int.self, at: 0) == 100)
            let error = await thrownError { try await stack.write { try $0.insert(note(101)) } }
            #expect((error as? DataStackError)?.code == .stackShutDown)
            #expect("\(error.map { "\($0)" } ?? "")".contains("shut down"))
        }
    }

    @Test("run() (the Service) drains queued writes and refuses new ones when it ends")
    func serviceRunDrains() async throws {
        try await StackTestServer.withQueueStack({ _ in }) { stack in
            let schema = try #require((stack.store as? PostgresStore)?.schema)
            stack.holdCommits()
            for id in 1...50 { try await stack.write { try $0.insert(note(id)) } }
            let service = Task { try await stack.run() }
            service.cancel()   // outside a ServiceGroup, cancellation stands in for graceful shutdown
            try await service.value
            let rows = try await CommitQueueTestServer.query("SELECT count(*)::int8 FROM \(qualified: [schema, "stack_notes"])")
            #expect(try rows[0].decode(Int.self, at: 0) == 50)
            let error = await thrownError { try await stack.write { try $0.insert(note(51)) } }
            #expect((error as? DataStackError)?.code == .stackShutDown)
        }
    }

    @Test("A shutdown deadline reports exactly which sets did not commit; their callers get stackShutDown")
    func shutdownDeadlineReport() async throws {
        try await StackTestServer.withQueueStack({ $0.commitQueue.maximumBatchCount = 1 }) { stack in
            let schema = try #require((stack.store as? PostgresStore)?.schema)
            // Another session locks the table: the first group blocks on it.
            let locker = try await PGConnection.connect(to: try TestServer.configuration)
            _ = try await locker.execute(script: "BEGIN; LOCK TABLE \(quoteIdentifier(schema)).stack_notes IN ACCESS EXCLUSIVE MODE")
            let failures = Locked<[Int: any Error]>([:])
            let successes = Locked<Set<Int>>([])
            var writers: [Task<Void, Never>] = []
            for id in 1...5 {
                writers.append(Task {
                    do {
                        try await stack.write(durability: .committed) { try $0.insert(note(id)) }
                        successes.withLock { _ = $0.insert(id) }
                    } catch {
                        failures.withLock { $0[id] = error }
                    }
                })
                await expectEventually { stack.commitQueueStatistics.queueDepth == id }
            }
            // Release the lock once the four queued writers were failed by the deadline.
            let unlock = Task {
                while failures.withLock({ $0.count }) < 4 { await Task.yield() }
                _ = try await locker.execute(script: "ROLLBACK")
            }
            let report = await stack.shutdown(timeout: .milliseconds(500))
            try await unlock.value
            for writer in writers { await writer.value }
            await locker.close()

            #expect(!report.isComplete)
            #expect(report.inFlight.count == 1)
            #expect(report.uncommitted.count == 4)
            #expect(report.inFlight.first?.rows == ["stack_notes 1"])
            #expect(report.uncommitted.map(\.rows) == [["stack_notes 2"], ["stack_notes 3"], ["stack_notes 4"], ["stack_notes 5"]])
            #expect(Set(failures.withLock { $0.keys }) == [2, 3, 4, 5])
            #expect(failures.withLock { $0.values.allSatisfy { ($0 as? DataStackError)?.code == .stackShutDown } })
            // The set in flight committed once the lock was gone; the reported ones did not.
            #expect(successes.withLock { $0 } == [1])
            let rows = try await CommitQueueTestServer.query("SELECT id::int8 FROM \(qualified: [schema, "stack_notes"])")
            #expect(try rows.map { try $0.decode(Int.self, at: 0) } == [1])
        }
    }
}
