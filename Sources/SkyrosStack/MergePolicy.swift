import SkyrosStore

/// What a queued commit does when a row it updates or deletes was changed by someone else since it was read
/// (optimistic locking: the row's version — `xmin` or the entity's version column — differs).
///
/// Set per stack (``CommitQueueConfiguration/mergePolicy``) and per write
/// (`DataStack/write(durability:mergePolicy:_:)`).
///
/// ```swift
/// try await stack.write(durability: .committed, mergePolicy: .mergeByProperty) { context in
///     var user = try await context.object(User.self, id: id)!
///     user.nickname = "ada"
///     try await context.update(user)       // commits unless someone else changed `nickname` meanwhile
/// }
/// ```
public enum MergePolicy: Sendable, Hashable, CustomStringConvertible {
    /// The set fails with `StoreError.versionConflict` and is reverted from the main context; the store's row
    /// is kept. The default.
    case error
    /// The conflicting update or delete is dropped (the store's row is kept, and the main context reloads
    /// it); the set's other operations commit. The set succeeds.
    case storeWins
    /// The update is written without a version check (only the columns this write changed are overwritten;
    /// an update of a row deleted meanwhile fails with `StoreError.notFound`); a delete deletes whatever is
    /// there.
    case contextWins
    /// An update conflicts only when one of the columns it changes no longer holds the value read (someone
    /// else changed that same column); changes to other columns are kept on both sides. Deletes conflict
    /// when the row changed at all (as ``error``).
    case mergeByProperty

    public var description: String {
        switch self {
        case .error: "error"
        case .storeWins: "storeWins"
        case .contextWins: "contextWins"
        case .mergeByProperty: "mergeByProperty"
        }
    }
}
