import Foundation
import Logging
import SkyrosPostgres
import SkyrosStore
import Synchronization

/// The root writer: runs the commit queue's state machine (``CommitQueueStateMachine``, in the stack's lock
/// beside the readers' view) and does what its events return — starts drains, builds groups ahead, commits
/// them (``GroupCommitter``), settles their outcomes into the view, resumes writers waiting for room, reports
/// failures.
///
/// Commits reach the store in the order their sets were saved. A drain sends the queue as group commits of up to
/// ``CommitQueueConfiguration/maximumBatchCount`` sets until it is empty or held. On PostgreSQL it holds one
/// connection and runs on its thread, so one group goes out as soon as the one before returns; while a group is
/// on the server, the group before it settles and the next one is built, on the shared pool. Groups settle in
/// commit order, and a drain ends only with nothing unsettled.
///
/// Drains are the stack's only tasks not started by ``DataStack/run()``: a writer starts one on the connection
/// it leased (its thread becomes the drain's executor), which a child task of `run()` could not do without a
/// hand-off on the write's path. They are counted, and ``shutdown(timeout:)`` returns only after every one ended.
final class CommitQueue: Sendable {
    private let state: Locked<StackState>
    private let store: any GroupCommitStore
    private let configuration: CommitQueueConfiguration
    private let builder: ChangeSetBuilder
    private let committer: GroupCommitter
    private let metrics: CommitQueueMetrics
    private let logger: Logger
    private let saves: SaveNotifier
    private let onCommitError: @Sendable (DataStackError) -> Void
    /// The first half of this queue's commit ids; the second is the commit's number, so the ids of consecutive
    /// queued writes are consecutive.
    private let commitIDPrefix = UUID.commitPrefix()
    private let invalidated = Atomic<Bool>(false)
    /// Counts the drain tasks (shared by the stack's cores, so a shutdown waits for an old core's too).
    private let drains: TaskTracker

    init(
        state: Locked<StackState>, store: any GroupCommitStore, generation: Int, configuration: CommitQueueConfiguration,
        metrics: CommitQueueMetrics, saves: SaveNotifier, logger: Logger, drains: TaskTracker,
        onCommitError: @escaping @Sendable (DataStackError) -> Void
    ) {
        self.drains = drains
        self.state = state
        self.store = store
        self.configuration = configuration
        self.builder = ChangeSetBuilder(store: store, generation: generation)
        self.committer = GroupCommitter(
            store: store, builder: self.builder, state: state,
            policy: RetryPolicy(
                initialDelay: configuration.initialRetryDelay, maximumDelay: configuration.maximumRetryDelay,
                budget: configuration.maximumRetryDuration),
            metrics: metrics, logger: logger, outage: OutageLog(logger: logger, event: "group commit"))
        self.metrics = metrics
        self.saves = saves
        self.logger = logger
        self.onCommitError = onCommitError
    }

    static func stateMachine(_ configuration: CommitQueueConfiguration) -> CommitQueueStateMachine<QueuedCommit, OneShotWaiter> {
        CommitQueueStateMachine(
            limits: .init(
                maximumQueuedCommits: configuration.maximumQueuedCommits, maximumQueuedBytes: configuration.maximumQueuedBytes,
                maximumBatchCount: configuration.maximumBatchCount))
    }

    var isInvalidated: Bool { self.invalidated.load(ordering: .acquiring) }

    // MARK: Enqueue

