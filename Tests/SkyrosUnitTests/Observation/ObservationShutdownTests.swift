import Foundation
import Logging
import ServiceLifecycle
@testable import Skyros
@testable import SkyrosObservation
@testable import SkyrosStack
@testable import SkyrosStore
@testable import SkyrosSync
import SkyrosTestFixtures
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// An observation consumed inside a service ends when that service is shut down gracefully, so a server
/// that waits for its open event streams can stop.
@Suite struct ObservationShutdownTests {
    /// Consumes an observation until it ends, then records how many results it saw.
    struct StreamingService: Service {
        let stack: DataStack
        let ended: Locked<Int?>

        func run() async throws {
            var results = 0
            for try await _ in self.stack.observe(FetchDescriptor<MPItem>()) { results += 1 }
            self.ended.withLock { $0 = results }
        }
    }

    /// An observation started after the stack shut down yields the current result and ends (it waited for
    /// changes forever: nothing was left to wake or end it).
    @Test func anObservationStartedAfterShutdownEnds() async throws {
        let stack = try await DataStack.start(DataStackConfiguration(store: .inMemory))
        try await stack.write(durability: .committed) { try $0.insert(MPItem(id: 1, owner: 0, value: 1, title: "")) }
        await stack.shutdown()
        let results = Locked<Int?>(nil)
        let observing = Task {
            var count = 0
            for try await _ in stack.observe(FetchDescriptor<MPItem>()) { count += 1 }
            results.withLock { $0 = count }
        }
        await expectEventually { results.withLock { $0 } != nil }
        #expect(results.withLock { $0 } == 1)
        observing.cancel()
        #expect(stack.sync.observers.count == 0)
    }

    @Test func gracefulShutdownEndsAnObservationInsideTheService() async throws {
        let stack = try await DataStack.start(DataStackConfiguration(store: .inMemory))
        let ended = Locked<Int?>(nil)
        let group = ServiceGroup(
            configuration: .init(
                services: [StreamingService(stack: stack, ended: ended)],
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })))
        let running = Task { try await group.run() }
        await expectEventually { stack.sync.observers.count == 1 }
        try await stack.write { try $0.insert(MPItem(id: 1, owner: 0, value: 1, title: "")) }
        await group.triggerGracefulShutdown()
        try await running.value                                  // returned: the stream ended
        #expect(ended.withLock { $0 } != nil)
        #expect(stack.sync.observers.count == 0)
        // Outside a shutting-down service, observations go on.
        var iterator = stack.observe(FetchDescriptor<MPItem>()).makeAsyncIterator()
        #expect(try await iterator.next()?.values.count == 1)
        await stack.shutdown()
    }
}
