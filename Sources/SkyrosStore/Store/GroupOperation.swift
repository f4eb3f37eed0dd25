import SkyrosPostgres

/// One operation of a group commit sent as a single pipeline (``PostgresStore`` group commit, fast path).
///
/// Nothing in such a pipeline may succeed half-way: a guarded write that matches no row must fail on the
/// server, so the transaction aborts and the group is run again on the savepoint path, which isolates the set
/// and reports the precise error (version conflict, not found). Its statement does that with
/// `SELECT …, 1 / count(*) FROM <the write's RETURNING>`: no row, division by zero.
package enum GroupOperation: Sendable {
    /// Rows to insert, merged with neighbouring inserts into the same table.
    case insert(MergeableInsert)
    /// One statement; `announced` are the rows it writes, for the change log, before it runs.
    case statement(PipelinedStatement, announced: [RowChange])
    /// Writes nothing (an update with no changed column).
    case nothing

    /// The rows the change log announces for this operation.
    var announced: [RowChange] {
        switch self {
        case .insert(let insert): insert.changes(version: insert.fixedVersion)
        case .statement(_, let announced): announced
        case .nothing: []
        }
    }
}

extension EntityChange {
    func groupOperation(schema: String?, copyThreshold: Int) throws -> GroupOperation? {
        let plan = try EntityPlan<T>.shared
        @Sendable func change(_ key: PGValue, _ kind: RowChange.Kind, _ version: Int64?) -> RowChange {
            RowChange(entity: plan.entityName, table: plan.tableName, id: key, kind: kind, version: version)
        }
        switch self.payload {
        case .insert:
            if plan.hasReadBack {
                // Its own statement, whose row carries the stored values of the columns the database sets.
                guard let insert = try self.insertStatement(schema: schema) else { return nil }
                return .statement(insert.statement, announced: [change(insert.key, .inserted, nil)])
            }
            guard case .insert(let value) = self.payload else { return nil }
            return .insert(try MergeableInsert(plan: plan, values: [value], encoded: self.encodedRows, schema: schema))
        case .bulkInsert where plan.hasReadBack:
            return nil
        case .bulkInsert(let values) where values.count < copyThreshold:
            return .insert(try MergeableInsert(plan: plan, values: values, encoded: self.encodedRows, schema: schema))
        case .bulkInsert, .deleteWhere, .upsertOn:
            return nil
        case .updateWhere(let predicate, let assignments):
            // Its rows are known only once it ran, so it announces none: the transaction's captured rows then
            // outnumber the rows its writer named, and the change capture attributes the group to no stack
            // (every stack, this one too, reads its rows again), which is what a set-based update needs anyway.
            let query = try SQLQueryBuilder.update(where: predicate, set: assignments, schema: schema)
            return .statement(
                PipelinedStatement(query: query) { rows in
                    try rows.map { row in
                        change(try plan.idValue(try row.decode(T.ID.self, at: 0)), .updated, try row.decode(Int64.self, at: 1))
                    }
                }, announced: [])

        case .update(let value, let columns, let expected):
            var skipsWhenGuardFails = false
            if case .skip = self.resolution, expected != nil { skipsWhenGuardFails = true }
            // Unless the guard may fail, no row affected fails the statement (and the pipeline).
            guard let update = try Self.updateQuery(
                value, columns, expected: expected, resolution: self.resolution, schema: schema, encoded: self.encodedRows?.first,
                mustAffectRow: !skipsWhenGuardFails)
            else { return .nothing }
            let query = update.query
            let key = update.key
            let announced = [change(key, .updated, nil)]
            if skipsWhenGuardFails {
                // The guard may fail: the row is kept as the store has it, and nothing is reported.
                return .statement(
                    PipelinedStatement(query: query) { rows in
                        guard let row = rows.first else { return [] }
                        var updated = change(key, .updated, try row.decode(Int64.self, at: 0))
                        if plan.hasReadBack { updated.readBack = plan.readBack(row, from: 1) }
                        return [updated]
                    }, announced: announced)
            }
            // Guarded by the version read (`.fail`): the stored row will be exactly this value, announced whole.
            // Its new version: the version column's next value, or (for `xmin`) the transaction's id, which the
            // hint carries (no savepoints in a pipelined group).
            var announcedRow = change(key, .updated, nil)
            // Not when the database sets columns: the values written are not the row stored (other stacks read it).
            if case .fail = self.resolution, let expected, !plan.hasReadBack {
                if plan.versionColumn != nil { announcedRow.version = expected + 1 }
                announcedRow.row = AnnouncedRow(base: expected, layout: plan.layout, values: update.values)
            }
            let asWrittenColumn = update.asWrittenColumn
            return .statement(
                PipelinedStatement(query: query) { rows in
                    var updated = change(key, .updated, try rows.first?.decode(Int64.self, at: 0))
                    if let asWrittenColumn { updated.isStoredAsWritten = try rows.first?.decode(Bool?.self, at: asWrittenColumn) == true }
                    if plan.hasReadBack, let row = rows.first { updated.readBack = plan.readBack(row, from: asWrittenColumn.map { $0 + 1 } ?? 1) }
                    return [updated]
                }, announced: [announcedRow])

        case .delete(let id, let expected):
            let delete = try Self.deleteQuery(id, expected: expected, schema: schema)
            var query = delete.query
            let key = delete.key
            let announced = [change(key, .deleted, nil)]
            var guarded = expected != nil
            if case .skip = self.resolution { guarded = false }
            if guarded {
                query.sql = EntityPlan<T>.mustAffectRow(query.sql + " RETURNING 1 AS v")
                return .statement(PipelinedStatement(query: query) { _ in announced }, announced: announced)
            }
            return .statement(
                PipelinedStatement(query: query) { rows in rows.affectedRows > 0 ? announced : [] }, announced: announced)

        case .upsert(let value):
            let (query, key) = try Self.upsertQuery(value, schema: schema)
            return .statement(
                PipelinedStatement(query: query) { rows in
                    guard let row = rows.first else { return [] }
                    var upserted = change(key, try row.decode(Bool.self, at: 1) ? .inserted : .updated, try row.decode(Int64.self, at: 0))
                    if plan.hasReadBack { upserted.readBack = plan.readBack(row, from: 2) }
                    return [upserted]
                }, announced: [change(key, .updated, nil)])
        }
    }
}
