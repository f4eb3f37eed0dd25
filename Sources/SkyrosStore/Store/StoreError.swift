/// An error raised by a ``Store`` operation (database errors are passed through as `PGError`).
///
/// ```swift
/// do {
///     try await store.update(user, changedColumns: ["name"], expectedVersion: version)
/// } catch StoreError.versionConflict(let entity, let id, let expected, let actual) {
///     // someone else changed (or deleted, `actual == nil`) the row since it was read
/// }
/// ```
public enum StoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// An update or delete expected a version the row no longer has. `actual` is `nil` when the row is gone.
    /// `expected` is -1 when the change was read from another change of the stack whose version is not known
    /// (that one failed, or the row was written since).
    case versionConflict(entity: String, id: String, expected: Int64, actual: Int64?)
    /// An update without an expected version addressed a row that does not exist.
    case notFound(entity: String, id: String)
    /// An update named a column the entity does not declare.
    case unknownColumn(entity: String, column: String)
    /// The store was destroyed after the caller captured its ``Store/generation``.
    case storeDestroyed(generation: Int)
    /// `destroy` without a sandbox schema and without tables to drop, or another refused destructive request.
    case destroyRefused(reason: String)

    /// What went wrong, naming the entity and the row by its primary key; never the values of other columns.
    public var description: String {
        switch self {
        case .versionConflict(let entity, let id, let expected, let actual):
            let now = actual.map { "is now at version \($0)" } ?? "no longer exists"
            if expected == unknownRowVersion {
                return "version conflict: \(entity) id \(id) was read from a change that did not commit as read "
                    + "(it failed, or the row was written since), and \(now)"
            }
            return "version conflict: \(entity) id \(id) was expected at version \(expected) but \(now)"
        case .notFound(let entity, let id):
            return "\(entity) id \(id) does not exist"
        case .unknownColumn(let entity, let column):
            return "entity \(entity) has no column \"\(column)\""
        case .storeDestroyed(let generation):
            return "the store was destroyed (now at generation \(generation)); open a new context"
        case .destroyRefused(let reason):
            return "destroy refused: \(reason)"
        }
    }
}
