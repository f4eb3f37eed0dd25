import SkyrosPostgres

/// Reads on a connection the caller holds inside its own transaction (an interactive transaction of the
/// stack), optionally locking the rows they return. Writes in such a transaction use ``apply(_:on:)``.
extension PostgresStore {
    /// The rows matching `descriptor` on `connection`, locked as `lock` says until the transaction ends.
    /// - Throws: ``QueryError`` for an untranslatable predicate; `PGError` (SQLSTATE `55P03` for a `NOWAIT`
    ///   lock another transaction holds).
    package func fetch<T: Entity>(
        _ descriptor: FetchDescriptor<T>, lock: RowLock?, on connection: PGConnection
    ) async throws -> [Versioned<T>] {
        let plan = try EntityPlan<T>.shared
        let query = try SQLQueryBuilder.select(descriptor, schema: self.schema, lock: lock)
        return try RowDecoder(plan: plan).decode(try await connection.query(query))
    }

    /// The row with `id` on `connection`, locked as `lock` says; `nil` when it does not exist (or, with
    /// `SKIP LOCKED`, another transaction holds it).
    package func object<T: Entity>(
        _ type: T.Type, id: T.ID, lock: RowLock?, on connection: PGConnection
    ) async throws -> Versioned<T>? {
        let plan = try EntityPlan<T>.shared
        var query = try self.selectByID(plan, id: try plan.idValue(id))
        if let lock { query.sql += lock.description }
        return try RowDecoder(plan: plan).decode(try await connection.query(query)).first
    }

    /// The number of rows matching `descriptor` on `connection`.
    package func count<T: Entity>(_ descriptor: FetchDescriptor<T>, on connection: PGConnection) async throws -> Int {
        let rows = try await connection.query(try SQLQueryBuilder.count(descriptor, schema: self.schema))
        return try rows.first?.decode(Int.self, at: 0) ?? 0
    }
}
