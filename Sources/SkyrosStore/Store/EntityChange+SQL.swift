import SkyrosPostgres

extension EntityChange {
    /// `UPDATE … SET <changed columns>[, version + 1] WHERE id = … [AND <guard>] RETURNING <version>`, the
    /// row's key and its values; `nil` when no column changes. The guard is the expected version, or with
    /// ``ConflictResolution/compareColumns(originals:)`` the changed columns' values as read. `encoded`: the
    /// row's values as ``RowEncoder`` encodes them, when the caller has them.
    ///
    /// An update that may keep other writers' changes to the columns it does not write (no version guard:
    /// unguarded, or merged by property) also returns, in column `asWrittenColumn`, whether each of those
    /// columns holds the value written (compared as PostgreSQL prints both, so a value that prints differently
    /// counts as changed): then the stored row is the value written. Only scalars are returned, so a cached
    /// statement keeps working when a column's type changes.
    static func updateQuery(
        _ value: T, _ columns: [String], expected: Int64?, resolution: ConflictResolution, schema: String?,
        encoded: [PGValue]? = nil, mustAffectRow: Bool = false
    ) throws -> (query: PGQuery, key: PGValue, values: [PGValue], asWrittenColumn: Int?)? {
        let plan = try EntityPlan<T>.shared
        let indices = try Self.columnIndices(columns, plan: plan)
        if indices.isEmpty { return nil }
        let key = try plan.idValue(value.id)
        let values = try encoded ?? RowEncoder(plan: plan).encode(value)
        var binds: [PGValue] = []
        binds.reserveCapacity(indices.count + plan.keyIndices.count + 1)
        for index in indices { binds.append(values[index]) }
        for index in plan.keyIndices { binds.append(values[index]) }
        var sql: String
        switch resolution {
        case .compareColumns(let originals):
            // Merge by property: only the columns this update changes must still hold what was read.
            sql = plan.updateHead(schema: schema, columns: indices)
            for index in indices {
                guard let original = originals[plan.columnNames[index]] else { continue }
                binds.append(original)
                // A JSON value is bound as jsonb, which a json column has no operator for: compare both as jsonb.
                let cast = original.type == .jsonb || original.type == .json ? "::jsonb" : ""
                sql += " AND \(quoteIdentifier(plan.columnNames[index]))\(cast) IS NOT DISTINCT FROM $\(binds.count)\(cast)"
            }
        case .fail, .skip:
            if let expected {
                binds.append(PGValue(type: .int8, text: String(expected)))
                let sql = plan.updateSQL(schema: schema, columns: indices, guardedByVersion: true, mustAffectRow: mustAffectRow)
                return (PGQuery(unsafeSQL: sql, binds: binds), key, values, nil)
            }
            sql = plan.updateHead(schema: schema, columns: indices)
        }
        var unchanged: [String] = []
        // The columns the database sets are returned as stored, not compared.
        for index in plan.insertedIndices where !plan.isKeyColumn(index) && !indices.contains(index) {
            binds.append(values[index])
            unchanged.append("\(quoteIdentifier(plan.columnNames[index]))::text IS NOT DISTINCT FROM $\(binds.count)::text")
        }
        let asWritten = unchanged.isEmpty ? "true" : unchanged.joined(separator: " AND ")
        sql += " RETURNING \(plan.versionExpression) AS v, (\(asWritten)) AS as_written\(plan.returningReadBack)"
        if mustAffectRow, plan.hasReadBack {
            // Version, as_written and the read-back columns as returned, then the check.
            return (PGQuery(unsafeSQL: EntityPlan<T>.mustAffectRowKeepingColumns(sql), binds: binds), key, values, 1)
        }
        if mustAffectRow {
            sql = "WITH skyros_write AS (\(sql)) SELECT max(skyros_write.v), 1 / count(*), bool_and(skyros_write.as_written) FROM skyros_write"
        }
        return (PGQuery(unsafeSQL: sql, binds: binds), key, values, mustAffectRow ? 2 : 1)
    }

    /// `DELETE FROM … WHERE <key> = $1… [AND <version> = $n]`, and the row's key.
    static func deleteQuery(_ id: T.ID, expected: Int64?, schema: String?) throws -> (query: PGQuery, key: PGValue) {
        let plan = try EntityPlan<T>.shared
        let key = try plan.idValue(id)
        var binds = try plan.keyBinds(key)
        var sql = "DELETE FROM \(plan.quotedTable(schema: schema)) WHERE \(plan.keyCondition(first: 1))"
        if let expected {
            binds.append(PGValue(type: .int8, text: String(expected)))
            sql += " AND \(plan.versionExpression) = $\(binds.count)"
        }
        return (PGQuery(unsafeSQL: sql, binds: binds), key)
    }

    /// `INSERT … ON CONFLICT (id) DO UPDATE … RETURNING <version>, <inserted?>`, and the row's key.
    static func upsertQuery(_ value: T, schema: String?) throws -> (query: PGQuery, key: PGValue) {
        let plan = try EntityPlan<T>.shared
        let values = try RowEncoder(plan: plan).encode(value)
        let query = Self.upsertStatement(
            values, plan: plan, target: "(\(plan.quotedKeyColumns))", schema: schema, returning: plan.versionExpression)
        return (query, plan.key(of: values))
    }

    /// `INSERT … ON CONFLICT <target> DO UPDATE SET <every column the app sets but the primary key>[, version + 1]
    /// RETURNING <returning>, <inserted?>[, <read-back columns>]`: the upsert of `values` (encoded in
    /// ``Entity/columns`` order) on any conflict target. The primary key is not written on a conflict: the stored
    /// row keeps its own. An entity whose only columns are its key rewrites the stored key as it is, so that the
    /// row is returned (`DO NOTHING` returns nothing).
    static func upsertStatement(
        _ values: [PGValue], plan: EntityPlan<T>, target: String, schema: String?, returning: String
    ) -> PGQuery {
        let table = plan.quotedTable(schema: schema)
        var assignments = plan.insertedIndices.filter { !plan.isKeyColumn($0) }.map { index in
            "\(quoteIdentifier(plan.columnNames[index])) = EXCLUDED.\(quoteIdentifier(plan.columnNames[index]))"
        }
        if let versionColumn = plan.versionColumn {
            assignments.append("\(quoteIdentifier(versionColumn)) = \(table).\(quoteIdentifier(versionColumn)) + 1")
        }
        if assignments.isEmpty {
            let first = quoteIdentifier(plan.columnNames[plan.idIndex])
            assignments = ["\(first) = \(table).\(first)"]
        }
        var query = PostgresWriteContext.insertStatement(plan, schema: schema, rows: [values])
        query.append(
            PGQuery(
                unsafeSQL: " ON CONFLICT \(target) DO UPDATE SET \(assignments.joined(separator: ", ")) "
                    + "RETURNING \(returning), (xmax::text = '0')\(plan.returningReadBack)"))
        return query
    }
}
