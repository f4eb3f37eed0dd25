import SkyrosPostgres

extension Store {
    /// Inserts the row, or, when a stored row conflicts with it on `conflict`, overwrites every column the app
    /// sets of that row except its primary key (see ``UpsertConflict``); returns the primary key of the row
    /// written, its new version, and whether it was inserted. On a conflict on other columns than the primary
    /// key, the stored row keeps its own primary key: `id` is that key, not `value.id`.
    ///
    /// ```swift
    /// let written = try await store.upsert(User(id: 9, email: "ada@example.com", name: "Ada"), onConflict: .columns(\.email))
    /// if !written.inserted { print("updated user \(written.id)") }
    /// ```
    /// - Parameters:
    ///   - value: the row to insert, or whose columns overwrite the conflicting row's.
    ///   - conflict: what the row conflicts on (``UpsertConflict/primaryKey`` writes `value.id`'s row).
    /// - Throws: ``UpsertConflictError`` when PostgreSQL has no unique index on the columns or no unique
    ///   constraint of that name (and, in memory, for a constraint target); ``StoreError/unknownColumn(entity:column:)``
    ///   for a column the entity does not declare; `PGError` `.uniqueViolation` when the row conflicts on another
    ///   unique key (its primary key, say) than the target.
    @discardableResult
    public func upsert<T: Entity>(
        _ value: T, onConflict conflict: UpsertConflict<T>
    ) async throws -> (id: T.ID, version: Int64, inserted: Bool) {
        var changes = ChangeSet()
        changes.upsert(value, onConflict: conflict)
        guard let change = try await self.apply(changes).operations[0].first else {
            throw PGError(kind: .decoding, message: "the upsert of \(T.self) returned no row")
        }
        guard let text = change.id.text else { throw PGError(kind: .decoding, message: "NULL primary key") }
        let id = try T.ID(postgresText: ArraySlice(text.utf8), type: change.id.type)
        return (id, change.version ?? 0, change.kind == .inserted)
    }
}
