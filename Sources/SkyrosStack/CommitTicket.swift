import SkyrosPostgres
import SkyrosStore

/// The outcome of one queued commit, awaited by durable writers and completion handlers. Completed exactly
/// once; every waiter and callback registered before or after completion is resumed exactly once.
package final class CommitTicket: Sendable {
    private struct State {
        var result: Result<Void, any Error>?
        var waiters: [CheckedContinuation<Void, any Error>] = []
        /// Waiters that stop waiting when their task is cancelled (``waitUnlessCancelled()``), by id.
        var cancellable: [Int: CheckedContinuation<Result<Void, any Error>?, Never>] = [:]
        var nextID = 0
        var callbacks: [@Sendable (Result<Void, any Error>) -> Void] = []
    }

    private let state = Locked(State())

    /// Waits for the commit; throws its error.
    package func wait() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let result = self.state.withLock { state -> Result<Void, any Error>? in
                if let result = state.result { return result }
                state.waiters.append(continuation)
                return nil
            }
            if let result { continuation.resume(with: result) }
        }
    }

    /// Waits for the commit until `deadline` passes or the task is cancelled; throws the commit's error, or
    /// ``DataStackError`` `.deadlineExceeded` / `.writeCancelled` with `mayStillCommit` (the queue keeps the
    /// commit and retries it).
    package func wait(until deadline: WriteDeadline) async throws {
        while true {
            let outcome: Result<Void, any Error>?
            if deadline.instant == nil {
                outcome = await self.outcomeUnlessCancelled()
            } else {
                let raced = Locked<Result<Void, any Error>?>(nil)
                await deadline.race {
                    let result = await self.outcomeUnlessCancelled()
                    raced.withLock { $0 = result }
                }
                outcome = raced.withLock { $0 }
            }
            if let outcome { return try outcome.get() }
            if let interruption = deadline.interruption(queued: true) { throw interruption }
        }
    }

    /// Waits for the commit, or until the task is cancelled. Returns whether the commit finished (either way).
    func waitUnlessCancelled() async -> Bool {
        await self.outcomeUnlessCancelled() != nil
    }

    /// The commit's outcome, or `nil` when the task was cancelled first.
    private func outcomeUnlessCancelled() async -> Result<Void, any Error>? {
        let id = self.state.withLock { state -> Int in
            defer { state.nextID += 1 }
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, any Error>?, Never>) in
                // `.some(nil)`: cancelled before it waited; `nil`: waits.
                let now = self.state.withLock { state -> Result<Void, any Error>?? in
                    if let result = state.result { return .some(result) }
                    if Task.isCancelled { return .some(nil) }
                    state.cancellable[id] = continuation
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            self.state.withLock { $0.cancellable.removeValue(forKey: id) }?.resume(returning: nil)
        }
    }

    /// Whether anyone waits for the outcome (a durable writer, a completion handler) or has received it.
    var isAwaited: Bool {
        self.state.withLock { !$0.waiters.isEmpty || !$0.callbacks.isEmpty || !$0.cancellable.isEmpty }
    }

    /// Calls `callback` once with the outcome (at once when already completed).
    func onComplete(_ callback: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        let result = self.state.withLock { state -> Result<Void, any Error>? in
            if let result = state.result { return result }
            state.callbacks.append(callback)
            return nil
        }
        if let result { callback(result) }
    }

    /// Records the outcome and resumes everyone waiting (only the first call has an effect).
    func complete(_ result: Result<Void, any Error>) {
        let (waiters, callbacks, cancellable) = self.state.withLock { state in
            guard state.result == nil else {
                return ([CheckedContinuation<Void, any Error>](), [@Sendable (Result<Void, any Error>) -> Void](), [CheckedContinuation<Result<Void, any Error>?, Never>]())
            }
            state.result = result
            defer {
                state.waiters = []
                state.callbacks = []
                state.cancellable = [:]
            }
            return (state.waiters, state.callbacks, Array(state.cancellable.values))
        }
        for waiter in waiters { waiter.resume(with: result) }
        for waiter in cancellable { waiter.resume(returning: result) }
        for callback in callbacks { callback(result) }
    }
}
