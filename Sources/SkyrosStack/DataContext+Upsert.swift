import SkyrosStore

extension DataContext {
    /// Inserts the row, or, when a stored row conflicts with it on `conflict` (a unique index's columns or a
    /// named unique constraint), overwrites every column the app sets of that row except its primary key (see
    /// `UpsertConflict`): `INSERT … ON CONFLICT ("email") DO UPDATE` when the context is saved, race-free
    /// across processes, at its place among the context's changes and atomic with them.
    ///
    /// ```swift
    /// try await stack.write { context in
    ///     try context.upsert(User(id: 9, email: "ada@example.com", name: "Ada"), onConflict: .columns(\.email))
    /// }
    /// ```
    ///
    /// With `.primaryKey` it is ``upsert(_:)``. With another target, which row it writes is
    /// known only when the database runs it (an existing row keeps its own primary key, which may differ from
    /// `value.id`), so, like ``update(where:set:)``, it is not applied to rows in memory before it commits:
    /// reads in this context (and, while it is queued, in the main context) show the table as it was. Once it
    /// commits, the main context drops its cached rows of the table, and observers of the table in every stack
    /// and process run their fetch again; other stacks learn the written row's primary key from the change
    /// feed.
    /// - Parameters:
    ///   - value: the row to insert or whose columns to write (an `DatabaseGenerated.identity` key of `0` is
    ///     allocated first, as for an insert).
    ///   - conflict: what the row conflicts on.
    /// - Throws: `ColumnValueError` for a value its column cannot hold, `StoreError.unknownColumn` for a conflict
    ///   column the entity does not declare (nothing is recorded). The save throws `UpsertConflictError` when
    ///   the database has no unique index or constraint for the target (and, in memory, for a constraint).
    public func upsert<T: Entity>(_ value: T, onConflict conflict: UpsertConflict<T>) throws {
        if conflict.isPrimaryKey { return try self.upsert(value) }
        try self.checkValid()
        try conflict.checkColumns()
        let (admitted, _) = try self.core.door.admit(self.core.assigningIdentity(value))
        let operation = PendingSetWrite(
            table: T.tableName, updates: true, emit: { $0.upsert(admitted, onConflict: conflict) },
            label: "upsert on \(conflict) of \(T.tableName)")
        self.tracker.withLock { $0.record(setWrite: operation) }
    }
}
