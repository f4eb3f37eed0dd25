import SkyrosPostgres
import SkyrosStore
import SkyrosStack

/// How a PostgreSQL-backed `DataStack` learns of other processes' commits (see the change log in
/// "Running many instances").
///
/// ```swift
/// var configuration = DataStackConfiguration(store: .postgres(pooledURL, schema: "app"))
/// configuration.changeFeed.retention = .seconds(600)      // keep ten minutes of entries for catch-up
/// // Behind PgBouncer in transaction mode, LISTEN (and the migrations' lock) need a direct session:
/// configuration.directConnection = try PGConfiguration(url: directURL)
/// ```
public struct ChangeFeedConfiguration: Sendable {
    /// Whether the stack writes the change log and listens (default `true`; PostgreSQL stores only).
    public var isEnabled: Bool
    /// The connection used for `LISTEN`; `nil` uses `DataStackConfiguration/directConnection`, else the
    /// store's. Give a direct URL when the store's goes through a transaction-pooling proxy such as PgBouncer.
    public var listener: PGConfiguration?
    /// The listener's `application_name`; `nil` gives `skyros-listener-<stack origin>`.
    public var applicationName: String?
    /// Log entries older than this are pruned (by any stack of the schema). Entries of transactions that a
    /// snapshot still open on the server may not have seen are kept until it ends (see "Running many
    /// instances"): a long transaction anywhere holds pruning back, as it holds back vacuum.
    public var retention: Duration
    /// At most this many log entries are kept (beyond, as for ``retention``, while a long transaction is open).
    public var maximumEntries: Int
    /// How often a stack prunes the log.
    public var pruneInterval: Duration
    /// An extra wait after a change before an observer re-runs its query (default zero). Bursts coalesce
    /// without it: changes that arrive while a re-run is in progress collapse into one more re-run. A non-zero
    /// value trades latency for fewer events under a steady stream of commits.
    public var observerCoalescing: Duration
    /// Whether this stack's hints carry the whole row of each update it commits guarded by the version it
    /// read (default `false`), so that other stacks caching that version refresh it in place — their next
    /// read of it, and a one-row observer's re-run, need no round trip — instead of evicting it.
    ///
    /// A hint then holds up to 2 KB (a larger change list goes without its rows) instead of a few dozen
    /// bytes. Turn it on where that is fine: any role that can connect to the database can `LISTEN` on the
    /// schema's channel and read the rows, whatever its table privileges (the log, readable only with the
    /// privileges its table grants, never stores rows); and PostgreSQL's notification queue fills that much
    /// faster behind a listener that stops reading. Other stacks refresh from such hints whatever their own
    /// setting, once the hint's tag verifies (see "Running many instances": a role that can connect can also
    /// send notifications).
    public var includesRowsInHints: Bool
    /// Where committed changes are read from (default ``ChangeCaptureSource/automatic``: logical decoding where the
    /// server and role allow it, else triggers; the start logs which and why). All stacks of a schema use the same
    /// source: the first to start installs it, the others follow it (with `.automatic`), and a stack configured
    /// for the other one fails its start (`migrate capture drop` removes the installed one).
    public var captureSource: ChangeCaptureSource = .automatic
    /// With logical decoding, the least time between two of the relay's hints while commits stream in (default
    /// 10 ms). A commit that reaches an idle relay is hinted at once; under a steady stream, each listening stack
    /// wakes and reads the log at most once per window, whatever the commit rate, and a change waits up to one
    /// window longer. Only the relay's setting counts (the stack elected among those of the schema).
    public var hintWindow: Duration = .milliseconds(10)
    /// While hints arrive, a read that advances the feed's horizon is due once this much time passed since the
    /// last read… (see ``ChangeFeed``; tests change both to reach or avoid those reads).
    package var horizonReadInterval: Duration = .seconds(1)
    /// …or once this many hints arrived.
    package var hintsPerHorizonRead = 10_000
    /// How long the start waits for a notification sent through the pool to reach the listener.
    package var deliveryCheckTimeout: Duration = .seconds(10)

    /// Creates a configuration; every parameter has a default.
    public init(
        isEnabled: Bool = true, listener: PGConfiguration? = nil, applicationName: String? = nil,
        retention: Duration = .seconds(3600), maximumEntries: Int = 100_000, pruneInterval: Duration = .seconds(60),
        observerCoalescing: Duration = .zero, includesRowsInHints: Bool = false
    ) {
        self.isEnabled = isEnabled
        self.listener = listener
        self.applicationName = applicationName
        self.retention = retention
        self.maximumEntries = maximumEntries
        self.pruneInterval = pruneInterval
        self.observerCoalescing = observerCoalescing
        self.includesRowsInHints = includesRowsInHints
    }
}
