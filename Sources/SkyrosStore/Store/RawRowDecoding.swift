import Foundation
import SkyrosPostgres

/// Decodes the result of a statement the caller wrote (a CTE, a window function, a join) with the row codec
/// the stores use: into an ``Entity`` (its columns matched by name, the extra ones ignored) or into any
/// `Decodable` (a key per column).
package enum RawRowDecoding {
    /// The rows as entities of `type`, each with its version when the result carries it: a column named
    /// `__version`, else the entity's ``Entity/versionColumn``, else `xmin` (as `SELECT *, xmin` returns it);
    /// `nil` when the result has none of them or the cell is NULL.
    /// - Throws: ``EntityMappingError`` when one of the entity's columns is missing from the result; `PGError`
    ///   (`.decoding`, naming entity and column) for a value that does not fit.
    package static func entities<T: Entity>(_ type: T.Type, from rows: PGRows) throws -> [(value: T, version: Int64?)] {
        guard !rows.isEmpty else { return [] }
        let plan = try EntityPlan<T>.shared
        let state = try RowDecodingState(plan: plan, rows: rows)
        let versionIndex = Self.versionIndex(of: plan, in: rows)
        var result: [(value: T, version: Int64?)] = []
        result.reserveCapacity(rows.count)
        for row in 0..<rows.count {
            state.begin()
            let value = try T(from: RowDecoderImpl(state: state, row: row))
            try state.end()
            var version: Int64?
            if let versionIndex, let bytes = rows.cellBytes(row: row, column: versionIndex) {
                let type = rows.columns[versionIndex].type
                if let parsed = try? Int64(postgresText: bytes, type: type) {
                    version = parsed
                } else {
                    do {
                        version = try rows[row].decode(Int64.self, at: versionIndex)
                    } catch {
                        throw state.columnError(error, resultColumn: versionIndex)
                    }
                }
            }
            result.append((value, version))
        }
        return result
    }

    /// The result column holding the row version, if any (see ``entities(_:from:)``).
    private static func versionIndex<T>(of plan: EntityPlan<T>, in rows: PGRows) -> Int? {
        if let index = rows.index(ofColumn: SQLQueryBuilder.versionAlias) { return index }
        if let column = plan.versionColumn { return rows.index(ofColumn: column) }
        return rows.index(ofColumn: "xmin")
    }

    /// The rows as values of `type`: a type the client decodes natively (`Int`, `String`, `UUID`, `Date`, …)
    /// from the first column; any other `Decodable` with one key per column, named as `keyStrategy` maps them
    /// (columns no key reads are ignored; a nested value needs a json or jsonb column).
    /// - Throws: ``EntityMappingError`` naming a key that has no column; `PGError` (`.decoding`, naming the
    ///   column) for a value that does not fit.
    package static func values<T: Decodable>(_ type: T.Type, from rows: PGRows, keyStrategy: ColumnKeyStrategy) throws -> [T] {
        guard !rows.isEmpty else { return [] }
        if let native = T.self as? any PGDecodable.Type {
            guard !rows.columns.isEmpty else {
                throw EntityMappingError(entity: "\(T.self)", message: "the result has no column to decode")
            }
            return try (0..<rows.count).map { row in try Self.decode(native, rows[row]) as! T }
        }
        let state = RowDecodingState(name: "\(T.self)", rows: rows, keyStrategy: keyStrategy)
        var result: [T] = []
        result.reserveCapacity(rows.count)
        for row in 0..<rows.count {
            state.begin()
            result.append(try T(from: RowDecoderImpl(state: state, row: row)))
            try state.end()
        }
        return result
    }

    private static func decode<V: PGDecodable>(_ type: V.Type, _ row: PGRow) throws -> V { try row.decode(V.self, at: 0) }
}
