import SkyrosPostgres

/// One write as a single statement and the decoding of its rows, so that many can be sent in one pipeline.
package struct PipelinedStatement: Sendable {
    let query: PGQuery
    let decode: @Sendable (PGRows) throws -> [RowChange]
}

extension EntityChange {
    /// Inserts pipeline (`INSERT … RETURNING version`); other operations run one by one.
    func pipelined(on context: PostgresWriteContext) throws -> PipelinedStatement? {
        try self.insertStatement(schema: context.schema)?.statement
    }

    /// An insert as one statement (`INSERT … RETURNING version[, read-back columns]`), and its row's key.
    func insertStatement(schema: String?) throws -> (statement: PipelinedStatement, key: PGValue)? {
        guard case .insert(let value) = self.payload else { return nil }
        let plan = try EntityPlan<T>.shared
        let values = try self.encodedRows?.first ?? RowEncoder(plan: plan).encode(value)
        var query = PostgresWriteContext.insertStatement(plan, schema: schema, rows: [values])
        query.append(PGQuery(unsafeSQL: " RETURNING \(plan.versionExpression)\(plan.returningReadBack)"))
        let id = plan.key(of: values)
        let statement = PipelinedStatement(query: query) { rows in
            var inserted = RowChange(
                entity: plan.entityName, table: plan.tableName, id: id, kind: .inserted, version: try rows.first?.decode(Int64.self, at: 0))
            if plan.hasReadBack, let row = rows.first { inserted.readBack = plan.readBack(row, from: 1) }
            return [inserted]
        }
        return (statement, id)
    }
}
