import SkyrosPostgres

/// When a write must end: a caller's deadline, and its task's cancellation. A write checks it while it waits for
/// room in the queue, before its changes are queued, and while it waits for the commit; those waits end early
/// when either comes. A request handler's write answers by the deadline it chose, while the commit queue keeps
/// retrying what it already accepted. The wait for database-allocated ids (`identity` keys) is not bounded by it.
package struct WriteDeadline: Sendable {
    /// `nil`: no deadline (task cancellation still ends the waits).
    package let instant: ContinuousClock.Instant?

    package init(_ instant: ContinuousClock.Instant?) { self.instant = instant }

    /// The error for a write that stopped early, or `nil` while it may go on. `queued`: its changes are in the
    /// commit queue already (they may still commit).
    package func interruption(queued: Bool) -> DataStackError? {
        if Task.isCancelled {
            return DataStackError(
                code: .writeCancelled,
                message: queued
                    ? "the task was cancelled while the write committed; the commit queue keeps retrying it and it may still commit"
                    : "the task was cancelled before the write was queued; nothing was saved",
                mayStillCommit: queued)
        }
        if let instant = self.instant, ContinuousClock.now >= instant {
            return DataStackError(
                code: .deadlineExceeded,
                message: queued
                    ? "the write's deadline passed before its commit finished; the commit queue keeps retrying it and it may still commit"
                    : "the write's deadline passed before the write was queued; nothing was saved",
                mayStillCommit: queued)
        }
        return nil
    }

    /// Runs `wait` until it returns or the deadline passes. `wait` must return soon after its task is
    /// cancelled, which is how it is told that the deadline passed (the caller's cancellation reaches it too).
    package func race(_ wait: @escaping @Sendable () async -> Void) async {
        guard let instant = self.instant else { return await wait() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await wait() }
            group.addTask { try? await Task.sleep(until: instant, clock: .continuous) }
            await group.next()
            group.cancelAll()
        }
    }
}

/// A suspended waiter that is resumed exactly once: by whoever wakes it, or by its task's cancellation,
/// whichever comes first (a later resume does nothing; a resume before it suspends keeps it from suspending).
package final class OneShotWaiter: Sendable {
    private enum State {
        case idle
        case waiting(CheckedContinuation<Void, Never>)
        case done
    }

    private let state = Locked(State.idle)

    package init() {}

    /// Suspends until ``resume()`` or the task's cancellation. `register` hands the waiter to whoever will
    /// wake it and returns `false` when there is nothing to wait for.
    package func wait(register: (OneShotWaiter) -> Bool) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done = self.state.withLock { state -> Bool in
                    if case .done = state { return true }
                    state = .waiting(continuation)
                    return false
                }
                if done { return continuation.resume() }
                if !register(self) { self.resume() }
            }
        } onCancel: {
            self.resume()
        }
    }

    /// Wakes the waiter (only the first call has an effect).
    package func resume() {
        let continuation = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            defer { state = .done }
            if case .waiting(let continuation) = state { return continuation }
            return nil
        }
        continuation?.resume()
    }
}
