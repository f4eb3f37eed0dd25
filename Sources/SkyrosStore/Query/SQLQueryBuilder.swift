import Foundation
import SkyrosPostgres

/// Builds the parameterized SQL for fetch descriptors: `WHERE`, `ORDER BY`, `SELECT`, `count` and `DELETE`.
///
/// Values are always bound parameters; identifiers are always quoted. The per-entity work (column map, select
/// list, primary key) is computed once per type and cached, so building a query only walks the predicate tree.
///
/// ```swift
/// let query = try SQLQueryBuilder.select(
///     FetchDescriptor<User>(predicate: #Predicate { $0.name.starts(with: "A") }, fetchLimit: 10),
///     schema: "app", includeVersion: true)
/// // SELECT "id", "name", "age", xmin AS "__version" FROM "app"."users"
/// //   WHERE ("name" LIKE $1 ESCAPE E'\\') ORDER BY "id" ASC LIMIT $2      binds: ["A%", 10]
/// ```
///
/// Public only to the benchmarks (`@_spi(Benchmarks)`), which measure what building a query costs.
@_spi(Benchmarks) public enum SQLQueryBuilder {
    /// The name of the version column added by ``select(_:schema:includeVersion:)``.
    package static let versionAlias = "__version"

    /// The row version in a select list: the entity's version column, or `xmin` as it is — its text is the
    /// transaction id's number, which decodes as `Int64` like `xmin::text::int8` (the form comparisons need)
    /// without two casts per row on the server.
    package static func versionSelection(_ versionColumn: String?) -> String {
        versionColumn.map(quoteIdentifier) ?? "xmin"
    }

    /// The predicate as a boolean SQL expression with `$1…$n` placeholders; `nil` when `predicate` is `nil`.
    /// - Throws: ``QueryError`` naming the first construct that cannot be translated.
    package static func condition<T: Entity>(_ predicate: Predicate<T>?) throws -> PGQuery? {
        try self.translation(predicate)?.condition
    }

    /// ``condition(_:)``, and the entity types whose rows it reads through references (each once, in the order
    /// first read).
    /// - Throws: ``QueryError`` naming the first construct that cannot be translated.
    package static func translation<T: Entity>(
        _ predicate: Predicate<T>?
    ) throws -> (condition: PGQuery, referencedTypes: [any Entity.Type])? {
        guard let predicate else { return nil }
        var writer = try SQLWriter(T.self, schema: nil)
        try writer.writeCondition(predicate)
        var seen: Set<ObjectIdentifier> = []
        let types = writer.referencedTypes.filter { seen.insert(ObjectIdentifier($0)).inserted }
        return (PGQuery(unsafeSQL: writer.sql, binds: writer.binds), types)
    }

    /// `" ORDER BY …"` for `sort`, or for `T.defaultSort` when `sort` is empty, always ending with the primary
    /// key so the order is total. Every column sorts as stored, so that an index on it serves the order: strings
    /// as `text` in the column's collation (code-point order on a `COLLATE "C"` column, as Swift sorts), enums in
    /// their declared order; `nil` sorts first ascending, last descending.
    /// - Throws: ``QueryError`` (`unsupportedSort`, `unmappedKeyPath`) for a sort that SQL cannot reproduce.
    package static func orderBy<T: Entity>(_ sort: [SortDescriptor<T>]) throws -> String {
        let metadata = try EntityQueryMetadata.of(T.self)
        var sql = " ORDER BY "
        var first = true
        for (column, forward) in try self.sortColumns(sort, metadata) {
            if !first { sql += ", " }
            first = false
            sql += column.quoted
            // As text, like the predicate's column references (a no-op on `text`, served by an index on
            // `varchar`; `citext` sorts case-sensitively, as Swift does).
            if column.isString { sql += "::text" }
            sql += forward ? " ASC" : " DESC"
            if column.isOptional { sql += forward ? " NULLS FIRST" : " NULLS LAST" }
        }
        return sql
    }

