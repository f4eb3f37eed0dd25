import SkyrosStore

/// An error raised by a `DataStack` or one of its contexts. It names what failed and wraps the
/// underlying error (a `PGError`, `MigrationError`, `SchemaMismatchError`, `StoreError`, …).
///
/// ```swift
/// do {
///     let stack = try await DataStack.start(configuration)
/// } catch let error as DataStackError where error.code == .schemaMismatch {
///     print(error)    // names the entity, column and types
/// }
/// ```
public struct DataStackError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure; extensible (new codes can be added without breaking `switch`-free callers).
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case storeUnreachable = "store unreachable"
            case migrationFailed = "migration failed"
            case schemaMismatch = "schema mismatch"
            case contextInvalidated = "context invalidated"
            case stackShutDown = "stack shut down"
            case commitFailed = "commit failed"
            case changeFeedUnavailable = "change feed unavailable"
            case commitOutcomeUnknown = "commit outcome unknown"
            case entityTypeMismatch = "entity type mismatch"
            case noIdentityAvailable = "no identity available"
            case deadlineExceeded = "deadline exceeded"
            case writeCancelled = "write cancelled"
            case unsupportedByStore = "unsupported by the store"
            case rowHasUnsavedChanges = "row has unsaved changes"
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The database could not be reached or refused the connection (bad URL, host, password, database).
        public static let storeUnreachable = Code(.storeUnreachable)
        /// A migration failed at start; nothing after it was applied. ``DataStackError/underlying`` is the
        /// migrator's `MigrationError` naming the file.
        public static let migrationFailed = Code(.migrationFailed)
        /// An entity does not match its table; the underlying `SchemaMismatchError` lists every issue.
        public static let schemaMismatch = Code(.schemaMismatch)
        /// The context was created before the store was destroyed and rebuilt; create a new one.
        public static let contextInvalidated = Code(.contextInvalidated)
        /// The stack was shut down and accepts no more work.
        public static let stackShutDown = Code(.stackShutDown)
        /// A queued commit failed (delivered on `DataStack/errors`); it was reverted from the main context.
        public static let commitFailed = Code(.commitFailed)
        /// At start, a notification sent through the pool did not reach the change feed's listener (typically
        /// a listener behind a transaction-pooling proxy: set `DataStackConfiguration/directConnection`).
        public static let changeFeedUnavailable = Code(.changeFeedUnavailable)
        /// A queued commit's connection was lost while it committed, and retrying stopped (its
        /// ``CommitQueueConfiguration/maximumRetryDuration`` passed, or a shutdown deadline) before the commit
        /// log could say whether it committed. It was reverted from the main context; it may be in PostgreSQL:
        /// look up its commit id in the `skyros_commit_groups` table (see the CommitQueue article).
        public static let commitOutcomeUnknown = Code(.commitOutcomeUnknown)
        /// A context was asked to change a row as one entity type while it holds an unsaved change of that row
        /// as another entity type mapped to the same table: save (or reset) the first change before making the
        /// second. Nothing was recorded.
        public static let entityTypeMismatch = Code(.entityTypeMismatch)
        /// `insert` of a row whose `DatabaseGenerated/identity` key is `0` found no allocated id left: the
        /// next block from the sequence is on its way (or could not be fetched: see ``DataStackError/underlying``).
        /// A `write {}` waits for ids before its body runs; a body that inserts more rows than a block holds
        /// reserves them first (``DataContext/reserveIdentities(_:count:)``) or uses a larger block. Nothing was
        /// recorded.
        public static let noIdentityAvailable = Code(.noIdentityAvailable)

        /// A write did not finish by its deadline (`DataStack/write(durability:deadline:_:)`,
        /// `DataStackConfiguration/writeTimeout`). ``DataStackError/mayStillCommit`` says whether its changes
        /// had been queued: if so, the commit queue keeps retrying them and they may still commit (the outcome
        /// reaches `DataStack/errors` if they fail); if not, nothing was saved.
        public static let deadlineExceeded = Code(.deadlineExceeded)
        /// The task running a write was cancelled before the write finished. ``DataStackError/mayStillCommit``
        /// says whether its changes had been queued, as for ``deadlineExceeded``.
        public static let writeCancelled = Code(.writeCancelled)
        /// The stack's store cannot do what was asked: interactive transactions and raw SQL need PostgreSQL
        /// (the in-memory store has no SQL and no row locks). Nothing was run.
        public static let unsupportedByStore = Code(.unsupportedByStore)
        /// A change guarded by a stored row version (`DataContext/update(_:ifVersion:)`) was asked for a row this
        /// context holds an unsaved change of, whose version is not a stored one: save first. Nothing was
        /// recorded.
        public static let rowHasUnsavedChanges = Code(.rowHasUnsavedChanges)

        public var description: String { self.base.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// What failed, in words (never contains a password).
    public var message: String
    /// The error that caused this one.
    public var underlying: (any Error)?
    /// For a write that ended early (``Code/deadlineExceeded``, ``Code/writeCancelled``): `true` when its
    /// changes were already in the commit queue, which keeps retrying them, so they may still commit; `false`
    /// when nothing was saved. `false` for every other code.
    public var mayStillCommit: Bool

    /// Creates an error.
    public init(code: Code, message: String, underlying: (any Error)? = nil, mayStillCommit: Bool = false) {
        self.code = code
        self.message = message
        self.underlying = underlying
        self.mayStillCommit = mayStillCommit
    }

    public var description: String {
        guard let underlying else { return "\(self.code): \(self.message)" }
        return "\(self.code): \(self.message): \(underlying)"
    }
}
