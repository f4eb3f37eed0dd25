import SkyrosPostgres

/// Upserts on a conflict target other than the primary key (``UpsertConflict``), in both stores.
extension EntityChange {
    /// The conflict columns' indices, validated against the entity.
    static func conflictIndices(_ names: [String], plan: EntityPlan<T>) throws -> [Int] {
        if names.isEmpty { throw UpsertConflictError.noUniqueIndex(entity: plan.entityName, columns: [], sqlState: nil) }
        return try names.map { name in
            guard let index = plan.columnIndex[name] else { throw StoreError.unknownColumn(entity: plan.entityName, column: name) }
            return index
        }
    }

    /// `INSERT … ON CONFLICT ("a", "b") | ON CONFLICT ON CONSTRAINT "name" DO UPDATE SET <every column the app
    /// sets but the primary key>[, version + 1] RETURNING <id>, <version>, <inserted?>[, <read-back columns>]`.
    /// The primary key is not written on a conflict: the stored row keeps its own, which the statement returns.
    static func upsertQuery(_ value: T, onConflict conflict: UpsertConflict<T>, schema: String?) throws -> PGQuery {
        let plan = try EntityPlan<T>.shared
        let target: String
        switch conflict.target {
        case .primaryKey:
            target = "(\(plan.quotedKeyColumns))"
        case .columns(let names):
            let indices = try Self.conflictIndices(names, plan: plan)
            target = "(" + indices.map { quoteIdentifier(plan.columnNames[$0]) }.joined(separator: ", ") + ")"
        case .constraint(let name):
            target = "ON CONSTRAINT \(quoteIdentifier(name))"
        }
        let values = try RowEncoder(plan: plan).encode(value)
        return Self.upsertStatement(
            values, plan: plan, target: target, schema: schema, returning: "\(plan.keyExpression), \(plan.versionExpression)")
    }

    /// Runs the upsert on PostgreSQL; an unusable target becomes an ``UpsertConflictError``.
    func upsert(_ value: T, onConflict conflict: UpsertConflict<T>, context: PostgresWriteContext) async throws -> [RowChange] {
        let plan = try EntityPlan<T>.shared
        let query = try Self.upsertQuery(value, onConflict: conflict, schema: context.schema)
        let rows: PGRows
        do {
            rows = try await context.connection.query(query)
        } catch let error as PGError {
            throw Self.conflictError(error, conflict: conflict, entity: plan.entityName) ?? error
        }
        guard let row = rows.first else { return [] }
        let key = try plan.idValue(try row.decode(T.ID.self, at: 0))
        let inserted = try row.decode(Bool.self, at: 2)
        var change = RowChange(
            entity: plan.entityName, table: plan.tableName, id: key, kind: inserted ? .inserted : .updated,
            version: try row.decode(Int64.self, at: 1))
        if plan.hasReadBack { change.readBack = plan.readBack(row, from: 3) }
        return [change]
    }

    /// The typed error for PostgreSQL's refusal of a conflict target, or `nil` for any other error.
    static func conflictError(_ error: PGError, conflict: UpsertConflict<T>, entity: String) -> UpsertConflictError? {
        switch conflict.target {
        case .columns(let names) where error.sqlState == SQLState("42P10"):
            return .noUniqueIndex(entity: entity, columns: names, sqlState: error.sqlState)
        case .constraint(let name) where error.sqlState == SQLState("42704") || error.sqlState == SQLState("42809"):
            return .noUniqueConstraint(entity: entity, constraint: name, sqlState: error.sqlState)
        default:
            return nil
        }
    }

    /// Runs the upsert in memory: the stored row whose conflict columns all equal the value's (NULL equals
    /// nothing, as in a unique index) is overwritten under its own primary key; without one the value is
    /// inserted (a duplicate primary key fails as an insert does).
    func upsert(_ value: T, onConflict conflict: UpsertConflict<T>, in database: inout InMemoryDatabase) throws -> [RowChange] {
        let plan = try EntityPlan<T>.shared
        let indices: [Int]
        switch conflict.target {
        case .primaryKey:
            return try EntityChange(payload: .upsert(value)).run(in: &database)
        case .columns(let names):
            indices = try Self.conflictIndices(names, plan: plan)
        case .constraint(let name):
            throw UpsertConflictError.constraintNotSupportedInMemory(entity: plan.entityName, constraint: name)
        }
        var values = try RowEncoder(plan: plan).encode(value)
        try database.door.check(plan, &values)
        try database.checkReferences(plan, values)
        let probe = indices.map { values[$0] }
        guard !probe.contains(where: \.isNull),
            let stored = database.tables[plan.tableName]?.rows.values.filter({ row in
                let storedValues = row.values(for: plan)
                return zip(indices, probe).allSatisfy { storedValues[$0.0] == $0.1 }
            }).min(by: { $0.sequence < $1.sequence })
        else {
            return try EntityChange(payload: .insert(value)).run(in: &database)
        }
        // The stored row keeps its primary key: the value is written under it, as a primary key upsert.
        let storedValues = stored.values(for: plan)
        for index in plan.keyIndices { values[index] = storedValues[index] }
        let rewritten = try RowDecoder(plan: plan).decode(values: values)
        return try EntityChange(payload: .upsert(rewritten)).run(in: &database)
    }
}