    /// Makes saved changes visible to every reader at once and queues their commit.
    /// - Returns: the commit's ticket and its number in the queue, or `nil` when there was nothing to commit.
    /// - Throws: ``DataStackError`` `.stackShutDown` after ``shutdown(timeout:)``.
    func enqueue(
        _ slots: [ResolvedSlot], policy: MergePolicy?, logger: Logger? = nil
    ) throws -> (ticket: CommitTicket, commit: UInt64)? {
        if slots.isEmpty { return nil }
        let slots = ForeignKeyOrder.ordered(slots)
        let ticket = CommitTicket()
        var slotBytes: [Int] = []
        var slotValues: [[PGValue]?] = []
        slotBytes.reserveCapacity(slots.count)
        slotValues.reserveCapacity(slots.count)
        var bytes = 0
        for slot in slots {
            guard case .row(let row) = slot, let value = row.value else {
                slotBytes.append(0)
                slotValues.append(nil)
                bytes += 64
                continue
            }
            let values = row.encoded?.value ?? row.kind.encode(value)
            let size = approximateSize(of: values)
            slotBytes.append(size)
            slotValues.append(values)
            bytes += size
        }
        let policy = policy ?? self.configuration.mergePolicy
        let prefix = self.commitIDPrefix
        let trace = CommitTrace.current
        let action = self.state.withLock { state -> CommitQueueStateMachine<QueuedCommit, OneShotWaiter>.EnqueueAction in
            let action = state.queue.enqueue { id in
                QueuedCommit(
                    id: id, slots: slots, ticket: ticket, commitID: UUID(commitPrefix: prefix, sequence: id), policy: policy,
                    bytes: bytes, slotBytes: slotBytes, slotValues: slotValues, trace: trace, logger: logger)
            }
            if case .queued(let id, _) = action {
                state.view.addPending(slots, commit: id)
                self.metrics.queueDepth.record(state.queue.unfinishedCount)
            }
            return action
        }
        switch action {
        case .refused:
            throw DataStackError(code: .stackShutDown, message: "the stack was shut down; the write was not saved")
        case .queued(let commit, let startDrain):
            if startDrain { self.spawnDrain() }
            self.saves.saved(slots)
            return (ticket, commit)
        }
    }

    /// Waits while the queue is full (by count or bytes). Writers that do not wait (a context's synchronous
    /// ``DataContext/save()``) may exceed the bound by their own sets.
    /// - Throws: ``DataStackError`` `.stackShutDown` once the stack stops accepting writes; `.deadlineExceeded`
    ///   or `.writeCancelled` when `deadline` passes or the task is cancelled while it waits (nothing queued).
    func waitForRoom(until deadline: WriteDeadline = WriteDeadline(nil)) async throws {
        while true {
            let (accepting, proceed) = self.state.withLock { ($0.queue.accepting, $0.queue.hasRoom) }
            if !accepting {
                if self.isInvalidated {
                    throw DataStackError(code: .contextInvalidated, message: "the store was destroyed and rebuilt; the write was not saved")
                }
                throw DataStackError(code: .stackShutDown, message: "the stack was shut down; the write was not saved")
            }
            if proceed { return }
            if let interruption = deadline.interruption(queued: false) { throw interruption }
            let waiter = OneShotWaiter()
            await deadline.race {
                await waiter.wait { waiter in self.state.withLock { $0.queue.waitForRoom(waiter) } }
            }
        }
    }

    // MARK: Drains

    /// Starts a drain task, counted until it ends. `connection`: leased for it already; the task starts on its
    /// thread. Unstructured on purpose: see the type's documentation (started by a writer, on its connection's
    /// thread).
    private func spawnDrain(on connection: PGConnection? = nil) {
        self.drains.spawn(on: connection?.taskExecutor) { await untraced { await self.drain(startingOn: connection) } }
    }

    /// Starts a drain before a durable write's set is queued, when none runs (stores with connections): it
    /// leases its connection and moves to that connection's thread while the caller's body runs, then waits
    /// there a moment for the set (``drainLinger``), which goes out as soon as it is queued. Without it, the
    /// lease and the hand-off to the connection's thread come after the set is queued, on the write's path. A
    /// body that takes longer than the wait, or queues nothing, costs that lease and wait (the set then starts
    /// its own drain).
    ///
    /// An idle connection is leased at once, and the drain's task starts on that connection's thread: one thread
    /// woken (the connection's) instead of two (one of the shared pool's, then the connection's).
    func startDrainAhead() {
        guard self.store.drainsAhead, self.state.withLock({ $0.queue.claimDrainAhead() }) else { return }
        self.spawnDrain(on: self.store.leaseIdleConnection())
    }

    /// Sends queued commits in order until the queue is empty or held. The drain gives its connection back when
    /// another task waits for one (with a pool of one connection, readers would otherwise wait while writes keep
    /// coming), leases again behind it, and carries on.
    private func drain(startingOn leased: PGConnection?) async {
        var progress = DrainProgress()
        var leased = leased
        while true {
            var finished = true
            await self.store.withDrainConnection(leased: leased) { handOver, lingers in
                finished = await self.drainGroups(&progress, handOver: handOver, lingers: lingers)
            }
            leased = nil
            if finished { return }
        }
    }

    /// What a drain carries from one leased connection to the next.
    private struct DrainProgress {
        /// The group built while the one before it was on the server.
        var ahead: PreparedAhead?
        /// The group committed but not settled yet.
        var unsettled: (batch: [QueuedCommit], outcome: GroupOutcome)?
    }