    /// `SELECT <every column> [, <version> AS "__version"] FROM "schema"."table" [WHERE …] ORDER BY … [LIMIT …]
    /// [OFFSET …]`. The version is ``versionSelection(_:)``.
    /// - Parameters:
    ///   - descriptor: what to fetch.
    ///   - schema: the schema holding the table; `nil` uses the search path.
    ///   - includeVersion: whether to add the `"__version"` column (for optimistic locking).
    /// - Throws: ``QueryError`` for an untranslatable predicate or sort, or a negative limit or offset.
    @_spi(Benchmarks) public static func select<T: Entity>(
        _ descriptor: FetchDescriptor<T>, schema: String?, includeVersion: Bool
    ) throws -> PGQuery {
        let metadata = try EntityQueryMetadata.of(T.self)
        var writer = try SQLWriter(T.self, schema: schema)
        writer.append("SELECT ")
        writer.append(metadata.selectList)
        if includeVersion {
            writer.append(", \(self.versionSelection(T.versionColumn)) AS \(quoteIdentifier(versionAlias))")
        }
        writer.append(" FROM ")
        writer.append(self.table(T.self, schema))
        try self.writeWhere(descriptor, into: &writer)
        writer.append(try self.orderBy(descriptor.sortBy))
        try self.writeWindow(descriptor, into: &writer)
        return PGQuery(unsafeSQL: writer.sql, binds: writer.binds)
    }

    /// `SELECT count(*) …` for the rows `descriptor` selects (its limit and offset included).
    /// - Throws: ``QueryError`` as ``select(_:schema:includeVersion:)``.
    package static func count<T: Entity>(_ descriptor: FetchDescriptor<T>, schema: String?) throws -> PGQuery {
        var writer = try SQLWriter(T.self, schema: schema)
        let windowed = descriptor.fetchLimit != nil || (descriptor.fetchOffset ?? 0) != 0
        writer.append(windowed ? "SELECT count(*) FROM (SELECT 1 FROM " : "SELECT count(*) FROM ")
        writer.append(self.table(T.self, schema))
        try self.writeWhere(descriptor, into: &writer)
        if windowed {
            writer.append(try self.orderBy(descriptor.sortBy))
            try self.writeWindow(descriptor, into: &writer)
            writer.append(") AS \"__skyros_window\"")
        } else {
            try self.validateWindow(descriptor, T.self)
        }
        return PGQuery(unsafeSQL: writer.sql, binds: writer.binds)
    }

    /// `DELETE FROM "schema"."table" [WHERE …] RETURNING "<primary key>"`; every row when `predicate` is `nil`.
    /// - Throws: ``QueryError`` for an untranslatable predicate.
    package static func delete<T: Entity>(where predicate: Predicate<T>?, schema: String?) throws -> PGQuery {
        let metadata = try EntityQueryMetadata.of(T.self)
        var writer = try SQLWriter(T.self, schema: schema)
        writer.append("DELETE FROM ")
        writer.append(self.table(T.self, schema))
        try self.writeWhere(predicate, into: &writer)
        writer.append(" RETURNING \(metadata.keyExpression)")
        return PGQuery(unsafeSQL: writer.sql, binds: writer.binds)
    }

    // MARK: - Parts

    static func table<T: Entity>(_ type: T.Type, _ schema: String?) -> String {
        if let schema { return quoteIdentifier(schema) + "." + quoteIdentifier(T.tableName) }
        return quoteIdentifier(T.tableName)
    }

    static func writeWhere<T: Entity>(_ predicate: Predicate<T>?, into writer: inout SQLWriter) throws {
        guard let predicate else { return }
        writer.append(" WHERE ")
        try writer.writeCondition(predicate)
    }

    /// `WHERE` for the descriptor's predicate and, for a keyset page, the rows after its cursor.
    private static func writeWhere<T: Entity>(_ descriptor: FetchDescriptor<T>, into writer: inout SQLWriter) throws {
        try self.writeWhere(descriptor.predicate, into: &writer)
        guard let cursor = descriptor.pageAfter else { return }
        writer.append(descriptor.predicate == nil ? " WHERE " : " AND ")
        try Keyset.writeCondition(after: cursor, sort: descriptor.sortBy, into: &writer)
    }

