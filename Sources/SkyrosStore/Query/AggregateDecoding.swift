import Foundation
import SkyrosPostgres

/// Builds ``AggregateRequest``s from typed arguments and decodes their ``AggregateRows`` into typed results,
/// shared by the ``Store`` methods and the context's, so both decode the same cells the same way (group keys
/// and projections through the row codec, `RowDecodingState`).
package enum AggregateDecoding {
    /// The request for `functions`, grouped by the `groupBy` columns (none: one row over every selected row).
    package static func request<T: Entity, each V: Sendable>(
        _ descriptor: FetchDescriptor<T>, groupBy: [AggregateGroupColumn<T>], _ functions: repeat AggregateFunction<T, each V>
    ) -> AggregateRequest<T> {
        var specs: [AggregateSpec<T>] = []
        for function in repeat each functions { specs.append(function.spec) }
        return AggregateRequest(descriptor: descriptor, selection: .aggregates(groups: groupBy, functions: specs))
    }

    /// The one row of an aggregate without grouping.
    package static func single<T: Entity, each V: Sendable>(
        _ result: AggregateRows, _ functions: repeat AggregateFunction<T, each V>
    ) throws -> (repeat each V) {
        guard let row = result.rows.first, result.rows.count == 1 else {
            throw PGError(kind: .decoding, message: "an aggregate without grouping returned \(result.rows.count) rows, not 1")
        }
        return try self.values(row, from: 0, repeat each functions)
    }

    /// One `(key, values)` per group, in the group column's order.
    package static func grouped<T: Entity, K: Decodable & Sendable, each V: Sendable>(
        _ result: AggregateRows, keyPath: KeyPath<T, K>, _ functions: repeat AggregateFunction<T, each V>
    ) throws -> [(key: K, values: (repeat each V))] {
        let keys = try self.keys(result, keyPath, at: 0)
        return try result.rows.indices.map { index in
            (key: keys[index], values: try self.values(result.rows[index], from: 1, repeat each functions))
        }
    }

    /// One `(key, values)` per pair of group keys, ordered by the first key, then the second.
    package static func grouped<T: Entity, K1: Decodable & Sendable, K2: Decodable & Sendable, each V: Sendable>(
        _ result: AggregateRows, keyPaths: (KeyPath<T, K1>, KeyPath<T, K2>), _ functions: repeat AggregateFunction<T, each V>
    ) throws -> [(key: (K1, K2), values: (repeat each V))] {
        let first = try self.keys(result, keyPaths.0, at: 0)
        let second = try self.keys(result, keyPaths.1, at: 1)
        return try result.rows.indices.map { index in
            (key: (first[index], second[index]), values: try self.values(result.rows[index], from: 2, repeat each functions))
        }
    }

    /// The group keys in cell `position` of each row, decoded through the row codec as the column's values are.
    private static func keys<T: Entity, K: Decodable>(
        _ result: AggregateRows, _ keyPath: KeyPath<T, K>, at position: Int
    ) throws -> [K] {
        let plan = try EntityPlan<T>.shared
        guard let column = try EntityQueryMetadata.of(T.self).columnsByKeyPath[keyPath] else {
            throw QueryError(
                code: .unmappedKeyPath, entity: plan.entityName, construct: "\(keyPath)",
                message: "cannot group by \(keyPath): it is not a column of \(plan.entityName)")
        }
        let state = RowDecodingState(
            entityName: plan.entityName, columnNames: [column.name], keyStrategy: plan.keyStrategy,
            valueRows: result.rows.map { [position < $0.count ? $0[position] : .null] })
        return try result.rows.indices.map { try state.decodeAny(K.self, $0, 0) }
    }

    /// The request for a projection of `descriptor`'s rows onto `properties` (every column when empty).
    package static func projection<T: Entity>(
        _ descriptor: FetchDescriptor<T>, properties: [PartialKeyPath<T>]
    ) throws -> AggregateRequest<T> {
        let metadata = try EntityQueryMetadata.of(T.self)
        let names = try properties.isEmpty ? metadata.columns.map(\.name) : properties.map { keyPath in
            guard let column = metadata.columnsByKeyPath[keyPath] else {
                throw QueryError(
                    code: .unmappedKeyPath, entity: metadata.entityName, construct: "\(keyPath)",
                    message: "cannot fetch \(keyPath): it is not a column of \(metadata.entityName)")
            }
            return column.name
        }
        return AggregateRequest(descriptor: descriptor, selection: .columns(names))
    }

    /// The rows of a projection decoded into `P`, whose Codable keys name columns as the entity's do (its
    /// `ColumnKeyStrategy`); `P` may read any subset of the selected columns.
    package static func projected<T: Entity, P: Decodable>(
        _ result: AggregateRows, of request: AggregateRequest<T>, as type: P.Type
    ) throws -> [P] {
        guard case .columns(let names) = request.selection else { return [] }
        let plan = try EntityPlan<T>.shared
        let state = RowDecodingState(
            entityName: plan.entityName, columnNames: names, keyStrategy: plan.keyStrategy, valueRows: result.rows)
        return try result.rows.indices.map { row in
            state.begin()
            return try P(from: RowDecoderImpl(state: state, row: row))
        }
    }

    private static func values<T: Entity, each V: Sendable>(
        _ row: [PGValue], from offset: Int, _ functions: repeat AggregateFunction<T, each V>
    ) throws -> (repeat each V) {
        var index = offset
        func next<X>(_ function: AggregateFunction<T, X>) throws -> X {
            guard index < row.count else {
                throw PGError(kind: .decoding, message: "an aggregate row has \(row.count) cells, fewer than its functions")
            }
            defer { index += 1 }
            return try function.decode(row[index])
        }
        return (repeat try next(each functions))
    }
}