    /// A group built while the one before it was on the server.
    private struct PreparedAhead: Sendable {
        let first: CommitQueueStateMachine<QueuedCommit, OneShotWaiter>.Ahead
        let group: PlannedGroup
    }

    /// The drain's loop. Returns `true` when the drain ended (nothing queued, nothing unsettled), `false` when
    /// `handOver` asked for the connection back between two groups.
    ///
    /// `lingers`: the drain runs on the thread of the connection it holds (never on the shared pool), so once
    /// the queue is empty it may wait there a moment for the next set (``lingerForSets(handOver:)``) before it
    /// ends. A caller that writes durably one set after another then finds the drain still running, on its
    /// connection's thread: its set goes out without a new drain task, a lease and a hop to that thread.
    private func drainGroups(_ progress: inout DrainProgress, handOver: () -> Bool, lingers: Bool) async -> Bool {
        var sentOne = false
        var lingered = false
        while true {
            // At least one group per lease, so a drain that keeps meeting waiters still makes progress.
            if sentOne, handOver() { return false }
            let delay = self.configuration.maximumBatchDelay
            if delay > .zero, progress.unsettled == nil, self.state.withLock({ $0.queue.groupIsShort }) {
                try? await Task.sleep(for: delay)
            }
            let ahead = progress.ahead
            progress.ahead = nil
            let hasUnsettled = progress.unsettled != nil
            let mayLinger = lingers && !lingered
            let step = self.state.withLock {
                $0.queue.nextStep(hasUnsettled: hasUnsettled, mayLinger: mayLinger, ahead: ahead?.first)
            }
            switch step {
            case .stop:
                return true
            case .linger:
                lingered = true
                self.lingerForSets(handOver: handOver)
            case .settleFirst:
                if let (batch, outcome) = progress.unsettled { self.settle(batch, outcome.results) }
                progress.unsettled = nil
            case .send(let batch, let usesAhead):
                sentOne = true
                lingered = false
                let prepared = usesAhead ? ahead?.group : nil
                let started = ContinuousClock.now
                let previous = progress.unsettled
                progress.unsettled = nil
                let buildsAhead = delay == .zero && self.state.withLock { $0.queue.queuedCount > 0 }
                if previous == nil, !buildsAhead {
                    // Nothing to do beside the round trip (a lone write): no hand-off to wait for after it.
                    let outcome = await CommitTrace.traced(batch) { await self.committer.commit(batch, prepared: prepared) }
                    self.metrics.recordGroup(size: batch.count, latency: ContinuousClock.now - started)
                    progress.unsettled = (batch, outcome)
                    continue
                }
                let outcome: GroupOutcome
                (outcome, progress.ahead) = await withTaskGroup(of: PreparedAhead?.self) { side in
                    // Off the drain's thread (the connection's, on PostgreSQL), while this group is on the server;
                    // settling one group and building the next are independent, so they run side by side too.
                    if let (batch, outcome) = previous {
                        side.addTask(executorPreference: globalConcurrentExecutor) {
                            self.settle(batch, outcome.results)
                            return nil
                        }
                    }
                    if buildsAhead {
                        side.addTask(executorPreference: globalConcurrentExecutor) { self.prepareAhead() }
                    }
                    let outcome = await CommitTrace.traced(batch) { await self.committer.commit(batch, prepared: prepared) }
                    self.metrics.recordGroup(size: batch.count, latency: ContinuousClock.now - started)
                    var built: PreparedAhead?
                    for await group in side { built = built ?? group }
                    return (outcome, built)
                }
                progress.unsettled = (batch, outcome)
            }
        }
    }

    /// How long an idle drain waits for the next set before it ends (see ``drainGroups(_:handOver:lingers:)``):
    /// about one round trip of a caller resuming and queueing its next write. Its connection's thread spins as
    /// long again once it has no work, so this adds at most that to an idle stack's CPU per drain.
    static let drainLinger: Duration = .microseconds(50)

    /// Spins on the drain's connection thread until a set is queued, the queue is held or shut, another task
    /// wants the connection, or ``drainLinger`` passes.
    private func lingerForSets(handOver: () -> Bool) {
        let deadline = ContinuousClock.now.advanced(by: Self.drainLinger)
        repeat {
            sched_yield()
            if self.state.withLock({ $0.queue.endsLinger }) || handOver() { return }
        } while ContinuousClock.now < deadline
    }

