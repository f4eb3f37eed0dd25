import SkyrosPostgres

/// The row lock a read inside a transaction takes on the rows it returns (`SELECT … FOR UPDATE`): other
/// transactions that lock or change those rows wait until this one ends, skip them, or fail at once.
///
/// ```swift
/// try await stack.transaction { tx in
///     // The next queued job that no other worker holds; none when all are taken.
///     let job = try await tx.first(
///         FetchDescriptor<Job>(predicate: #Predicate { $0.state == "queued" }, sortBy: [SortDescriptor(\.id)]),
///         lock: .forUpdate(.skipLocked))
/// }
/// ```
public struct RowLock: Sendable, Hashable, CustomStringConvertible {
    /// How strong the lock is (PostgreSQL's four row-level lock modes).
    public enum Strength: String, Sendable, Hashable {
        /// `FOR UPDATE`: the row is about to be updated or deleted; blocks every other lock of it.
        case update = "FOR UPDATE"
        /// `FOR NO KEY UPDATE`: an update that keeps the key; foreign keys referencing the row may still be checked.
        case noKeyUpdate = "FOR NO KEY UPDATE"
        /// `FOR SHARE`: the row must not change until the transaction ends; others may share the lock.
        case share = "FOR SHARE"
        /// `FOR KEY SHARE`: the key must not change (what a foreign key check takes).
        case keyShare = "FOR KEY SHARE"
    }

    /// What a read does about rows another transaction holds locked.
    public enum Waiting: String, Sendable, Hashable {
        /// Waits until the other transaction ends (PostgreSQL's default).
        case wait = ""
        /// `SKIP LOCKED`: leaves those rows out of the result (the job-queue pattern).
        case skipLocked = " SKIP LOCKED"
        /// `NOWAIT`: fails at once with `PGError` SQLSTATE `55P03` (`SQLState.lockNotAvailable`).
        case noWait = " NOWAIT"
    }

    /// The lock mode.
    public var strength: Strength
    /// What to do about rows locked by others.
    public var waiting: Waiting

    /// A lock of `strength` that waits as `waiting` says.
    public init(_ strength: Strength, _ waiting: Waiting = .wait) {
        self.strength = strength
        self.waiting = waiting
    }

    /// `FOR UPDATE`, waiting for rows others hold.
    public static var forUpdate: RowLock { RowLock(.update) }
    /// `FOR UPDATE` with `SKIP LOCKED` or `NOWAIT`.
    public static func forUpdate(_ waiting: Waiting) -> RowLock { RowLock(.update, waiting) }
    /// `FOR NO KEY UPDATE`, waiting for rows others hold.
    public static var forNoKeyUpdate: RowLock { RowLock(.noKeyUpdate) }
    /// `FOR NO KEY UPDATE` with `SKIP LOCKED` or `NOWAIT`.
    public static func forNoKeyUpdate(_ waiting: Waiting) -> RowLock { RowLock(.noKeyUpdate, waiting) }
    /// `FOR SHARE`, waiting for rows others hold.
    public static var forShare: RowLock { RowLock(.share) }
    /// `FOR SHARE` with `SKIP LOCKED` or `NOWAIT`.
    public static func forShare(_ waiting: Waiting) -> RowLock { RowLock(.share, waiting) }
    /// `FOR KEY SHARE`, waiting for rows others hold.
    public static var forKeyShare: RowLock { RowLock(.keyShare) }
    /// `FOR KEY SHARE` with `SKIP LOCKED` or `NOWAIT`.
    public static func forKeyShare(_ waiting: Waiting) -> RowLock { RowLock(.keyShare, waiting) }

    /// The locking clause as SQL (` FOR UPDATE SKIP LOCKED`), with a leading space.
    public var description: String { " \(self.strength.rawValue)\(self.waiting.rawValue)" }
}

extension SQLQueryBuilder {
    /// ``select(_:schema:includeVersion:)`` with the version, followed by `lock`'s clause (after `LIMIT` and
    /// `OFFSET`, where PostgreSQL takes it): the rows returned are locked until the transaction ends.
    /// - Throws: ``QueryError`` for an untranslatable predicate.
    package static func select<T: Entity>(_ descriptor: FetchDescriptor<T>, schema: String?, lock: RowLock?) throws -> PGQuery {
        var query = try self.select(descriptor, schema: schema, includeVersion: true)
        if let lock { query.sql += lock.description }
        return query
    }
}
