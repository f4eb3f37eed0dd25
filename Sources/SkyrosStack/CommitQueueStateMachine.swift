import DequeModule

/// A commit the queue orders: its number in the queue, and its size against the queue's byte bound.
package protocol QueueableCommit {
    var id: UInt64 { get }
    var bytes: Int { get }
}

/// The commit queue's bookkeeping as a value: the queued commits in save order, the group being committed,
/// the counts and bytes that bound the queue, the writers waiting for room, and the flags (draining, held,
/// accepting, abandoned).
///
/// Each event mutates the state and returns what the driver (``CommitQueue``) must do — start a drain, resume
/// waiters, fail commits — which it does after releasing the lock. Nothing here suspends, reads a clock or
/// touches a store, so every transition is tested without a server (`CommitQueueStateMachineTests`).
///
/// `Waiter` is what a writer waiting for room leaves behind (a continuation in the driver).
package struct CommitQueueStateMachine<Commit: QueueableCommit, Waiter> {
    package struct Limits: Sendable {
        package var maximumQueuedCommits: Int
        package var maximumQueuedBytes: Int
        /// The most sets one group commit takes.
        package var maximumBatchCount: Int

        package init(maximumQueuedCommits: Int, maximumQueuedBytes: Int, maximumBatchCount: Int) {
            self.maximumQueuedCommits = maximumQueuedCommits
            self.maximumQueuedBytes = maximumQueuedBytes
            self.maximumBatchCount = max(1, maximumBatchCount)
        }
    }

    package let limits: Limits
    /// Queued commits not yet taken by a drain, in save order.
    private var queue: Deque<Commit> = []
    private var nextCommit: UInt64 = 1
    /// A drain runs (or has been claimed by a caller about to start one).
    private(set) package var draining = false
    /// Commits wait (a test hook, and a rebuilt store's first moments) until released.
    private(set) package var held = false
    private(set) package var accepting = true
    /// A shutdown's deadline passed: retries stop, queued sets fail.
    private(set) package var abandoned = false
    /// The last commit queued (what a flush or shutdown waits for).
    private(set) package var last: Commit?
    /// Commits queued or being committed, and their bytes (the backpressure bound).
    private(set) package var unfinishedCount = 0
    private(set) package var unfinishedBytes = 0
    private var roomWaiters: [Waiter] = []
    /// The group being committed (for a shutdown report).
    private(set) package var running: [Commit] = []

    package init(limits: Limits) {
        self.limits = limits
    }

    /// Commits queued and not yet taken by a drain.
    package var queuedCount: Int { self.queue.count }

    // MARK: Enqueue and room

    package enum EnqueueAction {
        /// The queue no longer accepts commits (shut down or invalidated).
        case refused
        /// Queued under `id`; `startDrain`: no drain runs, the caller starts one.
        case queued(id: UInt64, startDrain: Bool)
    }

    /// Queues the commit `make` builds from its number.
    package mutating func enqueue(_ make: (UInt64) -> Commit) -> EnqueueAction {
        guard self.accepting else { return .refused }
        let id = self.nextCommit
        self.nextCommit += 1
        let commit = make(id)
        self.queue.append(commit)
        self.unfinishedCount += 1
        self.unfinishedBytes += commit.bytes
        self.last = commit
        return .queued(id: id, startDrain: self.claimDrain())
    }

    /// Whether a writer may queue now: the queue has room by count and bytes, or it stopped accepting (the
    /// writer then finds out when it queues).
    package var hasRoom: Bool {
        !self.accepting
            || (self.unfinishedCount < self.limits.maximumQueuedCommits && self.unfinishedBytes < self.limits.maximumQueuedBytes)
    }

    /// Registers a writer waiting for room. Returns `false` when there is room by now (the caller resumes it).
    package mutating func waitForRoom(_ waiter: Waiter) -> Bool {
        if self.hasRoom { return false }
        self.roomWaiters.append(waiter)
        return true
    }

    // MARK: Drain

    /// Whether the caller should start a drain (and marks one as running).
    private mutating func claimDrain() -> Bool {
        guard !self.draining, !self.held, self.queuedCount > 0 else { return false }
        self.draining = true
        return true
    }

    /// Claims a drain before a durable write's set is queued (it leases its connection while the write's body
    /// runs). Returns whether the caller starts it.
    package mutating func claimDrainAhead() -> Bool {
        guard !self.draining, !self.held, self.accepting else { return false }
        self.draining = true
        return true
    }

    /// A group built ahead: its first commit and its number of sets.
    package struct Ahead: Equatable, Sendable {
        package let firstCommit: UInt64
        package let count: Int

        package init(firstCommit: UInt64, count: Int) {
            self.firstCommit = firstCommit
            self.count = count
        }
    }

    package enum Step {
        /// Nothing to send and nothing unsettled: the drain ends (no longer marked as running).
        case stop
        /// Nothing to send and nothing unsettled: the drain may wait a moment for the next set.
        case linger
        /// The previous group must settle before anything else.
        case settleFirst
        /// Send this group; `usesAhead`: it is the group built ahead.
        case send([Commit], usesAhead: Bool)
    }

    /// The drain's next step. `hasUnsettled`: a group was committed and not settled yet (a group not built ahead
    /// may need the versions it produced). `mayLinger`: the drain may wait for more on its connection's thread.
    /// `ahead`: the group built while the last one was on the server, used if the queue still starts with it.
    package mutating func nextStep(hasUnsettled: Bool, mayLinger: Bool, ahead: Ahead?) -> Step {
        guard !self.held, self.queuedCount > 0 else {
            if hasUnsettled { return .settleFirst }
            if mayLinger, !self.held, self.accepting { return .linger }
            self.draining = false
            return .stop
        }
        var count = min(self.queue.count, self.limits.maximumBatchCount)
        var usesAhead = false
        if let ahead, self.queue.first?.id == ahead.firstCommit, self.queuedCount >= ahead.count {
            count = ahead.count
            usesAhead = true
        }
        if hasUnsettled, !usesAhead { return .settleFirst }
        let batch = count == 0 ? [] : Array(self.queue.prefix(count))   // see `queuedCommits`
        self.queue.removeFirst(count)
        self.running = batch
        return .send(batch, usesAhead: usesAhead)
    }

    /// Everything queued, oldest first. Never `Array(_:)` of an empty deque: that writes the count of the
    /// shared empty array storage, a write ThreadSanitizer reports against every reader of an empty array.
    private var queuedCommits: [Commit] { self.queue.isEmpty ? [] : Array(self.queue) }

    /// The group the drain will take next, still queued (to build it ahead); empty when held or empty.
    package var nextGroup: [Commit] {
        guard !self.held, self.queuedCount > 0 else { return [] }
        return Array(self.queue.prefix(self.limits.maximumBatchCount))
    }

    /// Whether a lingering drain should stop waiting: something was queued, or it is held or shut.
    package var endsLinger: Bool { self.held || !self.accepting || self.queuedCount > 0 }

    /// Whether fewer sets are queued than one group takes (a drain with a batch delay waits for more).
    package var groupIsShort: Bool { self.queuedCount < self.limits.maximumBatchCount }

    /// A group's outcomes are applied: it frees its room. `clearRunning`: it is the group being committed (a
    /// later group may be running already: it was sent before this one settled).
    /// - Returns: the writers waiting for room, to resume.
    package mutating func settled(_ batch: [Commit], clearRunning: Bool = true) -> [Waiter] {
        if clearRunning, let first = batch.first, self.running.first?.id == first.id { self.running = [] }
        self.unfinishedCount -= batch.count
        self.unfinishedBytes -= batch.reduce(0) { $0 + $1.bytes }
        defer { self.roomWaiters = [] }
        return self.roomWaiters
    }

    // MARK: Lifecycle

    package mutating func hold() { self.held = true }

    /// Lets held commits run. Returns whether the caller starts a drain.
    package mutating func release() -> Bool {
        self.held = false
        return self.claimDrain()
    }

    package struct ShutdownAction {
        /// The caller starts a drain for what is queued.
        package let startDrain: Bool
        /// Writers waiting for room: resumed, they find the queue closed.
        package let waiters: [Waiter]
        /// The last commit queued: the shutdown waits for it.
        package let last: Commit?
    }

    /// Stops accepting commits and releases a hold; what is queued still commits.
    package mutating func shutdown() -> ShutdownAction {
        self.accepting = false
        self.held = false
        defer { self.roomWaiters = [] }
        return ShutdownAction(startDrain: self.claimDrain(), waiters: self.roomWaiters, last: self.last)
    }

    /// A shutdown's deadline passed: retries stop and nothing more is sent.
    /// - Returns: the commits still queued (they fail) and the group in flight (its outcome is unknown until
    ///   its transaction ends).
    package mutating func deadlinePassed() -> (queued: [Commit], inFlight: [Commit]) {
        self.abandoned = true
        self.held = true
        let queued = self.queuedCommits
        self.queue.removeAll()
        return (queued, self.running)
    }

    /// The store was destroyed: nothing queued will commit, and waiting writers stop waiting.
    /// - Returns: the commits that were queued (they fail) and the waiters to resume.
    package mutating func invalidate() -> (queued: [Commit], waiters: [Waiter]) {
        self.accepting = false
        let queued = self.queuedCommits
        self.queue.removeAll()
        defer { self.roomWaiters = [] }
        return (queued, self.roomWaiters)
    }
}
extension CommitQueueStateMachine: Sendable where Commit: Sendable, Waiter: Sendable {}
