import Foundation

/// A serial executor (and task executor) backed by one dedicated OS thread.
///
/// Every ``Connection`` runs on its own `ThreadExecutor`, so blocking libpq calls never occupy a thread of
/// Swift's cooperative pool. Jobs run in FIFO order; the thread spins briefly before sleeping so a
/// request/response loop does not pay a full wake-up on every call.
final class ThreadExecutor: SerialExecutor, TaskExecutor, @unchecked Sendable {
    // @unchecked Sendable: all mutable state is inside `state` (a Mutex) or `wakeup` (a semaphore).
    private struct State {
        var jobs: [UnownedJob] = []
        var head = 0
        var stopped = false
        var sleeping = false
    }

    private let state = Locked(State())
    private let wakeup = DispatchSemaphore(value: 0)
    private let threadID = Locked<pthread_t?>(nil)
    let name: String

    init(name: String) {
        self.name = name
        let thread = Thread { [self] in self.loop() }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let mustSignal = self.state.withLock { state -> Bool in
            state.jobs.append(unowned)
            if state.sleeping {
                state.sleeping = false
                return true
            }
            return false
        }
        if mustSignal { self.wakeup.signal() }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    /// Stops the thread once the queued jobs have run.
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
            if state.stopped { return .exit }
            if mayRegisterSleep { state.sleeping = true }
            return .sleep
        }
    }

    /// Whether the caller runs on this executor's thread.
    var isCurrentThread: Bool {
        self.threadID.withLock { id in id.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    private func loop() {
        // Note: Linux threads inherit their creator's name, so ps/gdb may show a dispatch name
        // ("…default-qos") for this thread; `isCurrentThread` is the reliable check.
        self.threadID.withLock { $0 = pthread_self() }
        var spins = 0
        while true {
            switch self.next(mayRegisterSleep: spins >= 2000) {
            case .run(let job):
                spins = 0
                job.runSynchronously(
                    isolatedTo: self.asUnownedSerialExecutor(), taskExecutor: self.asUnownedTaskExecutor())
            case .exit:
                return
            case .sleep:
                if spins >= 2000 {
                    self.wakeup.wait()
                    spins = 0
                } else {
                    spins += 1
                    if spins % 64 == 0 { sched_yield() }
                }
            }
        }
    }
}
