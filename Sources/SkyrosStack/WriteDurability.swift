import SkyrosStore

/// When `DataStack/write(durability:_:)` returns.
public enum WriteDurability: Sendable, Hashable {
    /// Once every reader in the process sees the change (it is saved into the main context and its commit
    /// is queued). A commit failure is reported on `DataStack/errors`.
    case visible
    /// Once PostgreSQL committed the transaction; a commit failure is thrown.
    case committed
}
