import SkyrosPostgres

/// An upsert's conflict target (``UpsertConflict``) that the store cannot use; nothing was written.
///
/// ```swift
/// do {
///     try await store.upsert(user, onConflict: .columns(\.email))
/// } catch let error as UpsertConflictError {
///     print(error)    // upsert of User: no unique index or constraint covers exactly columns (email) …
/// }
/// ```
public enum UpsertConflictError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No unique index or constraint of the entity's table covers exactly these columns (PostgreSQL's SQLSTATE
    /// `42P10`, "there is no unique or exclusion constraint matching the ON CONFLICT specification").
    case noUniqueIndex(entity: String, columns: [String], sqlState: SQLState?)
    /// The table has no constraint of this name, or it is not a unique or primary key constraint (SQLSTATE
    /// `42704`, or `42809` "constraint in ON CONFLICT clause has no associated index").
    case noUniqueConstraint(entity: String, constraint: String, sqlState: SQLState?)
    /// The in-memory store does not model named constraints: use ``UpsertConflict/columns(_:)`` there.
    case constraintNotSupportedInMemory(entity: String, constraint: String)

    /// What went wrong, naming the entity and the columns or the constraint.
    public var description: String {
        switch self {
        case .noUniqueIndex(let entity, let columns, let sqlState):
            "upsert of \(entity): no unique index or constraint covers exactly columns (\(columns.joined(separator: ", "))) "
                + "of its table\(sqlState.map { " (SQLSTATE \($0))" } ?? ""); add one, or name other columns"
        case .noUniqueConstraint(let entity, let constraint, let sqlState):
            "upsert of \(entity): its table has no unique or primary key constraint named \"\(constraint)\""
                + (sqlState.map { " (SQLSTATE \($0))" } ?? "")
        case .constraintNotSupportedInMemory(let entity, let constraint):
            "upsert of \(entity) on constraint \"\(constraint)\": the in-memory store does not model named "
                + "constraints; name the conflict columns with .columns(…) instead"
        }
    }
}
