import SkyrosPostgres

/// One write as a single statement and the decoding of its rows, so that many can be sent in one pipeline.
package struct PipelinedStatement: Sendable {
    let query: PostgresQuery
    let decode: @Sendable (PostgresRows) throws -> [RowChange]
}

extension EntityChange {
    /// Inserts pipeline (`INSERT … RETURNING version`); other operations run one by one.
    func pipelined(on context: PostgresWriteContext) throws -> PipelinedStatement? {
        guard case .insert(let value) = self.payload else { return nil }
        let plan = try EntityPlan<T>.shared
        let values = try self.encodedRows?.first ?? RowEncoder(plan: plan).encode(value)
        var query = PostgresWriteContext.insertStatement(plan, schema: context.schema, rows: [values])
        query.append(PostgresQuery(unsafeSQL: " RETURNING \(plan.versionExpression)"))
        let id = values[plan.idIndex]
        return PipelinedStatement(query: query) { rows in
            [RowChange(entity: plan.entityName, table: plan.tableName, id: id, kind: .inserted, version: try rows.first?.decode(Int64.self, at: 0))]
        }
    }
}
