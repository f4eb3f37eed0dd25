import SkyrosPostgres

extension EntityChange {
    /// `UPDATE … SET <changed columns>[, version + 1] WHERE id = … [AND <guard>] RETURNING <version>`, and the
    /// row's key; `nil` when no column changes. The guard is the expected version, or with
    /// ``ConflictResolution/compareColumns(originals:)`` the changed columns' values as read. `encoded`: the
    /// row's values as ``RowEncoder`` encodes them, when the caller has them.
    static func updateQuery(
        _ value: T, _ columns: [String], expected: Int64?, resolution: ConflictResolution, schema: String?,
        encoded: [PostgresValue]? = nil, mustAffectRow: Bool = false
    ) throws -> (query: PostgresQuery, key: PostgresValue, values: [PostgresValue])? {
        let plan = try EntityPlan<T>.shared
        let indices = try Self.columnIndices(columns, plan: plan)
        if indices.isEmpty { return nil }
        let key = try plan.idValue(value.id)
        let values = try encoded ?? RowEncoder(plan: plan).encode(value)
        var binds: [PostgresValue] = []
        binds.reserveCapacity(indices.count + 2)
        for index in indices { binds.append(values[index]) }
        binds.append(key)
        guard case .compareColumns(let originals) = resolution else {
            if let expected { binds.append(PostgresValue(type: .int8, text: String(expected))) }
            let sql = plan.updateSQL(schema: schema, columns: indices, guardedByVersion: expected != nil, mustAffectRow: mustAffectRow)
            return (PostgresQuery(unsafeSQL: sql, binds: binds), key, values)
        }
        // Merge by property: only the columns this update changes must still hold what was read.
        var sql = plan.updateHead(schema: schema, columns: indices)
        for index in indices {
            guard let original = originals[plan.columnNames[index]] else { continue }
            binds.append(original)
            // A JSON value is bound as jsonb, which a json column has no operator for: compare both as jsonb.
            let cast = original.type == .jsonb || original.type == .json ? "::jsonb" : ""
            sql += " AND \(quoteIdentifier(plan.columnNames[index]))\(cast) IS NOT DISTINCT FROM $\(binds.count)\(cast)"
        }
        sql += " RETURNING \(plan.versionExpression)"
        if mustAffectRow { sql = EntityPlan<T>.mustAffectRow(sql + " AS v") }
        return (PostgresQuery(unsafeSQL: sql, binds: binds), key, values)
    }

    /// `DELETE FROM … WHERE id = $1 [AND <version> = $2]`, and the row's key.
    static func deleteQuery(_ id: T.ID, expected: Int64?, schema: String?) throws -> (query: PostgresQuery, key: PostgresValue) {
        let plan = try EntityPlan<T>.shared
        let key = try plan.idValue(id)
        var binds = [key]
        var sql = "DELETE FROM \(plan.quotedTable(schema: schema)) WHERE \(quoteIdentifier(plan.idColumn)) = $1"
        if let expected {
            binds.append(PostgresValue(type: .int8, text: String(expected)))
            sql += " AND \(plan.versionExpression) = $2"
        }
        return (PostgresQuery(unsafeSQL: sql, binds: binds), key)
    }

    /// `INSERT … ON CONFLICT (id) DO UPDATE … RETURNING <version>, <inserted?>`, and the row's key.
    static func upsertQuery(_ value: T, schema: String?) throws -> (query: PostgresQuery, key: PostgresValue) {
        let plan = try EntityPlan<T>.shared
        let table = plan.quotedTable(schema: schema)
        let idColumn = quoteIdentifier(plan.idColumn)
        let values = try RowEncoder(plan: plan).encode(value)
        var assignments = plan.columnNames.indices.filter { $0 != plan.idIndex }.map { index in
            "\(quoteIdentifier(plan.columnNames[index])) = EXCLUDED.\(quoteIdentifier(plan.columnNames[index]))"
        }
        if let versionColumn = plan.versionColumn {
            assignments.append("\(quoteIdentifier(versionColumn)) = \(table).\(quoteIdentifier(versionColumn)) + 1")
        }
        if assignments.isEmpty { assignments = ["\(idColumn) = EXCLUDED.\(idColumn)"] }
        var query = PostgresWriteContext.insertStatement(plan, schema: schema, rows: [values])
        query.append(
            PostgresQuery(
                unsafeSQL: " ON CONFLICT (\(idColumn)) DO UPDATE SET \(assignments.joined(separator: ", ")) "
                    + "RETURNING \(plan.versionExpression), (xmax::text = '0')"))
        return (query, values[plan.idIndex])
    }
}
