@testable import SkyrosStack
import Testing

/// The pieces a write's deadline is made of, without a stack or a server: the one-shot waiter, the race
/// against the deadline, and the errors.
@Suite struct WriteDeadlineUnitTests {
    @Test func aWaiterResumedBeforeItWaitsDoesNotSuspend() async {
        let waiter = OneShotWaiter()
        waiter.resume()
        await waiter.wait { _ in true }
        waiter.resume()   // a second resume does nothing
    }

    @Test func aWaiterWithNothingToWaitForReturns() async {
        await OneShotWaiter().wait { _ in false }
    }

    @Test func aWaiterIsResumedByWhoeverHoldsIt() async {
        let registered = AsyncStream<OneShotWaiter>.makeStream()
        let waiting = Task {
            await OneShotWaiter().wait { waiter in
                registered.continuation.yield(waiter)
                return true
            }
        }
        var iterator = registered.stream.makeAsyncIterator()
        let waiter = await iterator.next()
        waiter?.resume()
        waiter?.resume()
        await waiting.value
    }

    @Test func cancellationEndsTheWait() async {
        let waiting = Task { await OneShotWaiter().wait { _ in true } }   // nobody resumes it
        waiting.cancel()
        await waiting.value
    }

    @Test func theRaceEndsAtTheDeadlineWhenTheWaitDoesNot() async {
        let deadline = WriteDeadline(.now + .milliseconds(20))
        await deadline.race { await OneShotWaiter().wait { _ in true } }
        #expect(ContinuousClock.now >= deadline.instant!)
        #expect(deadline.interruption(queued: true)?.code == .deadlineExceeded)
    }

    @Test func withoutADeadlineTheRaceIsTheWait() async {
        let deadline = WriteDeadline(nil)
        let waiter = OneShotWaiter()
        waiter.resume()
        await deadline.race { await waiter.wait { _ in true } }
        #expect(deadline.interruption(queued: false) == nil)
    }

    @Test func theErrorSaysWhetherTheWriteMayStillCommit() async {
        let passed = WriteDeadline(.now - .seconds(1))
        #expect(passed.interruption(queued: false)?.code == .deadlineExceeded)
        #expect(passed.interruption(queued: false)?.mayStillCommit == false)
        #expect(passed.interruption(queued: true)?.mayStillCommit == true)
        #expect(WriteDeadline(.now + .seconds(60)).interruption(queued: false) == nil)
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return WriteDeadline(.now + .seconds(60)).interruption(queued: true)
        }
        let error = await cancelled.value
        #expect(error?.code == .writeCancelled)
        #expect(error?.mayStillCommit == true)
    }
}