    /// Builds the group that will be taken next (the queued sets at the head, still in the queue) as a pipeline,
    /// while the current group runs. Only when no set of it needs a version a queued commit produces (those
    /// are known once the group before has settled): then it is built when it is taken.
    private func prepareAhead() -> PreparedAhead? {
        let (batch, hook) = self.state.withLock { ($0.queue.nextGroup, $0.hook) }
        guard let first = batch.first else { return nil }
        guard let plan = self.builder.plan(batch, settled: nil), let group = self.store.prepareGroup(plan, hook: hook) else { return nil }
        return PreparedAhead(first: .init(firstCommit: first.id, count: batch.count), group: PlannedGroup(plan: plan, pipeline: group))
    }

    // MARK: Settlement

    /// Applies a group's outcomes to the main context in commit order — under one lock acquisition for the
    /// whole group, so writers waiting to enqueue do not contend with one update per set — then reports
    /// failures, completes the tickets in order, and frees the group's room in the queue.
    private func settle(_ batch: [QueuedCommit], _ outcomes: [Result<ChangeSetResult, any Error>], clearRunning: Bool = true) {
        // Committed rows whose stored value may differ from the one observers were shown (see `StackView.succeed`).
        var reread: [ResolvedSlot] = []
        let waiters = self.state.withLock { state -> [OneShotWaiter] in
            for (commit, outcome) in zip(batch, outcomes) {
                switch outcome {
                case .success(let result): state.view.succeed(commit, result: result, reread: &reread)
                case .failure: state.view.fail(commit)
                }
            }
            state.view.finishedCommits += 1
            let waiters = state.queue.settled(batch, clearRunning: clearRunning)
            self.metrics.queueDepth.record(state.queue.unfinishedCount)
            return waiters
        }
        for (commit, outcome) in zip(batch, outcomes) {
            switch outcome {
            case .success:
                commit.ticket.complete(.success(()))
            case .failure(let error):
                self.saves.saved(commit.slots)   // the reverted rows change what observers see
                if case StoreError.versionConflict = error { self.metrics.conflicts.increment() }
                self.metrics.failures.increment()
                self.report(commit, failedWith: error)
                self.onCommitError(
                    DataStackError(code: .commitFailed, message: "a queued write was not committed and was reverted", underlying: error))
                commit.ticket.complete(.failure(error))
            }
        }
        // Their observers were shown the value as written (from the queue); they look again.
        self.saves.saved(reread)
        for waiter in waiters { waiter.resume() }
    }

    /// Logs a set that failed for good: at `error` when nobody awaits its outcome (a queued write whose caller
    /// returned long ago: nothing else would say it failed), at `debug` when a durable writer or a completion
    /// handler gets the error. Names the entity, the row that failed (``failedRows(of:error:)``), the SQLSTATE
    /// and the constraint; never a value.
    private func report(_ commit: QueuedCommit, failedWith error: any Error) {
        var metadata: Logger.Metadata = ["skyros.stack.commit": "\(commit.id)", "skyros.stack.rows": "\(commit.slots.count)"]
        let failed = Self.failedRows(of: commit.slots, error: error)
        if let row = failed.first {
            metadata["skyros.entity"] = "\(row.kind.entityName)"
            metadata["skyros.row.table"] = "\(row.key.table)"
            if failed.count == 1 {
                metadata["skyros.row.id"] = "\(row.key.id.text ?? "NULL")"
            } else {
                // Several rows of the table the server named: one of them failed (which one, only the values
                // would tell, and those are never logged).
                metadata["skyros.row.candidates"] = "\(failed.count)"
                metadata["skyros.row.ids"] = "\(failed.prefix(5).map { $0.key.id.text ?? "NULL" }.joined(separator: ","))"
            }
        }
        switch error {
        case let error as PGError:
            if let state = error.sqlState { metadata["skyros.error.sqlstate"] = "\(state.rawValue)" }
            if let constraint = error.constraint { metadata["skyros.error.constraint"] = "\(constraint)" }
            if let table = error.table { metadata["skyros.error.table"] = "\(table)" }
            metadata["skyros.error.kind"] = "\(error.kind)"
            if let detail = self.configuration.logsRowValues ? error.detail : error.redactedDetail {
                metadata["skyros.error.detail"] = "\(detail)"
            }
        case let error as StoreError:
            metadata["skyros.error"] = "\(error)"
        default:
            metadata["skyros.error.type"] = "\(type(of: error))"
        }
        // The writer's own logger when it passed one (a request's, with its id), else the stack's.
        let logger = commit.logger ?? self.logger
        if commit.ticket.isAwaited {
            logger.debug("a write failed to commit and was reverted", metadata: metadata)
        } else {
            logger.error("a queued write failed to commit and was reverted", metadata: metadata)
        }
    }

