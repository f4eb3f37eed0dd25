import Foundation
import SkyrosPostgres

extension PostgresStore {
    /// Runs an aggregate or projection as one statement: quoted identifiers, bound values, `GROUP BY` and
    /// `ORDER BY` on the group column, no column aliased.
    public func evaluate<T: Entity>(_ request: AggregateRequest<T>) async throws -> AggregateRows {
        let query = try SQLQueryBuilder.aggregate(request, schema: self.schema)
        let rows = try await self.pool.withConnection { try await $0.query(query) }
        return AggregateRows(rows)
    }
}
