import SkyrosPostgres
import SkyrosStore

/// The outcome of one queued commit, awaited by durable writers and completion handlers. Completed exactly
/// once; every waiter and callback registered before or after completion is resumed exactly once.
package final class CommitTicket: Sendable {
    private struct State {
        var result: Result<Void, any Error>?
        var waiters: [CheckedContinuation<Void, any Error>] = []
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
        let (waiters, callbacks) = self.state.withLock { state in
            guard state.result == nil else {
                return ([CheckedContinuation<Void, any Error>](), [@Sendable (Result<Void, any Error>) -> Void]())
            }
            state.result = result
            defer {
                state.waiters = []
                state.callbacks = []
            }
            return (state.waiters, state.callbacks)
        }
        for waiter in waiters { waiter.resume(with: result) }
        for callback in callbacks { callback(result) }
    }
}
