import Foundation
import Logging
import SkyrosPostgres
import SkyrosStore
import Synchronization

/// The root of a stack's context tree: what readers of the main context see (``StackView``: the row cache
/// with the changes still queued for commit overlaid), and the ``CommitQueue`` that commits those changes in
/// save order.
///
/// All state is in one lock (``StackState``) with short, synchronous critical sections; store calls happen
/// outside it. A destroyed store gets a new core; the old one is invalidated and its contexts refuse to work.
package final class StackCore: Sendable {
    let store: any GroupCommitStore
    let generation: Int
    let state: Locked<StackState>
    let queueConfiguration: CommitQueueConfiguration
    package let metrics: CommitQueueMetrics
    /// Wakes the stack's observers after a save (set by the layer that runs them).
    package let saves = SaveNotifier()
    let queue: CommitQueue
    /// Checks each written value against its column before the write is recorded (``ColumnDoor``).
    let door: ColumnDoor
    /// The ids of ``DatabaseGenerated/identity`` keys, handed out at `insert` from blocks of their sequence.
    package let identities: IdentityAllocator

    package init(
        store: any GroupCommitStore, cacheLimit: CacheLimit, generation: Int, logger: Logger,
        queueConfiguration: CommitQueueConfiguration = CommitQueueConfiguration(), drains: TaskTracker = TaskTracker(),
        metrics: MetricsScope = MetricsScope(), onCommitError: @escaping @Sendable (DataStackError) -> Void
    ) {
        self.metrics = CommitQueueMetrics(metrics)
        self.queueConfiguration = queueConfiguration
        self.store = store
        self.door = (store as? any ColumnDoorKeeping)?.columnDoor ?? ColumnDoor()
        self.identities = IdentityAllocator(store: store, tasks: drains, logger: logger)
        self.generation = generation
        let state = Locked(StackState(view: StackView(cacheLimit: cacheLimit), queue: CommitQueue.stateMachine(queueConfiguration)))
        self.state = state
        self.queue = CommitQueue(
            state: state, store: store, generation: generation, configuration: queueConfiguration, metrics: self.metrics,
            saves: self.saves, logger: logger, drains: drains, onCommitError: onCommitError)
    }

    var isInvalidated: Bool { self.queue.isInvalidated }

    var measuresBytes: Bool { self.state.withLock { $0.view.cache.limit.maxBytes != nil } }

    package var statistics: CacheStatistics {
        self.state.withLock {
            CacheStatistics(
                rows: $0.view.cache.count, bytes: $0.view.cache.totalBytes, hits: $0.view.cache.hits, misses: $0.view.cache.misses,
                evictions: $0.view.cache.evictions)
        }
    }

    // MARK: Reads

    /// The row with `id` (its key: `key`) as readers of the main context see it: queued change, else cache, else
    /// store. `nil` also when the row is held as another entity type of the same table.
    func lookup<T: Entity>(_ type: T.Type, id: T.ID, key: RowKey) async throws -> FoundRow? {
        var fetched: Versioned<T>?
        for attempt in 0..<3 {
            let phase = self.state.withLock { state -> LocalLookup in
                if let entry = state.view.pending[key]?.last {
                    return .found(FoundRow(entry.row.value, as: T.self, base: .pending(commit: entry.commit)))
                }
                if let entry = state.view.cache.get(key), entry.value is T {
                    return .found(FoundRow(value: entry.value, base: .known(entry.version)))
                }
                return .miss(finishedCommits: state.view.finishedCommits)
            }
            let before: UInt64
            switch phase {
            case .found(let row): return row
            case .miss(let finishedCommits): before = finishedCommits
            }
            fetched = try await self.store.object(T.self, id: id)
            let bytes = try fetched.map { try self.size(of: $0.value) } ?? 0
            let settled = self.state.withLock { state -> Bool in
                guard state.view.finishedCommits == before else { return false }
                if let fetched, state.view.pending[key] == nil {
                    state.view.cache.put(key, value: fetched.value, version: fetched.version, bytes: bytes)
                }
                return true
            }
            if settled || attempt == 2 { break }
        }
        // A change queued while the row was read wins over what the store returned.
        return self.state.withLock { state in
            if let entry = state.view.pending[key]?.last { return FoundRow(entry.row.value, as: T.self, base: .pending(commit: entry.commit)) }
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
        // A predicate across references while changes of a table it reads are queued: the store would not see
        // them, so every row is fetched and filtered here, with the referenced rows as readers see them.
        let referenced = descriptor.predicateReferencedTypes
        let readTables = FetchDescriptor<T>.readTables(referencing: referenced)
        let evaluatesHere = !referenced.isEmpty
            && self.state.withLock { state in readTables.contains { state.view.pendingCountByTable[$0] > 0 } }
        var result: [(value: T, base: BaseVersion)] = []
        for attempt in 0..<3 {
            let (snapshot, before) = self.state.withLock { ($0.view.pendingRows(ofTable: table), $0.view.finishedCommits) }
            let rows = try await self.store.fetch(evaluatesHere ? descriptor.unfiltered : Overlay.widened(descriptor, by: snapshot.count))
            let measure = self.measuresBytes
            let keyed = try rows.map { row in
                (key: try RowKey(row.value), row: row, bytes: measure ? try self.size(of: row.value) : 0)
            }
            let (settled, current) = self.state.withLock { state -> (Bool, [RowKey: StackView.PendingEntry]) in
                guard state.view.finishedCommits == before else { return (false, [:]) }
                for entry in keyed where state.view.pending[entry.key] == nil {
                    state.view.cache.put(entry.key, value: entry.row.value, version: entry.row.version, bytes: entry.bytes)
                }
                var current: [RowKey: StackView.PendingEntry] = [:]
                for key in snapshot.keys { current[key] = state.view.pending[key]?.last }
                return (true, current)
            }
            if !settled && attempt < 2 { continue }
            // Overlay the rows that were queued when the read began, in their latest queued state.
            var overlay = snapshot
            for (key, entry) in current { overlay[key] = entry }
            var targets: ResolvedTargets?
            if evaluatesHere {
                var resolved = ResolvedTargets()
                for type in referenced { try await self.addEveryRow(of: type, to: &resolved) }
                targets = resolved
            }
            result = try Overlay.apply(
                descriptor, base: rows.map { ($0.value, BaseVersion.known($0.version)) }, changes: overlay.mapValues(\.row),
                changeBase: { key in overlay[key].map { .pending(commit: $0.commit) } ?? .none }, targets: targets)
            break
        }
        return result
    }

    /// Adds every row of `type` as readers of the main context see it.
    private func addEveryRow<R: Entity>(of type: R.Type, to targets: inout ResolvedTargets) async throws {
        targets.add(try await self.fetch(FetchDescriptor<R>()).map(\.value))
    }

    func count<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> Int {
        let tables = descriptor.readTables
        let pending = self.state.withLock { state in tables.contains { state.view.pendingCountByTable[$0] > 0 } }
        if !pending { return try await self.store.count(descriptor) }
        return try await self.fetch(descriptor).count
    }

    /// Whether a queued write of this stack changes the row and has not committed (or failed) yet.
    func isPending(_ key: RowKey) -> Bool {
        self.state.withLock { state in state.view.pending[key]?.isEmpty == false }
    }

    /// Whether a queued write deletes the row (the last queued change of it is a deletion).
    package func isPendingDeletion(_ key: RowKey) -> Bool {
        self.state.withLock { state in state.view.pending[key]?.last.map { $0.row.value == nil } ?? false }
    }

    /// Creates the row unless it exists, in the store at once (race-free across processes), and caches it.
    /// The row is cached only if no commit of this stack settled while it was read (as ``lookup(_:id:key:)``
    /// does): one that changed it would otherwise be overwritten in the cache by the older row.
    /// A row it creates is announced as a commit's are: to other processes by the change feed's hook (in the
    /// creating transaction), and to this stack's observers. Returns the row with the version it has.
    package func findOrCreate<T: Entity>(_ value: T) async throws -> (value: T, version: Int64, created: Bool) {
        let (before, hook) = self.state.withLock { ($0.view.finishedCommits, $0.hook) }
        if let hook {
            let unprepared = hook.tablesNeedingPreparation([T.tableName])
            if !unprepared.isEmpty { try await hook.prepare(tables: unprepared) }
        }
        let (row, created) = try await self.store.findOrCreate(value, announcing: hook)
        let key = try RowKey(row.value)
        let bytes = try self.size(of: row.value)
        self.state.withLock { state in
            if state.view.finishedCommits == before, state.view.pending[key] == nil {
                state.view.cache.put(key, value: row.value, version: row.version, bytes: bytes)
            }
        }
        if created {
            self.saves.saved([.row(PendingRow(key: key, kind: EntityKind<T>(), id: row.value.id, state: .inserted(row.value)))])
        }
        return (row.value, row.version, created)
    }

    /// `value` with an id allocated from its sequence when its entity has an ``DatabaseGenerated/identity`` key
    /// and its id is `0`; otherwise `value`.
    /// - Throws: ``DataStackError`` `.noIdentityAvailable`.
    func assigningIdentity<T: Entity>(_ value: T) throws -> T {
        let plan = try EntityPlan<T>.shared
        guard plan.needsIdentity(value) else { return value }
        return try plan.settingIdentity(try self.identities.take(plan), of: value)
    }

    /// Fetches the first block of ids of every entity among `types` with an ``DatabaseGenerated/identity`` key.
    package func prepareIdentities(_ types: [any Entity.Type]) async throws {
        for type in types { try await self.prepareIdentities(of: type) }
    }

    private func prepareIdentities<T: Entity>(of type: T.Type) async throws {
        let plan = try EntityPlan<T>.shared
        if plan.identityIndex != nil { try await self.identities.reserve(plan, count: 1) }
    }

    /// The row `value` is, as the main context sees it now (after a durable write: as stored, with the values
    /// the database set).
    package func current<T: Entity>(_ value: T) async throws -> T {
        try await self.lookup(T.self, id: value.id, key: RowKey(value))?.value as? T ?? value
    }

    private func size<T: Entity>(of value: T) throws -> Int {
        guard self.measuresBytes else { return 0 }
        return approximateSize(of: EntityKind<T>().encode(value))
    }

    // MARK: Commits (the queue's)

    /// Makes saved changes visible to every reader at once and queues their commit
    /// (``CommitQueue/enqueue(_:policy:logger:)``).
    func enqueue(
        _ slots: [ResolvedSlot], policy: MergePolicy? = nil, logger: Logger? = nil
    ) throws -> (ticket: CommitTicket, commit: UInt64)? {
        try self.queue.enqueue(slots, policy: policy, logger: logger)
    }

    package func startDrainAhead() { self.queue.startDrainAhead() }

    package func waitForRoom(until deadline: WriteDeadline = WriteDeadline(nil)) async throws {
        try await self.queue.waitForRoom(until: deadline)
    }

    /// The tables whose stored rows the database may make differ from what a stack writes (a `BEFORE` trigger):
    /// this stack's own writes to them are read back, not cached as sent.
    package func setRewritingTables(_ tables: Set<String>) { self.state.withLock { $0.view.rewritingTables = tables } }

    /// Registers the work added to every group-commit transaction (PostgreSQL only).
    package func setCommitHook(_ hook: (any CommitTransactionHook)?) { self.state.withLock { $0.hook = hook } }

    /// Test hook: queued commits wait (a commit already running finishes) until ``releaseCommits()``.
    package func holdCommits() { self.queue.hold() }

    package func releaseCommits() { self.queue.release() }

    /// The number of commits queued and not yet started.
    package var queuedCommits: Int { self.queue.queuedCommits }

    /// Waits until every commit queued so far has finished (either way).
    func flush() async { await self.queue.flush() }

    /// Stops accepting saves, releases a hold, and waits for the queue to drain.
    package func shutdown() async {
        _ = await self.queue.shutdown(timeout: nil)
    }

    /// ``CommitQueue/shutdown(timeout:)``.
    package func shutdown(timeout: Duration?) async -> ShutdownReport {
        await self.queue.shutdown(timeout: timeout)
    }

    /// Invalidates the core (after a destroy): queued commits fail, contexts refuse to work, and writers waiting
    /// for room in the queue stop waiting.
    package func invalidate() { self.queue.invalidate() }
}