    /// The rows of a failed set that the error is about: the row a version conflict or a missing row names;
    /// for a server error, the set's rows of the table it names (a unique, foreign-key, not-null or check
    /// violation names the table written). When the error names no row of the set, its only row if it has one
    /// (a delete that a foreign key refused: the server names the referencing table); else none.
    static func failedRows(of slots: [ResolvedSlot], error: any Error) -> [PendingRow] {
        let rows = slots.compactMap { slot -> PendingRow? in
            if case .row(let row) = slot { return row }
            return nil
        }
        var named: [PendingRow] = []
        switch error {
        case StoreError.versionConflict(let entity, let id, _, _), StoreError.notFound(let entity, let id):
            named = rows.filter { ($0.key.id.text ?? "NULL") == id }
            if named.count > 1 { named = named.filter { $0.kind.entityName == entity } }
        case let error as PGError:
            if let table = error.table { named = rows.filter { $0.key.table == table } }
        default:
            break
        }
        if named.isEmpty, rows.count == 1 { return rows }
        return named
    }

    // MARK: Lifecycle

    /// Test hook: queued commits wait (a commit already running finishes) until ``release()``.
    func hold() { self.state.withLock { $0.queue.hold() } }

    func release() {
        if self.state.withLock({ $0.queue.release() }) { self.spawnDrain() }
    }

    /// The number of commits queued and not yet started.
    var queuedCommits: Int { self.state.withLock { $0.queue.queuedCount } }

    /// Waits until every commit queued so far has finished (either way).
    func flush() async {
        guard let last = self.state.withLock({ $0.queue.last }) else { return }
        _ = try? await last.ticket.wait()
    }

    /// Stops accepting saves, releases a hold, and waits for the queue to drain — at most `timeout` (`nil`: as
    /// long as it takes). After the deadline, retries stop and the sets still queued fail (reverted, their
    /// callers get `.stackShutDown`). Returns once no drain task runs.
    /// - Returns: what did not commit: the queued sets that failed, and the group in flight (outcome unknown
    ///   until its transaction ends).
    func shutdown(timeout: Duration?) async -> ShutdownReport {
        let action = self.state.withLock { $0.queue.shutdown() }
        for waiter in action.waiters { waiter.resume() }
        if action.startDrain { self.spawnDrain() }
        guard let last = action.last else {
            await self.drains.allEnded()
            return ShutdownReport(uncommitted: [], inFlight: [])
        }
        let drained: Bool
        if let timeout {
            drained = await withTaskGroup(of: Bool.self) { group in
                group.addTask { await last.ticket.waitUnlessCancelled() }
                group.addTask {
                    try? await Task.sleep(for: timeout)
                    return false
                }
                let first = await group.next() ?? false
                group.cancelAll()
                return first
            }
        } else {
            _ = try? await last.ticket.wait()
            drained = true
        }
        if drained {
            await self.drains.allEnded()
            return ShutdownReport(uncommitted: [], inFlight: [])
        }
        let (queued, inFlight) = self.state.withLock { $0.queue.deadlinePassed() }
        let error = DataStackError(code: .stackShutDown, message: "the stack shut down before this write was committed")
        self.settle(queued, queued.map { _ in .failure(error) }, clearRunning: false)
        self.logger.warning(
            "shutdown deadline passed", metadata: ["skyros.stack.uncommitted": "\(queued.count)", "skyros.stack.in_flight": "\(inFlight.count)"])
        return ShutdownReport(uncommitted: queued.map(UncommittedWrite.init), inFlight: inFlight.map(UncommittedWrite.init))
    }

    /// Invalidates the queue (after a destroy): queued commits fail, and writers waiting for room stop waiting
    /// (they find it no longer accepting and throw).
    func invalidate() {
        self.invalidated.store(true, ordering: .releasing)
        let (queued, waiters) = self.state.withLock { state in
            state.view.clear()
            return state.queue.invalidate()
        }
        for waiter in waiters { waiter.resume() }
        for commit in queued {
            commit.ticket.complete(.failure(DataStackError(
                code: .contextInvalidated, message: "the store was destroyed before this write was committed")))
        }
    }
}
