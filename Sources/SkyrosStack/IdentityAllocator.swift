import DequeModule
import Logging
import SkyrosPostgres
import SkyrosStore

/// Hands out the ids of entities whose key is a ``DatabaseGenerated/identity`` column, at once, from blocks taken
/// from the column's sequence: one round trip per block (``GroupCommitStore/allocateIdentities(_:count:)``), the
/// next block fetched in the background once half of the current one is used (Hibernate's pooled optimizer).
///
/// `insert` is synchronous, so it never waits for a block: it takes an id that is here or throws
/// ``DataStackError/Code/noIdentityAvailable``. What keeps ids here: the first block is fetched when the stack
/// starts (``reserve(_:count:)``), a `write {}` waits before its body runs while fewer than a quarter of a block is
/// left (``waitForIdentities()``), and ``reserve(_:count:)`` waits for as many as a caller needs.
///
/// Ids of a block that are never used (the process ends) are lost: the sequence has gaps, as PostgreSQL's own
/// sequence caching makes.
package final class IdentityAllocator: Sendable {
    private struct Pool {
        /// Ids fetched and not handed out yet, in order.
        var ids: Deque<Int64> = []
        let blockSize: Int
        /// Fetches that many ids (one round trip).
        let fetch: @Sendable (Int) async throws -> [Int64]
        /// Whether a block is being fetched.
        var fetching = false
        /// Waiters for the block being fetched.
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Blocks fetched since the stack started (one round trip each; a reservation larger than a block is
        /// one).
        var blocksFetched = 0

        var available: Int { self.ids.count }
        /// Below this many ids, a `write {}` waits for the next block.
        var lowWater: Int { max(1, self.blockSize / 4) }
    }

    private let pools = Locked<[String: Pool]>([:])
    private let store: any GroupCommitStore
    private let tasks: TaskTracker
    private let logger: Logger

    init(store: any GroupCommitStore, tasks: TaskTracker, logger: Logger) {
        self.store = store
        self.tasks = tasks
        self.logger = logger
    }

    /// The next id for `plan`'s entity, without waiting; starts fetching the next block when half of one or
    /// less is left.
    /// - Throws: ``DataStackError`` `.noIdentityAvailable` when none is left.
    func take<T: Entity>(_ plan: EntityPlan<T>) throws -> Int64 {
        let (id, fetch) = self.pools.withLock { pools -> (Int64?, Bool) in
            var pool = pools[plan.tableName] ?? self.pool(plan)
            var id: Int64?
            id = pool.ids.popFirst()
            let fetch = !pool.fetching && pool.available <= pool.blockSize / 2
            if fetch { pool.fetching = true }
            pools[plan.tableName] = pool
            return (id, fetch)
        }
        if fetch {
            // Background work: its statement belongs to no caller's trace (the insert's span may have ended).
            self.tasks.spawn {
                await untraced {
                    do {
                        try await self.fetchBlock(table: plan.tableName, count: max(1, plan.identityBlockSize))
                    } catch {
                        self.logger.warning(
                            "fetching a block of ids failed; the next write that needs one fetches it again",
                            metadata: ["skyros.entity": "\(plan.entityName)", "skyros.error": "\(error)"])
                    }
                }
            }
        }
        guard let id else {
            throw DataStackError(
                code: .noIdentityAvailable,
                message: "no allocated id is left for \(plan.entityName) (the next block of \(plan.identityBlockSize) is being fetched): "
                    + "reserve ids before inserting many rows in one write, or declare a larger .identity(blockSize:)")
        }
        return id
    }

    /// Waits until `count` ids of `plan`'s entity are here, fetching what is missing (at least a block) in one
    /// round trip.
    func reserve<T: Entity>(_ plan: EntityPlan<T>, count: Int) async throws {
        self.pools.withLock { pools in if pools[plan.tableName] == nil { pools[plan.tableName] = self.pool(plan) } }
        try await self.fill(table: plan.tableName, while: { $0.available < count }, size: { max($0.blockSize, count - $0.available) })
    }

    /// Waits, for every entity whose ids were asked for so far, while fewer than a quarter of a block is left
    /// (fetching one when none is on its way): a `write {}` calls it before its body runs, so that the body's
    /// inserts find ids. Costs a lock when every pool has ids.
    package func waitForIdentities() async throws {
        let low = self.pools.withLock { pools -> [String] in
            var low: [String] = []
            for (table, pool) in pools where pool.available < pool.lowWater { low.append(table) }
            return low
        }
        for table in low {
            try await self.fill(table: table, while: { $0.available < $0.lowWater })
        }
    }

    /// How many blocks were fetched for `T` (one round trip each).
    package func blocksFetched<T: Entity>(_ type: T.Type) -> Int {
        self.pools.withLock { $0[T.tableName]?.blocksFetched ?? 0 }
    }

    // MARK: Fetching

    private func pool<T: Entity>(_ plan: EntityPlan<T>) -> Pool {
        let blockSize = max(1, plan.identityBlockSize)
        return Pool(blockSize: blockSize, fetch: { [store] count in try await store.allocateIdentities(T.self, count: count) })
    }

    /// While `short(pool)` holds, waits for the block on its way or fetches `size(pool)` ids (a block unless told).
    private func fill(
        table: String, while short: (Pool) -> Bool, size: (Pool) -> Int = { $0.blockSize }
    ) async throws {
        while true {
            enum Step { case done, wait, fetch(Int) }
            let step = self.pools.withLock { pools -> Step in
                guard var pool = pools[table], short(pool) else { return .done }
                if pool.fetching { return .wait }
                pool.fetching = true
                pools[table] = pool
                return .fetch(size(pool))
            }
            switch step {
            case .done:
                return
            case .fetch(let count):
                try await self.fetchBlock(table: table, count: count)
            case .wait:
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let waiting = self.pools.withLock { pools -> Bool in
                        guard pools[table]?.fetching == true else { return false }
                        pools[table]?.waiters.append(continuation)
                        return true
                    }
                    if !waiting { continuation.resume() }
                }
            }
        }
    }

    /// Fetches `count` ids for the pool of `table`, whose `fetching` the caller set, and adds them; wakes the
    /// waiters either way.
    private func fetchBlock(table: String, count: Int) async throws {
        guard let fetch = self.pools.withLock({ $0[table]?.fetch }) else { return }
        let result: Result<[Int64], any Error>
        do {
            result = .success(try await fetch(count))
        } catch {
            result = .failure(error)
        }
        let waiters = self.pools.withLock { pools -> [CheckedContinuation<Void, Never>] in
            guard var pool = pools[table] else { return [] }
            if case .success(let ids) = result {
                pool.ids.append(contentsOf: ids)
                pool.blocksFetched += 1
            }
            pool.fetching = false
            let waiters = pool.waiters
            pool.waiters = []
            pools[table] = pool
            return waiters
        }
        for waiter in waiters { waiter.resume() }
        _ = try result.get()
    }
}
