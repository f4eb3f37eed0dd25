import Foundation
import Logging
import SkyrosPostgres
import Synchronization
import SkyrosStore

/// The root of a stack's context tree: the row cache, the changes saved into it that are still queued for
/// commit (overlaid on every read, so readers see a write as soon as it is saved), and the ordered commit
/// path that applies one ``ChangeSet`` per save through ``Store/apply(_:)``, in save order.
///
/// All state is in one mutex with short, synchronous critical sections; store calls happen outside it.
/// A destroyed store gets a new core; the old one is invalidated and its contexts refuse to work.
package final class StackCore: Sendable {
    struct PendingEntry: Sendable {
        let commit: UInt64
        let row: PendingRow
    }

    /// A queued change set (a class: groups and the queue pass it around, one reference each).
    final class QueuedCommit: Sendable {
        let id: UInt64
        let slots: [ResolvedSlot]
        let ticket: CommitTicket
        /// The idempotency key recorded in the commit log in the commit's own transaction.
        let commitID: UUID
        let policy: MergePolicy
        /// Approximate row bytes, counted against ``CommitQueueConfiguration/maximumQueuedBytes``.
        let bytes: Int
        /// Each slot's approximate row size (0 for a deletion), measured once at enqueue for the cache.
        let slotBytes: [Int]
        /// Each slot's column values, encoded once at enqueue (`nil` for a deletion): the size above, and the
        /// values an insert binds.
        let slotValues: [[PostgresValue]?]

        init(
            id: UInt64, slots: [ResolvedSlot], ticket: CommitTicket, commitID: UUID, policy: MergePolicy, bytes: Int,
            slotBytes: [Int], slotValues: [[PostgresValue]?]
        ) {
            self.id = id
            self.slots = slots
            self.ticket = ticket
            self.commitID = commitID
            self.policy = policy
            self.bytes = bytes
            self.slotBytes = slotBytes
            self.slotValues = slotValues
        }
    }

    struct State: Sendable {
        var cache: RowCache
        /// Queued changes per row, oldest first; the last one is what readers see.
        var pending: [RowKey: [PendingEntry]] = [:]
        var pendingCountByTable = TableCounts()
        /// Rows another process changed while they had a queued local change: when that change commits, its
        /// value may be older than the other process's, so the row is evicted rather than cached.
        var remoteChangedWhilePending: Set<RowKey> = []
        /// The versions recent commits gave the rows they wrote (see ``BaseVersion/pending(commit:)``).
        var settled = SettledVersions()
        var queue: [QueuedCommit] = []
        var queueHead = 0
        var nextCommit: UInt64 = 1
        /// Bumped whenever a commit finishes (either way): a read that overlaps one retries or skips caching.
        var finishedCommits: UInt64 = 0
        var draining = false
        var held = false
        var accepting = true
        var lastTicket: CommitTicket?
        /// Sets queued or being committed, and their bytes (the backpressure bound).
        var unfinishedCount = 0
        var unfinishedBytes = 0
        /// Writers waiting for room in the queue.
        var roomWaiters: [CheckedContinuation<Void, Never>] = []
        /// The group being committed (for a shutdown report).
        var running: [QueuedCommit] = []
        /// Set by a shutdown whose deadline passed: retries stop, queued sets fail.
        var abandoned = false
        var hook: (any CommitTransactionHook)?

        var queuedCount: Int { self.queue.count - self.queueHead }

        /// The latest queued change of each row of `table`.
        func pendingRows(ofTable table: String) -> [RowKey: PendingEntry] {
            guard self.pendingCountByTable[table] > 0 else { return [:] }
            var rows: [RowKey: PendingEntry] = [:]
            for (key, entries) in self.pending where key.table == table {
                if let last = entries.last { rows[key] = last }
            }
            return rows
        }
    }

    let store: any Store
    let generation: Int
    private let logger: Logger
    private let onCommitError: @Sendable (DataStackError) -> Void
    private let invalidatedFlag = Atomic<Bool>(false)
    let state: Locked<State>
    let queueConfiguration: CommitQueueConfiguration
    package let metrics = CommitQueueMetrics()
    /// The first half of this core's commit ids; the second is the commit's sequence number (``State/nextCommit``),
    /// so the ids of consecutive queued writes are consecutive.
    private let commitIDPrefix = UUID.commitPrefix()
    /// Wakes the stack's observers after a save (set by the stack's ``StackSync``).
    package let saves = SaveNotifier()

    package init(
        store: any Store, cacheLimit: CacheLimit, generation: Int, logger: Logger,
        queueConfiguration: CommitQueueConfiguration = CommitQueueConfiguration(),
        onCommitError: @escaping @Sendable (DataStackError) -> Void
    ) {
        self.queueConfiguration = queueConfiguration
        self.store = store
        self.generation = generation
        self.logger = logger
        self.onCommitError = onCommitError
        self.state = Locked(State(cache: RowCache(limit: cacheLimit)))
    }

    var isInvalidated: Bool { self.invalidatedFlag.load(ordering: .acquiring) }

    var measuresBytes: Bool { self.state.withLock { $0.cache.limit.maxBytes != nil } }

    package var statistics: CacheStatistics {
        self.state.withLock {
            CacheStatistics(
                rows: $0.cache.count, bytes: $0.cache.totalBytes, hits: $0.cache.hits, misses: $0.cache.misses,
                evictions: $0.cache.evictions)
        }
    }

    // MARK: Reads

    /// The row with `id` (its key: `key`) as readers of the main context see it: queued change, else cache, else
    /// store. `nil` also when the row is held as another entity type of the same table.
    func lookup<T: Entity>(_ type: T.Type, id: T.ID, key: RowKey) async throws -> FoundRow? {
        var fetched: Versioned<T>?
        for attempt in 0..<3 {
            let phase = self.state.withLock { state -> LocalLookup in
                if let entry = state.pending[key]?.last {
                    return .found(FoundRow(entry.row.value, as: T.self, base: .pending(commit: entry.commit)))
                }
                if let entry = state.cache.get(key), entry.value is T {
                    return .found(FoundRow(value: entry.value, base: .known(entry.version)))
                }
                return .miss(finishedCommits: state.finishedCommits)
            }
            let before: UInt64
            switch phase {
            case .found(let row): return row
            case .miss(let finishedCommits): before = finishedCommits
            }
            fetched = try await self.store.object(T.self, id: id)
            let bytes = try fetched.map { try self.size(of: $0.value) } ?? 0
            let settled = self.state.withLock { state -> Bool in
                guard state.finishedCommits == before else { return false }
                if let fetched, state.pending[key] == nil {
                    state.cache.put(key, value: fetched.value, version: fetched.version, bytes: bytes)
                }
                return true
            }
            if settled || attempt == 2 { break }
        }
        // A change queued while the row was read wins over what the store returned.
        return self.state.withLock { state in
            if let entry = state.pending[key]?.last { return FoundRow(entry.row.value, as: T.self, base: .pending(commit: entry.commit)) }
            return fetched.map { FoundRow(value: $0.value, base: .known($0.version)) }
        }
    }

    /// What ``lookup(_:id:key:)`` found without the store: the row (`nil`: queued for deletion, or held as
    /// another entity type), or a miss, with the settle count the store read must not see change.
    private enum LocalLookup {
        case found(FoundRow?)
        case miss(finishedCommits: UInt64)
    }

    /// The rows matching `descriptor` as readers of the main context see them: the store's rows with the
    /// queued changes overlaid (inserts that match added, updates replaced, deletes removed, sort and window
    /// applied again). Fills the cache with what it read.
    func fetch<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> [(value: T, base: BaseVersion)] {
        let table = T.tableName
        var result: [(value: T, base: BaseVersion)] = []
        for attempt in 0..<3 {
            let (snapshot, before) = self.state.withLock { ($0.pendingRows(ofTable: table), $0.finishedCommits) }
            let rows = try await self.store.fetch(Overlay.widened(descriptor, by: snapshot.count))
            let measure = self.measuresBytes
            let keyed = try rows.map { row in
                (key: try RowKey(row.value), row: row, bytes: measure ? try self.size(of: row.value) : 0)
            }
            let (settled, current) = self.state.withLock { state -> (Bool, [RowKey: PendingEntry]) in
                guard state.finishedCommits == before else { return (false, [:]) }
                for entry in keyed where state.pending[entry.key] == nil {
                    state.cache.put(entry.key, value: entry.row.value, version: entry.row.version, bytes: entry.bytes)
                }
                var current: [RowKey: PendingEntry] = [:]
                for key in snapshot.keys { current[key] = state.pending[key]?.last }
                return (true, current)
            }
            if !settled && attempt < 2 { continue }
            // Overlay the rows that were queued when the read began, in their latest queued state.
            var overlay = snapshot
            for (key, entry) in current { overlay[key] = entry }
            result = try Overlay.apply(
                descriptor, base: rows.map { ($0.value, BaseVersion.known($0.version)) }, changes: overlay.mapValues(\.row),
                changeBase: { key in overlay[key].map { .pending(commit: $0.commit) } ?? .none })
            break
        }
        return result
    }

    func count<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> Int {
        let pending = self.state.withLock { $0.pendingCountByTable[T.tableName] > 0 }
        if !pending { return try await self.store.count(descriptor) }
        return try await self.fetch(descriptor).count
    }

    /// Creates the row unless it exists, in the store at once (race-free across processes), and caches it.
    /// Whether a queued write deletes the row (the last queued change of it is a deletion).
    func isPendingDeletion(_ key: RowKey) -> Bool {
        self.state.withLock { state in state.pending[key]?.last.map { $0.row.value == nil } ?? false }
    }

    /// The row is cached only if no commit of this stack settled while it was read (as ``lookup(_:id:key:)``
    /// does): one that changed it would otherwise be overwritten in the cache by the older row.
    /// A row it creates is announced as a commit's are: to other processes by the change feed's hook (in the
    /// creating transaction), and to this stack's observers. Returns the row with the version it has.
    func findOrCreate<T: Entity>(_ value: T) async throws -> (value: T, version: Int64, created: Bool) {
        let (before, hook) = self.state.withLock { ($0.finishedCommits, $0.hook) }
        let (row, created) =
            if let postgres = self.store as? PostgresStore {
                try await postgres.findOrCreate(value, announcing: hook)
            } else {
                try await self.store.findOrCreate(value)
            }
        let key = try RowKey(row.value)
        let bytes = try self.size(of: row.value)
        self.state.withLock { state in
            if state.finishedCommits == before, state.pending[key] == nil {
                state.cache.put(key, value: row.value, version: row.version, bytes: bytes)
            }
        }
        if created {
            self.saves.saved([.row(PendingRow(key: key, kind: EntityKind<T>(), id: row.value.id, state: .inserted(row.value)))])
        }
        return (row.value, row.version, created)
    }

    private func size<T: Entity>(of value: T) throws -> Int {
        guard self.measuresBytes else { return 0 }
        return approximateSize(of: EntityKind<T>().encode(value))
    }

    // MARK: Commits

    /// Makes saved changes visible to every reader at once and queues their commit.
    /// - Returns: the commit's ticket and its number in the queue, or `nil` when there was nothing to commit.
    /// - Throws: ``DataStackError`` `.stackShutDown` after ``shutdown()``.
    func enqueue(_ slots: [ResolvedSlot], policy: MergePolicy? = nil) throws -> (ticket: CommitTicket, commit: UInt64)? {
        if slots.isEmpty { return nil }
        let ticket = CommitTicket()
        var slotBytes: [Int] = []
        var slotValues: [[PostgresValue]?] = []
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
        let policy = policy ?? self.queueConfiguration.mergePolicy
        let (startDrain, commit) = try self.state.withLock { state -> (Bool, UInt64) in
            guard state.accepting else {
                throw DataStackError(code: .stackShutDown, message: "the stack was shut down; the write was not saved")
            }
            let id = state.nextCommit
            state.nextCommit += 1
            for case .row(let row) in slots {
                let entry = PendingEntry(commit: id, row: row)
                if let slot = state.pending.index(forKey: row.key) {
                    state.pending.values[slot].append(entry)
                } else {
                    state.pending[row.key] = [entry]
                    state.cache.pin(row.key)
                }
                state.pendingCountByTable[row.key.table] += 1
            }
            state.queue.append(
                QueuedCommit(
                    id: id, slots: slots, ticket: ticket, commitID: UUID(commitPrefix: self.commitIDPrefix, sequence: id),
                    policy: policy, bytes: bytes, slotBytes: slotBytes, slotValues: slotValues))
            state.unfinishedCount += 1
            state.unfinishedBytes += bytes
            self.metrics.queueDepth.record(state.unfinishedCount)
            state.lastTicket = ticket
            return (self.claimDrain(&state), id)
        }
        if startDrain { self.startDrain() }
        self.saves.saved(slots)
        return (ticket, commit)
    }

    /// Whether the caller should start a drainer (and marks one as running).
    private func claimDrain(_ state: inout State) -> Bool {
        guard !state.draining, !state.held, state.queuedCount > 0 else { return false }
        state.draining = true
        return true
    }

    private func startDrain() {
        Task { await self.drain() }
    }

    /// Starts a drain before a durable write's set is queued, when none runs (PostgreSQL only): it leases its
    /// connection and moves to that connection's thread while the caller's body runs, then waits there a moment
    /// for the set (``drainLinger``), which goes out as soon as it is queued. Without it, the lease and the
    /// hand-off to the connection's thread came after the set was queued, on the write's path. A body that
    /// takes longer than the wait, or queues nothing, costs that lease and wait (the set then starts its own
    /// drain, as before).
    ///
    /// An idle connection is leased at once, and the drain's task starts on that connection's thread: one thread
    /// woken (the connection's) instead of two (one of the shared pool's, then the connection's).
    package func startDrainAhead() {
        guard let postgres = self.store as? PostgresStore else { return }
        let start = self.state.withLock { state -> Bool in
            guard !state.draining, !state.held, state.accepting else { return false }
            state.draining = true
            return true
        }
        guard start else { return }
        guard let connection = postgres.pool.leaseIdleNow() else {
            self.startDrain()
            return
        }
        Task(executorPreference: connection.taskExecutor) { await self.drain(startingOn: connection) }
    }

    /// Sends queued commits in order, as group-commit transactions of up to
    /// ``CommitQueueConfiguration/maximumBatchCount`` sets, until the queue is empty or held.
    ///
    /// On PostgreSQL the drain holds one connection and runs on its thread
    /// (``PostgresStore/withCommitConnection(_:)``), so one group goes out as soon as the one before returns.
    /// The work around a round trip overlaps it on the shared pool: while a group is on the server, the group
    /// before it is settled (its rows enter the cache, its callers resume) and the next one is built (see
    /// ``prepareAhead()``). A group that was not built ahead is built only after the one before it settled, as
    /// it may need the versions that one produced. Groups settle in commit order, and a drain ends only with
    /// nothing unsettled.
    ///
    /// The drain gives its connection back when another task waits for one (with a pool of one connection,
    /// readers would otherwise wait while writes keep coming), leases again behind it, and carries on.
    /// `startingOn`: a connection leased for the drain already (see ``startDrainAhead()``), used first.
    private func drain(startingOn leased: Connection? = nil) async {
        var progress = DrainProgress()
        guard let postgres = self.store as? PostgresStore else {
            _ = await self.drainGroups(&progress, handOver: { false })
            return
        }
        var leased = leased
        while true {
            var finished = true
            await postgres.withCommitConnection(leased: leased) {
                finished = await self.drainGroups(
                    &progress, handOver: { postgres.commitConnectionIsWanted }, lingers: PostgresStore.commitConnection != nil)
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

    /// The drain's loop. Returns `true` when the drain ended (nothing queued, nothing unsettled), `false` when
    /// `handOver` asked for the connection back between two groups.
    ///
    /// `lingers`: the drain runs on the thread of the connection it holds (never on the shared pool), so once
    /// the queue is empty it may wait there a moment for the next set (``lingerForSets(handOver:)``) before it
    /// ends. A caller that writes durably one set after another then finds the drain still running, on its
    /// connection's thread: its set goes out without a new drain task, a lease and a hop to that thread.
    private func drainGroups(_ progress: inout DrainProgress, handOver: () -> Bool, lingers: Bool = false) async -> Bool {
        var sentOne = false
        var lingered = false
        while true {
            // At least one group per lease, so a drain that keeps meeting waiters still makes progress.
            if sentOne, handOver() { return false }
            let delay = self.queueConfiguration.maximumBatchDelay
            if delay > .zero, progress.unsettled == nil,
                self.state.withLock({ $0.queuedCount < self.queueConfiguration.maximumBatchCount })
            {
                try? await Task.sleep(for: delay)
            }
            let hasUnsettled = progress.unsettled != nil
            let ahead = progress.ahead
            let mayLinger = lingers && !lingered
            let step = self.state.withLock { state -> DrainStep in
                guard !state.held, state.queuedCount > 0 else {
                    if hasUnsettled { return .settleFirst }
                    if mayLinger, !state.held, state.accepting { return .linger }
                    state.draining = false
                    return .stop
                }
                // The group built ahead, if the queue still starts with it (a shutdown deadline or an
                // invalidation may have emptied the queue since).
                var prepared: PostgresStore.PreparedGroup?
                var end = min(state.queue.count, state.queueHead + max(1, self.queueConfiguration.maximumBatchCount))
                if let ahead, state.queue[state.queueHead].id == ahead.firstCommit, state.queuedCount >= ahead.count {
                    end = state.queueHead + ahead.count
                    prepared = ahead.group
                }
                if hasUnsettled, prepared == nil { return .settleFirst }
                let batch = Array(state.queue[state.queueHead..<end])
                state.queueHead = end
                if state.queueHead > 64, state.queueHead * 2 > state.queue.count {
                    state.queue.removeFirst(state.queueHead)
                    state.queueHead = 0
                }
                state.running = batch
                return .send(batch, prepared)
            }
            progress.ahead = nil
            switch step {
            case .stop:
                return true
            case .linger:
                lingered = true
                self.lingerForSets(handOver: handOver)
            case .settleFirst:
                if let (batch, outcome) = progress.unsettled { self.settle(batch, outcome.results) }
                progress.unsettled = nil
            case .send(let batch, let prepared):
                sentOne = true
                lingered = false
                let started = ContinuousClock.now
                let previous = progress.unsettled
                progress.unsettled = nil
                let buildsAhead = delay == .zero && self.state.withLock { $0.queuedCount > 0 }
                if previous == nil, !buildsAhead {
                    // Nothing to do beside the round trip (a lone write): no hand-off to wait for after it.
                    let outcome = await self.commitGroup(batch, prepared: prepared)
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
                    let outcome = await self.commitGroup(batch, prepared: prepared)
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
            if self.state.withLock({ $0.held || !$0.accepting || $0.queuedCount > 0 }) || handOver() { return }
        } while ContinuousClock.now < deadline
    }

    private enum DrainStep {
        /// Nothing to send and nothing unsettled: the drain ends.
        case stop
        /// Nothing to send and nothing unsettled: the drain may wait a moment for the next set.
        case linger
        /// The previous group must settle before anything else.
        case settleFirst
        /// Send this group (`prepared`: built ahead).
        case send([QueuedCommit], PostgresStore.PreparedGroup?)
    }

    /// A group built while the one before it was on the server.
    private struct PreparedAhead: Sendable {
        let firstCommit: UInt64
        let count: Int
        let group: PostgresStore.PreparedGroup
    }

    /// Builds the group that will be taken next (the queued sets at the head, still in the queue) as a pipeline,
    /// while the current group runs. Only when no set of it needs a version a queued commit produces (those
    /// are known once the group before has settled): then it is built when it is taken, as before.
    private func prepareAhead() -> PreparedAhead? {
        guard let postgres = self.store as? PostgresStore else { return nil }
        let (batch, hook) = self.state.withLock { state -> ([QueuedCommit], (any CommitTransactionHook)?) in
            guard !state.held, state.queuedCount > 0 else { return ([], nil) }
            let end = min(state.queue.count, state.queueHead + max(1, self.queueConfiguration.maximumBatchCount))
            return (Array(state.queue[state.queueHead..<end]), state.hook)
        }
        guard let first = batch.first else { return nil }
        let group = postgres.prepareGroupPipeline(
            ids: batch.map(\.commitID),
            build: { index, _ in try self.changeSet(for: batch[index], state: nil, prior: PriorOutcomes()) },
            operations: { self.insertOperations(for: batch[$0], store: postgres) },
            hook: hook)
        return group.map { PreparedAhead(firstCommit: first.id, count: batch.count, group: $0) }
    }

    /// Applies a group's outcomes to the main context in commit order — under one lock acquisition for the
    /// whole group, so 64 writers waiting to enqueue do not contend with 64 separate updates — then reports
    /// failures, completes the tickets in order, and frees the group's room in the queue.
    private func settle(_ batch: [QueuedCommit], _ outcomes: [Result<ChangeSetResult, any Error>], clearRunning: Bool = true) {
        // Committed rows whose stored value may differ from the one observers were shown (see `succeed`).
        var reread: [ResolvedSlot] = []
        let waiters = self.state.withLock { state -> [CheckedContinuation<Void, Never>] in
            for (commit, outcome) in zip(batch, outcomes) {
                switch outcome {
                case .success(let result): self.succeed(commit, result: result, state: &state, reread: &reread)
                case .failure: self.fail(commit, state: &state)
                }
            }
            state.finishedCommits += 1
            // (A later group may be running already: it was sent before this one settled.)
            if clearRunning, state.running.first === batch.first { state.running = [] }
            state.unfinishedCount -= batch.count
            state.unfinishedBytes -= batch.reduce(0) { $0 + $1.bytes }
            self.metrics.queueDepth.record(state.unfinishedCount)
            defer { state.roomWaiters = [] }
            return state.roomWaiters
        }
        for (commit, outcome) in zip(batch, outcomes) {
            switch outcome {
            case .success:
                commit.ticket.complete(.success(()))
            case .failure(let error):
                self.saves.saved(commit.slots)   // the reverted rows change what observers see
                if case StoreError.versionConflict = error { self.metrics.conflicts.increment() }
                self.logger.debug("commit failed", metadata: ["skyros.stack.commit": "\(commit.id)", "skyros.error": "\(error)"])
                self.onCommitError(
                    DataStackError(code: .commitFailed, message: "a queued write was not committed and was reverted", underlying: error))
                commit.ticket.complete(.failure(error))
            }
        }
        // Their observers were shown the value as written (from the queue); they look again.
        self.saves.saved(reread)
        for waiter in waiters { waiter.resume() }
    }

    /// Commits one group, retrying transient failures with backoff; never applies a set twice (after an
    /// ambiguous failure the commit log says which sets of the failed attempt committed). When a deferred
    /// constraint fails the group's commit, its sets are committed again one by one, in order, so that only the
    /// sets that break the constraint fail (``PostgresStore/failedAtCommit(_:)``).
    /// - Returns: one outcome per commit, in order (a group committed whole by one pipeline is mapped to them
    ///   when settled). `prepared`: the group built ahead, sent on the first attempt. `prior`: the outcomes of
    ///   the sets queued before `batch` that are not settled yet (a set may need a version one of them wrote).
    private func commitGroup(
        _ batch: [QueuedCommit], prepared: PostgresStore.PreparedGroup? = nil, prior: [PriorOutcome] = []
    ) async -> GroupOutcome {
        var outcomes = [Result<ChangeSetResult, any Error>?](repeating: nil, count: batch.count)
        let started = ContinuousClock.now
        var attempt = 0
        var mustCheckLog = false
        // An attempt failed in a way that may have committed it (the connection broke), and no read of the
        // commit log since has said which of its sets did.
        var outcomeUnresolved = false
        while true {
            var remaining = outcomes.indices.filter { outcomes[$0] == nil }
            do {
                if mustCheckLog, let postgres = self.store as? PostgresStore {
                    let committed = try await postgres.committedIDs(
                        remaining.map { batch[$0].commitID }, since: batch[0].commitID)
                    for index in remaining where committed.contains(batch[index].commitID) {
                        outcomes[index] = .success(.committedUnseen)
                    }
                    remaining = remaining.filter { outcomes[$0] == nil }
                    mustCheckLog = false
                    outcomeUnresolved = false
                }
                if remaining.isEmpty { break }
                let outcome = try await self.apply(
                    remaining.map { batch[$0] }, prepared: attempt == 0 ? prepared : nil, prior: prior)
                if remaining.count == batch.count { return outcome }
                for (index, result) in zip(remaining, outcome.results) { outcomes[index] = result }
                break
            } catch {
                let abandoned = self.state.withLock { $0.abandoned }
                if remaining.count > 1, !abandoned, PostgresStore.failedAtCommit(error) {
                    self.logger.info(
                        "a deferred constraint failed the group's commit; committing its sets one by one",
                        metadata: ["skyros.stack.sets": "\(remaining.count)", "skyros.error": "\(error)"])
                    for index in remaining {
                        let earlier = prior + zip(batch[..<index], outcomes[..<index]).compactMap { commit, outcome in
                            outcome.map { PriorOutcome(commit: commit.id, result: $0) }
                        }
                        outcomes[index] = await self.commitGroup([batch[index]], prior: earlier).results[0]
                    }
                    break
                }
                if Self.mayHaveCommitted(error) { outcomeUnresolved = true }
                guard Self.isTransient(error), !abandoned,
                    ContinuousClock.now - started < self.queueConfiguration.maximumRetryDuration
                else {
                    let failure =
                        outcomeUnresolved
                        ? await self.settleAbandonedAttempt(batch, remaining: remaining, error: error, into: &outcomes) : error
                    for index in remaining where outcomes[index] == nil { outcomes[index] = .failure(failure) }
                    break
                }
                attempt += 1
                mustCheckLog = true
                self.metrics.retries.increment()
                self.logger.info(
                    "group commit failed transiently; retrying",
                    metadata: ["skyros.stack.sets": "\(remaining.count)", "skyros.stack.attempt": "\(attempt)", "skyros.error": "\(error)"])
                try? await Task.sleep(for: self.retryDelay(attempt: attempt))
            }
        }
        return .results(outcomes.map { $0 ?? .failure(DataStackError(code: .commitFailed, message: "the write was not committed")) })
    }

    /// Before the sets of a group are given up (its retries ran out, or a shutdown deadline abandoned it) after
    /// an attempt that may have committed (the connection broke, perhaps after `COMMIT` was sent; see
    /// ``mayHaveCommitted(_:)``): the commit log is asked once which of them did; those succeed. When the log
    /// cannot be read either, the others fail with ``DataStackError/Code/commitOutcomeUnknown`` (not the plain
    /// error, which would claim they were not committed).
    /// - Returns: the error for the sets that did not commit.
    private func settleAbandonedAttempt(
        _ batch: [QueuedCommit], remaining: [Int], error: any Error, into outcomes: inout [Result<ChangeSetResult, any Error>?]
    ) async -> any Error {
        guard let postgres = self.store as? PostgresStore else { return error }
        do {
            let committed = try await postgres.committedIDs(remaining.map { batch[$0].commitID }, since: batch[0].commitID)
            for index in remaining where committed.contains(batch[index].commitID) {
                outcomes[index] = .success(.committedUnseen)
            }
            return error
        } catch {
            return DataStackError(
                code: .commitOutcomeUnknown,
                message: "the connection was lost while this write was being committed, and the commit log could not be read "
                    + "before retrying stopped: look up its commit id in skyros_commit_groups",
                underlying: error)
        }
    }

    private func retryDelay(attempt: Int) -> Duration {
        let configuration = self.queueConfiguration
        var delay = configuration.initialRetryDelay
        for _ in 1..<min(attempt, 20) where delay < configuration.maximumRetryDelay { delay *= 2 }
        return min(delay, configuration.maximumRetryDelay)
    }

    /// Whether a failed attempt may have committed all the same: the connection broke (or the server shut
    /// down) while it ran, perhaps after `COMMIT` reached the server. Not a lease that timed out or a connection
    /// that never opened (nothing was sent), nor a deadlock or serialization failure (rolled back).
    static func mayHaveCommitted(_ error: any Error) -> Bool {
        guard let error = error as? PostgresError else { return false }
        switch error.kind {
        case .connectionLost, .connectionClosed: return true
        case .poolTimeout, .connectionFailed, .serializationFailure, .deadlock: return false
        default:
            return error.sqlState ~= .connectionException || error.sqlState == .adminShutdown || error.sqlState == .crashShutdown
        }
    }

    static func isTransient(_ error: any Error) -> Bool {
        guard let error = error as? PostgresError else { return false }
        return error.isTransient || error.kind == .connectionClosed || error.kind == .connectionFailed
    }

    /// One attempt: PostgreSQL gets one transaction with a savepoint per set; other stores apply set by set.
    /// `earlier`: the outcomes of unsettled sets queued before these, which a set's versions may come from.
    private func apply(
        _ commits: [QueuedCommit], prepared: PostgresStore.PreparedGroup?, prior earlier: [PriorOutcome]
    ) async throws -> GroupOutcome {
        // `results`: the outcomes of the first sets of `commits`, in order (none when the group is built as
        // one pipeline, before any of it ran).
        let build = { (index: Int, results: [Result<ChangeSetResult, any Error>]) throws -> ChangeSet in
            let prior = PriorOutcomes(earlier: earlier, group: commits, results: results)
            return try self.state.withLock { try self.changeSet(for: commits[index], state: $0, prior: prior) }
        }
        if let postgres = self.store as? PostgresStore {
            let hook = self.state.withLock { $0.hook }
            return try await postgres.applyGroup(
                ids: commits.map(\.commitID), build: build, operations: { self.insertOperations(for: commits[$0], store: postgres) },
                hook: hook, prepared: prepared)
        }
        var results: [Result<ChangeSetResult, any Error>] = []
        for index in commits.indices {
            do {
                let changes = try build(index, results)
                results.append(.success(changes.isEmpty ? ChangeSetResult(operations: []) : try await self.store.apply(changes)))
            } catch {
                results.append(.failure(error))
            }
        }
        return .results(results)
    }

    /// The pipelined operation of a commit made only of inserts of one entity whose rows were encoded when it
    /// was queued: one ``MergeableInsert`` straight from those values, which is what ``changeSet(for:state:prior:)``
    /// and the store's conversion of it make of such a set, without the change set, the typed operation and
    /// the conversion they go through (measured: the larger part of building a group of one-row inserts).
    /// `nil` for any other set.
    private func insertOperations(for commit: QueuedCommit, store: PostgresStore) -> [GroupOperation]? {
        guard self.generation == store.generation, case .row(let first)? = commit.slots.first else { return nil }
        let kind = ObjectIdentifier(type(of: first.kind))
        var rows: [[PostgresValue]] = []
        rows.reserveCapacity(commit.slots.count)
        for (index, slot) in commit.slots.enumerated() {
            guard case .row(let row) = slot, case .inserted = row.state, ObjectIdentifier(type(of: row.kind)) == kind,
                let values = commit.slotValues[index]
            else { return nil }
            rows.append(values)
        }
        // A bulk insert from the COPY threshold up goes the savepoint path (COPY), as the store decides.
        guard rows.count == 1 || rows.count < store.copyThreshold,
            let insert = try? first.kind.mergeableInsert(rows: rows, schema: store.schema)
        else { return nil }
        return [.insert(insert)]
    }

    /// The change set of a commit; expected versions of rows read from earlier queued commits are resolved now,
    /// from the versions those commits produced: `prior` holds the outcomes of the sets of its group that ran
    /// before it, and of unsettled sets before the group; a commit settled before is looked up in the
    /// stack's record of settled versions (``SettledVersions``, in `state`, read under its lock). A version
    /// that is not known — that commit failed or wrote nothing, or a later commit of this stack wrote the row —
    /// resolves to ``BaseVersion/unknownVersion``: the write conflicts rather than going out unguarded. Without
    /// `state` the set is built ahead, while an earlier group may still be running, and it throws
    /// ``NeedsSettledVersions`` when it needs such a version; so it does when built before a set of its own
    /// group that it needs has run (as one pipeline). Nothing else reads the state (a queued commit does not
    /// change), so a set built ahead takes no lock.
    private func changeSet(for commit: QueuedCommit, state: State?, prior: PriorOutcomes) throws -> ChangeSet {
        var changes = ChangeSet(expectedGeneration: self.generation)
        var needsSettledVersions = false
        func resolve(_ key: RowKey, _ base: BaseVersion) -> Int64? {
            switch base {
            case .known(let version): return version
            case .none: return nil
            case .parentChange:
                // Resolved when the change reached a context: none reaches the queue (a stack's contexts
                // resolve it), but never unguarded if one did.
                return BaseVersion.unknownVersion
            case .pending(let source):
                guard let state else {
                    needsSettledVersions = true
                    return nil
                }
                switch prior.outcome(of: source) {
                case .ran(.success(let result)):
                    let change = result.changes.last { $0.table == key.table && $0.id == key.id }
                    return change?.version ?? BaseVersion.unknownVersion
                case .ran(.failure):
                    return BaseVersion.unknownVersion
                case .notYetRun:
                    needsSettledVersions = true
                    return nil
                case .settled:
                    return state.settled.version(of: key, writtenBy: source) ?? BaseVersion.unknownVersion
                }
            }
        }
        var inserts: [PendingRow] = []
        var insertValues: [[PostgresValue]] = []
        var allEncoded = true
        func flushInserts() {
            if inserts.count == 1 {
                try? inserts[0].kind.emit(
                    inserts[0], encoded: allEncoded ? insertValues[0] : nil, resolve: resolve, policy: commit.policy,
                    into: &changes)
            } else if let first = inserts.first {
                first.kind.emitBulkInsert(inserts, encoded: allEncoded ? insertValues : nil, into: &changes)
            }
            inserts.removeAll()
            insertValues.removeAll()
            allEncoded = true
        }
        for (index, slot) in commit.slots.enumerated() {
            switch slot {
            case .row(let row):
                if case .inserted = row.state {
                    // One bulk insert per entity type: two types mapped to one table have their own columns.
                    if let first = inserts.first,
                        first.key.table != row.key.table || ObjectIdentifier(type(of: first.kind)) != ObjectIdentifier(type(of: row.kind))
                    {
                        flushInserts()
                    }
                    inserts.append(row)
                    if let values = commit.slotValues[index] { insertValues.append(values) } else { allEncoded = false }
                    continue
                }
                flushInserts()
                try row.kind.emit(row, encoded: commit.slotValues[index], resolve: resolve, policy: commit.policy, into: &changes)
            case .deleteWhere(let operation):
                flushInserts()
                operation.emit(&changes)
            }
        }
        flushInserts()
        if needsSettledVersions { throw NeedsSettledVersions() }
        return changes
    }

    /// Waits while the queue is full (by count or bytes). Writers that do not wait (a context's synchronous
    /// ``DataContext/save()``) may exceed the bound by their own sets.
    /// - Throws: ``DataStackError`` `.stackShutDown` once the stack stops accepting writes.
    package func waitForRoom() async throws {
        let configuration = self.queueConfiguration
        @Sendable func mayProceed(_ state: State) -> Bool {
            !state.accepting
                || (state.unfinishedCount < configuration.maximumQueuedCommits
                    && state.unfinishedBytes < configuration.maximumQueuedBytes)
        }
        while true {
            let (accepting, proceed) = self.state.withLock { ($0.accepting, mayProceed($0)) }
            if !accepting {
                if self.invalidatedFlag.load(ordering: .acquiring) {
                    throw DataStackError(code: .contextInvalidated, message: "the store was destroyed and rebuilt; the write was not saved")
                }
                throw DataStackError(code: .stackShutDown, message: "the stack was shut down; the write was not saved")
            }
            if proceed { return }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = self.state.withLock { state -> Bool in
                    if mayProceed(state) { return true }
                    state.roomWaiters.append(continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
    }

    /// Registers the work added to every group-commit transaction (PostgreSQL only).
    package func setCommitHook(_ hook: (any CommitTransactionHook)?) { self.state.withLock { $0.hook = hook } }

    /// A committed set: its rows leave the queue and enter the cache with the versions PostgreSQL gave them.
    /// `reread`: gets the slots of rows evicted instead because the stored row is not, or may not be, the value
    /// written (the store won a conflict, an update kept another writer's columns, another process's change,
    /// or no version known), which observers were shown while the set was queued.
    private func succeed(_ commit: QueuedCommit, result: ChangeSetResult, state: inout State, reread: inout [ResolvedSlot]) {
        let changes = result.changes
        // Most sets write a row or two: a linear search beats building a dictionary for them.
        let written: [RowKey: RowChange]? =
            changes.count > 8 ? Dictionary(changes.map { (RowKey(table: $0.table, id: $0.id), $0) }, uniquingKeysWith: { $1 }) : nil
        func change(for key: RowKey) -> RowChange? {
            if let written { return written[key] }
            return changes.last { $0.table == key.table && $0.id == key.id }
        }
        for (index, slot) in commit.slots.enumerated() {
            guard case .row(let row) = slot else { continue }
            let remoteChanged = !state.remoteChangedWhilePending.isEmpty && state.remoteChangedWhilePending.contains(row.key)
            let stillPending = self.unqueue(row.key, commit: commit.id, state: &state)
            if let value = row.value {
                let written = change(for: row.key)
                if let version = written?.version { state.settled.record(row.key, commit: commit.id, version: version) }
                // An update that may have kept another writer's columns says whether it did; without a report, an
                // update under a merging policy is taken to have.
                let merged = written?.isStoredAsWritten.map { !$0 } ?? Self.mayHaveMerged(row, policy: commit.policy)
                if let version = written?.version, !merged, !remoteChanged {
                    state.cache.put(row.key, value: value, version: version, bytes: commit.slotBytes[index], pinned: stillPending)
                } else {
                    // Not written (the store won a conflict), its version is unknown, the stored row holds
                    // another writer's columns (merged), or another process changed it meanwhile (before or
                    // after this commit: no telling): read it again, and so do observers, which were shown the
                    // value written.
                    state.cache.remove(row.key)
                    reread.append(slot)
                }
            } else {
                state.cache.remove(row.key)
            }
        }
        // Rows a set-based delete removed (they are not among the slots).
        for change in changes where change.kind == .deleted {
            state.cache.remove(RowKey(table: change.table, id: change.id))
        }
        // A set committed unseen (its reply lost): which rows its deletes by predicate removed is not known.
        if result.isUnseen {
            for case .deleteWhere(let operation) in commit.slots { state.cache.removeAll(inTable: operation.table) }
        }
    }

    /// Whether the stored row may differ from the value written: an update under a policy that keeps the
    /// other writer's changes to columns this one did not change.
    private static func mayHaveMerged(_ row: PendingRow, policy: MergePolicy) -> Bool {
        guard case .updated = row.state else { return false }
        return policy == .contextWins || policy == .mergeByProperty
    }

    /// Reverts a failed commit from the main context: its queued changes vanish and its rows leave the cache
    /// (they may be stale: the usual cause is a version conflict).
    private func fail(_ commit: QueuedCommit, state: inout State) {
        for case .row(let row) in commit.slots {
            self.unqueue(row.key, commit: commit.id, state: &state)
            state.cache.remove(row.key)
        }
    }

    /// Removes a commit's queued change of a row. Returns whether the row still has queued changes (of later
    /// commits).
    @discardableResult
    private func unqueue(_ key: RowKey, commit: UInt64, state: inout State) -> Bool {
        guard let slot = state.pending.index(forKey: key),
            let index = state.pending.values[slot].firstIndex(where: { $0.commit == commit })
        else { return state.pending[key] != nil }
        // Mutated in place (one hash lookup; a copy out and back would also copy the array).
        state.pending.values[slot].remove(at: index)
        state.pendingCountByTable[key.table] -= 1
        guard state.pending.values[slot].isEmpty else { return true }
        state.pending.remove(at: slot)
        if !state.remoteChangedWhilePending.isEmpty {
            // The row's last queued change is done (its caller checked the mark first).
            state.remoteChangedWhilePending.remove(key)
        }
        state.cache.unpin(key)
        return false
    }

    // MARK: Lifecycle

    /// Test hook: queued commits wait (a commit already running finishes) until ``releaseCommits()``.
    package func holdCommits() { self.state.withLock { $0.held = true } }

    package func releaseCommits() {
        let start = self.state.withLock { state -> Bool in
            state.held = false
            return self.claimDrain(&state)
        }
        if start { self.startDrain() }
    }

    /// The number of commits queued and not yet started.
    package var queuedCommits: Int { self.state.withLock { $0.queuedCount } }

    /// Waits until every commit queued so far has finished (either way).
    func flush() async {
        guard let ticket = self.state.withLock({ $0.lastTicket }) else { return }
        _ = try? await ticket.wait()
    }

    /// Stops accepting saves, releases a hold, and waits for the queue to drain.
    package func shutdown() async {
        _ = await self.shutdown(timeout: nil)
    }

    /// Stops accepting saves, releases a hold, and waits for the queue to drain — at most `timeout`. After the
    /// deadline, retries stop and the sets still queued fail (reverted, their callers get `.stackShutDown`).
    /// - Returns: what did not commit: the queued sets that failed, and the group in flight (outcome unknown
    ///   until its transaction ends).
    package func shutdown(timeout: Duration?) async -> ShutdownReport {
        let (start, waiters, last) = self.state.withLock { state in
            state.accepting = false
            state.held = false
            defer { state.roomWaiters = [] }
            return (self.claimDrain(&state), state.roomWaiters, state.lastTicket)
        }
        for waiter in waiters { waiter.resume() }
        if start { self.startDrain() }
        guard let last else { return ShutdownReport(uncommitted: [], inFlight: []) }
        guard let timeout else {
            _ = try? await last.wait()
            return ShutdownReport(uncommitted: [], inFlight: [])
        }
        let drained = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let resumed = Locked(false)
            @Sendable func finish(_ value: Bool) {
                let first = resumed.withLock { flag -> Bool in
                    defer { flag = true }
                    return !flag
                }
                if first { continuation.resume(returning: value) }
            }
            last.onComplete { _ in finish(true) }
            Task {
                try? await Task.sleep(for: timeout)
                finish(false)
            }
        }
        if drained { return ShutdownReport(uncommitted: [], inFlight: []) }
        let (queued, running) = self.state.withLock { state -> ([QueuedCommit], [QueuedCommit]) in
            state.abandoned = true
            state.held = true
            let queued = Array(state.queue[state.queueHead...])
            state.queueHead = state.queue.count
            return (queued, state.running)
        }
        let error = DataStackError(code: .stackShutDown, message: "the stack shut down before this write was committed")
        self.settle(queued, queued.map { _ in .failure(error) }, clearRunning: false)
        self.logger.warning(
            "shutdown deadline passed", metadata: ["skyros.stack.uncommitted": "\(queued.count)", "skyros.stack.in_flight": "\(running.count)"])
        return ShutdownReport(uncommitted: queued.map(UncommittedWrite.init), inFlight: running.map(UncommittedWrite.init))
    }

    /// Invalidates the core (after a destroy): queued commits fail, contexts refuse to work, and writers waiting
    /// for room in the queue stop waiting (they find it no longer accepting and throw).
    package func invalidate() {
        self.invalidatedFlag.store(true, ordering: .releasing)
        let (queued, waiters) = self.state.withLock { state -> ([QueuedCommit], [CheckedContinuation<Void, Never>]) in
            state.accepting = false
            let queued = Array(state.queue[state.queueHead...])
            state.queue = []
            state.queueHead = 0
            state.pending = [:]
            state.pendingCountByTable = TableCounts()
            state.cache.removeAll()
            defer { state.roomWaiters = [] }
            return (queued, state.roomWaiters)
        }
        for waiter in waiters { waiter.resume() }
        for commit in queued {
            commit.ticket.complete(.failure(DataStackError(
                code: .contextInvalidated, message: "the store was destroyed before this write was committed")))
        }
    }
}

/// A set built ahead needs the version a commit still running produces (see `StackCore.prepareAhead()`).
private struct NeedsSettledVersions: Error {}

/// The outcome of a set that ran before the one being built (see ``StackCore/changeSet(for:state:prior:)``).
private struct PriorOutcome {
    let commit: UInt64
    let result: Result<ChangeSetResult, any Error>
}

/// The outcomes a set being built may take versions from: unsettled sets before its group, then the first sets
/// of its group (`results[i]` is `group[i]`'s), without copying them for each set.
private struct PriorOutcomes {
    var earlier: [PriorOutcome] = []
    var group: [StackCore.QueuedCommit] = []
    var results: [Result<ChangeSetResult, any Error>] = []

    enum Lookup {
        /// The commit ran before (in this group, or unsettled before it).
        case ran(Result<ChangeSetResult, any Error>)
        /// It is in this group and has not run yet (the group is built before any of it runs).
        case notYetRun
        /// Neither: it settled before this group.
        case settled
    }

    func outcome(of commit: UInt64) -> Lookup {
        if let index = self.group.firstIndex(where: { $0.id == commit }) {
            return index < self.results.count ? .ran(self.results[index]) : .notYetRun
        }
        if let earlier = self.earlier.last(where: { $0.commit == commit }) { return .ran(earlier.result) }
        return .settled
    }
}
