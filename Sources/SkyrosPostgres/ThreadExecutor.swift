import Foundation

/// A serial executor (and task executor) backed by one dedicated OS thread.
///
/// Every ``PGConnection`` runs on its own `ThreadExecutor`, so blocking libpq calls never occupy a thread of
/// Swift's cooperative pool. Jobs run in FIFO order; the thread spins briefly before sleeping so a
/// request/response loop does not pay a full wake-up on every call.
///
/// After ``shutdown()`` the thread exits once its queue is empty. A job enqueued after that (a call on a closed
/// connection) still runs: on a short-lived thread that runs the queue until it is empty again and exits, one
/// such thread at a time, so jobs stay serial and in order.
final class ThreadExecutor: SerialExecutor, TaskExecutor, @unchecked Sendable {
    // @unchecked Sendable: all mutable state is inside `state` (a Mutex) or `wakeup` (a semaphore).
    private struct State {
        var jobs: [UnownedJob] = []
        var head = 0
        var stopped = false
        var sleeping = false
        /// A thread is in ``loop()`` (the dedicated one, or after shutdown a short-lived one): it will run the
        /// queued jobs. At most one at a time.
        var running = true
    }

    private let state = Locked(State())
    private let wakeup = DispatchSemaphore(value: 0)
    private let threadID = Locked<pthread_t?>(nil)
    let name: String
    /// How long an idle thread keeps polling for work before it sleeps.
    static let spinDuration: Duration = .microseconds(50)

    init(name: String) {
        self.name = name
        self.startThread()
    }

    private func startThread() {
        let thread = Thread { [self] in self.loop() }
        thread.name = self.name
        thread.stackSize = 1 << 20
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        enum Wake { case none, signal, startThread }
        let wake = self.state.withLock { state -> Wake in
            state.jobs.append(unowned)
            if !state.running {
                // Shut down, and the thread has exited: nothing would ever run this job.
                state.running = true
                return .startThread
            }
            if state.sleeping {
                state.sleeping = false
                return .signal
            }
            return .none
        }
        switch wake {
        case .none: break
        case .signal: self.wakeup.signal()
        case .startThread: self.startThread()
        }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    /// Stops the thread once the queued jobs have run (later jobs still run, see the type's documentation).
    func shutdown() {
        let mustSignal = self.state.withLock { state -> Bool in
            state.stopped = true
            if state.sleeping {
                state.sleeping = false
                return true
            }
            return false
        }
        if mustSignal { self.wakeup.signal() }
    }

    private enum Next {
        case run(UnownedJob)
        case sleep
        case exit
    }

    private func next(mayRegisterSleep: Bool) -> Next {
        self.state.withLock { state -> Next in
            if state.head < state.jobs.count {
                let job = state.jobs[state.head]
                state.head += 1
                if state.head == state.jobs.count {
                    state.jobs.removeAll(keepingCapacity: true)
                    state.head = 0
                }
                return .run(job)
            }
            if state.stopped {
                state.running = false
                return .exit
            }
            if mayRegisterSleep { state.sleeping = true }
            return .sleep
        }
    }

    /// Whether the thread has stopped (after ``shutdown()``, once its queue was empty) and none runs now.
    var hasExited: Bool { self.state.withLock { $0.stopped && !$0.running } }

    /// Whether the caller runs on this executor's thread.
    var isCurrentThread: Bool {
        self.threadID.withLock { id in id.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    private func loop() {
        // Note: Linux threads inherit their creator's name, so ps/gdb may show a dispatch name
        // ("…default-qos") for this thread; `isCurrentThread` is the reliable check.
        self.threadID.withLock { $0 = pthread_self() }
        // After a job, poll for the next one for a short, time-bounded while (a request/response loop sends
        // its next statement within microseconds), then sleep on the semaphore. Bounded by time, not by a
        // count, so slow lock operations (for example under ThreadSanitizer) cannot make it hog a core.
        let clock = ContinuousClock()
        var spinUntil: ContinuousClock.Instant?
        while true {
            let mayRegisterSleep = spinUntil.map { clock.now >= $0 } ?? false
            switch self.next(mayRegisterSleep: mayRegisterSleep) {
            case .run(let job):
                spinUntil = nil
                job.runSynchronously(
                    isolatedTo: self.asUnownedSerialExecutor(), taskExecutor: self.asUnownedTaskExecutor())
            case .exit:
                return
            case .sleep:
                if mayRegisterSleep {
                    self.wakeup.wait()
                    spinUntil = nil
                } else {
                    if spinUntil == nil { spinUntil = clock.now.advanced(by: Self.spinDuration) }
                    sched_yield()
                }
            }
        }
    }
}
