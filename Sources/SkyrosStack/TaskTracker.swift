import SkyrosPostgres

/// Counts tasks a stack starts outside a task group (see ``CommitQueue``), so that a shutdown can wait for every
/// one of them to end.
package final class TaskTracker: Sendable {
    private let state = Locked<(running: Int, waiters: [CheckedContinuation<Void, Never>])>((0, []))

    package init() {}

    /// Starts `body` as a counted task, on `executor` when given.
    package func spawn(on executor: (any TaskExecutor)? = nil, _ body: @escaping @Sendable () async -> Void) {
        self.state.withLock { $0.running += 1 }
        let counted: @Sendable () async -> Void = {
            await body()
            let waiters = self.state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.running -= 1
                guard state.running == 0 else { return [] }
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
        Task(executorPreference: executor, operation: counted)
    }

    /// The number of tasks running.
    package var running: Int { self.state.withLock { $0.running } }

    /// Waits until no counted task runs.
    package func allEnded() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ended = self.state.withLock { state -> Bool in
                if state.running == 0 { return true }
                state.waiters.append(continuation)
                return false
            }
            if ended { continuation.resume() }
        }
    }
}