    static func writeWindow<T: Entity>(_ descriptor: FetchDescriptor<T>, into writer: inout SQLWriter) throws {
        try self.validateWindow(descriptor, T.self)
        if let limit = descriptor.fetchLimit {
            writer.append(" LIMIT ")
            try writer.bind(encodable: limit)
        }
        if let offset = descriptor.fetchOffset, offset > 0 {
            writer.append(" OFFSET ")
            try writer.bind(encodable: offset)
        }
    }

    /// - Throws: ``QueryError`` (`invalidDescriptor`) for a negative limit or offset.
    static func validateWindow<T: Entity>(_ descriptor: FetchDescriptor<T>, _ type: T.Type) throws {
        for (name, value) in [("fetchLimit", descriptor.fetchLimit), ("fetchOffset", descriptor.fetchOffset)] {
            if let value, value < 0 {
                throw QueryError(
                    code: .invalidDescriptor, entity: String(describing: T.self), construct: name,
                    message: "\(name) must not be negative (got \(value)) in a fetch of \(T.self)")
            }
        }
    }

    /// The effective sort: `sort` or `T.defaultSort`, then the primary key; each column once (a repeated
    /// column cannot change the order), as (column, ascending).
    static func sortColumns<T: Entity>(
        _ sort: [SortDescriptor<T>], _ metadata: EntityQueryMetadata
    ) throws -> [(EntityQueryMetadata.Column, Bool)] {
        var result: [(EntityQueryMetadata.Column, Bool)] = []
        var seen: Set<String> = []
        for descriptor in sort.isEmpty ? T.defaultSort : sort {
            let column = try self.sortColumn(descriptor, metadata)
            if seen.insert(column.name).inserted { result.append((column, descriptor.order == .forward)) }
        }
        for key in metadata.primaryKey where seen.insert(key.name).inserted { result.append((key, true)) }
        return result
    }

    private static func sortColumn<T: Entity>(
        _ descriptor: SortDescriptor<T>, _ metadata: EntityQueryMetadata
    ) throws -> EntityQueryMetadata.Column {
        guard let keyPath = descriptor.keyPath else {
            throw QueryError(
                code: .unsupportedSort, entity: metadata.entityName, construct: "SortDescriptor",
                message: "a SortDescriptor on \(metadata.entityName) without a key path cannot be translated to SQL")
        }
        guard let column = metadata.columnsByKeyPath[keyPath] else {
            throw QueryError(
                code: .unmappedKeyPath, entity: metadata.entityName, construct: "\(keyPath)",
                message: "cannot sort by \(keyPath): it is not a column of \(metadata.entityName)")
        }
        if let comparator = descriptor.stringComparator {
            var lexical = String.StandardComparator.lexical
            lexical.order = comparator.order
            if comparator != lexical {
                throw QueryError(
                    code: .unsupportedSort, entity: metadata.entityName, construct: "\(keyPath)",
                    message: "sorting \(keyPath) with a non-lexical string comparator is not supported; "
                        + "strings sort in code-point order (comparator: .lexical, the default on Linux)")
            }
        }
        return column
    }
}

extension SQLWriter {
    /// Writes `predicate` with its variable bound to the entity row. When the predicate reads a referenced
    /// row (a subquery on another table), it is written again with the row's columns qualified by its table,
    /// so that no column of the referenced table can shadow them.
    package mutating func writeCondition<T>(_ predicate: Predicate<T>) throws {
        let (sql, binds, aliases, types) = (self.sql, self.binds, self.aliasCount, self.referencedTypes.count)
        try self.with(predicate.variable.key, boundTo: .row, write: predicate.expression)
        guard self.referencedTypes.count > types, !self.qualifiesColumns else { return }
        (self.sql, self.binds, self.aliasCount) = (sql, binds, aliases)
        self.referencedTypes.removeSubrange(types...)
        self.qualifiesColumns = true
        defer { self.qualifiesColumns = false }
        try self.with(predicate.variable.key, boundTo: .row, write: predicate.expression)
    }
}
