import Foundation
import SkyrosPostgres

extension SQLQueryBuilder {
    /// The SQL of an aggregate or projection request. Identifiers are quoted, values bound, and no column is
    /// given an alias (cells are read by position), so no user column can shadow a name the query uses.
    ///
    /// ```sql
    /// SELECT "priority", count(*), sum("amount"), max("created_at") FROM "app"."tickets"
    ///   WHERE ("status" = $1) GROUP BY "priority" ORDER BY "priority" ASC NULLS FIRST
    /// ```
    ///
    /// A descriptor with a limit or offset aggregates the rows of that window (a subquery ordered as a fetch).
    /// - Throws: ``QueryError`` for an untranslatable predicate or sort, a key path that is not a column, or a
    ///   negative limit or offset.
    package static func aggregate<T: Entity>(_ request: AggregateRequest<T>, schema: String?) throws -> PGQuery {
        let metadata = try EntityQueryMetadata.of(T.self)
        var writer = try SQLWriter(T.self, schema: schema)
        let descriptor = request.descriptor
        switch request.selection {
        case .columns(let names):
            let known = Set(metadata.columns.map(\.name))
            for name in names where !known.contains(name) {
                throw QueryError(
                    code: .unmappedKeyPath, entity: metadata.entityName, construct: name,
                    message: "cannot fetch \(name): it is not a column of \(metadata.entityName)")
            }
            writer.append("SELECT ")
            writer.append(names.map(quoteIdentifier).joined(separator: ", "))
            writer.append(" FROM ")
            writer.append(self.table(T.self, schema))
            try self.writeWhere(descriptor.predicate, into: &writer)
            writer.append(try self.orderBy(descriptor.sortBy))
            try self.writeWindow(descriptor, into: &writer)

        case .aggregates(let groups, let functions):
            let groupColumns = try groups.map { try self.aggregateColumn($0.keyPath, metadata, "group by") }
            var items = groupColumns.map(\.quoted)
            for function in functions { items.append(try self.aggregateCall(function, metadata)) }
            guard !items.isEmpty else {
                throw QueryError(
                    code: .invalidDescriptor, entity: metadata.entityName, construct: "aggregate",
                    message: "an aggregate of \(metadata.entityName) needs at least one function or a group-by column")
            }
            writer.append("SELECT ")
            writer.append(items.joined(separator: ", "))
            let windowed = descriptor.fetchLimit != nil || (descriptor.fetchOffset ?? 0) != 0
            writer.append(windowed ? " FROM (SELECT * FROM " : " FROM ")
            writer.append(self.table(T.self, schema))
            try self.writeWhere(descriptor.predicate, into: &writer)
            if windowed {
                writer.append(try self.orderBy(descriptor.sortBy))
                try self.writeWindow(descriptor, into: &writer)
                writer.append(") AS \"__skyros_window\"")
            } else {
                _ = try self.orderBy(descriptor.sortBy)
                try self.validateWindow(descriptor, T.self)
            }
            if !groupColumns.isEmpty {
                writer.append(" GROUP BY ")
                writer.append(groupColumns.map(\.quoted).joined(separator: ", "))
                writer.append(" ORDER BY ")
                writer.append(groupColumns.map { column in
                    column.quoted + (column.isString ? "::text COLLATE \"C\"" : "")
                        + (column.isOptional ? " ASC NULLS FIRST" : " ASC")
                }.joined(separator: ", "))
            }
        }
        return PGQuery(unsafeSQL: writer.sql, binds: writer.binds)
    }

    /// `count(*)`, `sum("col")::int8`, `min("col"::text COLLATE "C")`, ….
    private static func aggregateCall<T>(_ function: AggregateSpec<T>, _ metadata: EntityQueryMetadata) throws -> String {
        guard let keyPath = function.keyPath else { return "\(function.kind.rawValue)(*)" }
        let column = try self.aggregateColumn(keyPath, metadata, function.kind.rawValue)
        switch function.shape {
        case .plain: return "\(function.kind.rawValue)(\(column.quoted))"
        case .castToInt8: return "\(function.kind.rawValue)(\(column.quoted))::int8"
        case .codePointText: return "\(function.kind.rawValue)(\(column.quoted)::text COLLATE \"C\")"
        }
    }

    private static func aggregateColumn(
        _ keyPath: AnyKeyPath, _ metadata: EntityQueryMetadata, _ use: String
    ) throws -> EntityQueryMetadata.Column {
        guard let column = metadata.columnsByKeyPath[keyPath] else {
            throw QueryError(
                code: .unmappedKeyPath, entity: metadata.entityName, construct: "\(keyPath)",
                message: "cannot \(use) \(keyPath): it is not a column of \(metadata.entityName)")
        }
        return column
    }
}
