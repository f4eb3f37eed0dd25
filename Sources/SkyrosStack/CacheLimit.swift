import SkyrosStore

/// The bound of the main context's row cache: a number of rows and/or an approximate number of bytes.
///
/// Clean rows are evicted least-recently-used first when either bound is exceeded; rows with changes still
/// queued for commit are never evicted. The byte size of a row is the size of its encoded column values
/// (computed only when ``maxBytes`` is set).
///
/// ```swift
/// let configuration = DataStackConfiguration(store: .inMemory, cacheLimit: CacheLimit(maxRows: 50_000, maxBytes: 64 << 20))
/// ```
public struct CacheLimit: Sendable, Hashable {
    /// The maximum number of cached rows; `nil` for no row bound.
    public var maxRows: Int?
    /// The maximum approximate size of the cached rows in bytes; `nil` for no byte bound.
    public var maxBytes: Int?
    /// How long a clean row may be served from the cache before it is read again; `nil` (the default) for no
    /// bound.
    ///
    /// With the change capture installed (the default on PostgreSQL) every writer's committed changes reach
    /// the cache within moments, and this is not needed. It bounds staleness for a deployment that declines
    /// the capture's triggers and turns the change feed off, so that another writer's change is served from
    /// memory for at most `maxAge`:
    ///
    /// ```swift
    /// var configuration = DataStackConfiguration(store: .postgres(url), entities: [Author.self, Book.self])
    /// configuration.changeFeed.isEnabled = false   // no triggers installed, no listener
    /// configuration.cacheLimit = CacheLimit(maxRows: 10_000, maxAge: .seconds(30))
    /// ```
    ///
    /// A row with changes still queued for commit is served as written, whatever its age.
    public var maxAge: Duration?

    /// Creates a bound.
    /// - Parameters:
    ///   - maxRows: the maximum number of rows (`nil`: unbounded by count).
    ///   - maxBytes: the maximum approximate bytes (`nil`: unbounded by size).
    ///   - maxAge: how long a clean row is served from memory before it is read again (`nil`: no bound).
    ///
    /// ```swift
    /// let limit = CacheLimit(maxRows: 10_000, maxAge: .seconds(30))
    /// ```
    public init(maxRows: Int? = 10_000, maxBytes: Int? = nil, maxAge: Duration? = nil) {
        self.maxRows = maxRows.map { max(0, $0) }
        self.maxBytes = maxBytes.map { max(0, $0) }
        self.maxAge = maxAge
    }

    /// 10,000 rows, no byte bound.
    public static let `default` = CacheLimit()
}

/// Counters of the main context's row cache.
public struct CacheStatistics: Sendable, Hashable {
    /// Rows currently cached.
    public var rows: Int
    /// Approximate bytes of the cached rows (0 unless ``CacheLimit/maxBytes`` is set).
    public var bytes: Int
    /// Reads by id served from the cache.
    public var hits: Int
    /// Reads by id that went to the store.
    public var misses: Int
    /// Rows evicted to stay within the bound.
    public var evictions: Int
}
