import Foundation
import SkyrosTestSupport
@testable import Skyros
import SkyrosPostgres
import Testing

/// The stack's background work ends with it: ``DataStack/shutdown()`` and a cancelled ``DataStack/run()``
/// return only after every background task of the stack (the change feed's loops, the commit queue's drains,
/// writes run for a completion handler) has ended.
@Suite("Stack lifecycle", .timeLimit(.minutes(3)))
struct StackLifecycleTests {
    /// Starts work of every kind the stack runs in the background: an observer (the feed's loops run from the
    /// start), queued and durable writes (drains), and a write with a completion handler.
    static func keepBusy(_ stack: DataStack) async throws {
        let observation = stack.observe(FetchDescriptor<StackNote>())
        var results = observation.makeAsyncIterator()
        _ = try await results.next()
        for id in 1...20 {
            try await stack.write { try $0.insert(StackNote(id: id, title: "note \(id)", rank: id)) }
        }
        try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 100, title: "durable", rank: 0)) }
        let completed = Locked(false)
        stack.write({ context in try context.insert(StackNote(id: 101, title: "completion", rank: 0)) }, completion: { _ in
            completed.withLock { $0 = true }
        })
        await expectEventually(within: .seconds(30)) { completed.withLock { $0 } }
        for id in 200..<260 {
            try await stack.write { try $0.insert(StackNote(id: id, title: "queued \(id)", rank: id)) }
        }
    }

    @Test("shutdown() returns after every background task ended")
    func shutdownEndsEveryBackgroundTask() async throws {
        try await StackTestServer.withQueueStack({ _ in }) { stack in
            try await Self.keepBusy(stack)
            // The change feed's four loops run until the stack stops.
            #expect(stack.backgroundTasks >= 4)
            await stack.shutdown()
            #expect(stack.backgroundTasks == 0)
        }
    }

    @Test("run() cancelled returns after every background task ended, the queue drained")
    func cancelledRunEndsEveryBackgroundTask() async throws {
        try await StackTestServer.withQueueStack({ _ in }) { stack in
            let runner = Task { try await stack.run() }
            try await Self.keepBusy(stack)
            #expect(stack.backgroundTasks >= 4)
            runner.cancel()
            try await runner.value
            #expect(stack.backgroundTasks == 0)
            let count = try await CommitQueueTestServer.query(
                "SELECT count(*)::int8 FROM \(qualified: [try #require(stack.postgresStore?.schema), "stack_notes"])")
            #expect(try count[0].decode(Int.self, at: 0) == 82)
        }
    }
}
