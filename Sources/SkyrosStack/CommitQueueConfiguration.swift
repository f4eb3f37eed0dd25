import SkyrosStore

/// The bounds and policies of a stack's commit queue (the root writer between the main context and the pool).
///
/// ```swift
/// var configuration = DataStackConfiguration(store: .postgres(postgres))
/// configuration.commitQueue.maximumBatchCount = 512
/// configuration.commitQueue.maximumQueuedBytes = 32 << 20
/// configuration.commitQueue.mergePolicy = .mergeByProperty
/// ```
public struct CommitQueueConfiguration: Sendable {
    /// The most change sets sent as one group-commit transaction. Default 256.
    public var maximumBatchCount: Int = 256
    /// How long the queue waits for more sets when fewer than ``maximumBatchCount`` are queued before it
    /// sends a group (a latency bound: zero sends at once what is queued). Default zero.
    public var maximumBatchDelay: Duration = .zero
    /// Writers wait (`DataStack/write(durability:mergePolicy:_:)`) while this many sets are queued or
    /// being committed. Default 10,000.
    public var maximumQueuedCommits: Int = 10_000
    /// Writers wait while the queued and committing sets hold about this many bytes of row data. Default 64 MiB.
    public var maximumQueuedBytes: Int = 64 << 20
    /// The policy for version conflicts when a write does not name one. Default ``MergePolicy/error``.
    public var mergePolicy: MergePolicy = .error
    /// Whether the `error` record of a queued write that failed carries the server's `DETAIL` as it came
    /// (`skyros.error.detail`), row values included (`Key (email)=(ada@example.com) already exists.`). Default
    /// `false`: the record carries `PGError.redactedDetail`, with every value replaced by `<redacted>`, so that
    /// logs hold no user data. Turn it on where logs may hold what the database holds (a developer's machine).
    ///
    /// ```swift
    /// var queue = CommitQueueConfiguration()
    /// queue.logsRowValues = true   // failure records show the conflicting values
    /// ```
    public var logsRowValues: Bool = false
    /// The first delay before retrying a group after a transient failure (doubled per attempt).
    public var initialRetryDelay: Duration = .milliseconds(20)
    /// The longest delay between retries.
    public var maximumRetryDelay: Duration = .seconds(1)
    /// How long a group is retried after transient failures (connection lost, server restart, admin shutdown,
    /// serialization failure, deadlock) before its sets fail. Default 5 minutes.
    public var maximumRetryDuration: Duration = .seconds(300)

    /// How long `DataStack/run()` waits for the queue to drain after graceful shutdown (SIGTERM, SIGINT)
    /// before it fails what is still queued and logs the ``ShutdownReport`` at error level; `nil` (the
    /// default) waits until everything committed.
    public var shutdownTimeout: Duration?

    /// The defaults.
    public init() {}
}
