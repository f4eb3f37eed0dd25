import Foundation
import SkyrosPostgres

extension SQLQueryBuilder {
    /// The name of the owner column ``selectThrough(_:schema:)`` adds.
    package static let ownerAlias = "__skyros_owner"

    /// A many-to-many's prefetch in one query: every column of the target, its version, and the join row's
    /// reference to the owner, for the join rows referring to one of the owners (bound as one array), in the
    /// target's default order then by its primary key:
    ///
    /// ```sql
    /// SELECT "s"."tags"."id", "s"."tags"."label", "s"."tags".xmin AS "__version",
    ///        "s"."book_tags"."book_id" AS "__skyros_owner"
    /// FROM "s"."tags" JOIN "s"."book_tags" ON "s"."book_tags"."tag_id" = "s"."tags"."id"
    /// WHERE "s"."book_tags"."book_id" = ANY($1) ORDER BY "s"."tags"."id" ASC
    /// ```
    ///
    /// Every column is qualified by its schema and table, never by an alias, so no column of either table can
    /// shadow another's; the output aliases are not referred to.
    /// - Throws: ``RelationshipError`` when a reference is not a column or the target's key has several
    ///   columns; ``QueryError`` when the target's default sort cannot be translated or the ids cannot be bound.
    package static func selectThrough<Owner: Entity, Join: Entity, Target: Entity>(
        _ request: ManyToManyFetch<Owner, Join, Target>, schema: String?
    ) throws -> PGQuery where Owner.ID: Codable, Target.ID: Codable {
        let metadata = try EntityQueryMetadata.of(Target.self)
        let (ownerColumn, targetColumn) = try request.joinColumns()
        let targetTable = self.table(Target.self, schema)
        let joinTable = self.table(Join.self, schema)
        let key = quoteIdentifier(try RelationshipQuery.primaryKeyColumn(Target.self))
        let owner = "\(joinTable).\(quoteIdentifier(ownerColumn))"
        guard let (ids, _) = try capturedElements(request.owners) else {
            throw QueryError(
                code: .unsupportedPredicate, entity: String(describing: Owner.self), construct: "\(Owner.ID.self)",
                message: "ids of type \(Owner.ID.self) cannot be bound as one array parameter")
        }
        var sql = "SELECT "
        sql += metadata.columns.map { "\(targetTable).\($0.quoted)" }.joined(separator: ", ")
        sql += ", \(targetTable).\(self.versionSelection(Target.versionColumn)) AS \(quoteIdentifier(self.versionAlias))"
        sql += ", \(owner) AS \(quoteIdentifier(self.ownerAlias))"
        sql += " FROM \(targetTable) JOIN \(joinTable) ON \(joinTable).\(quoteIdentifier(targetColumn)) = \(targetTable).\(key)"
        sql += " WHERE \(owner) = ANY($1) ORDER BY "
        sql += try self.sortColumns([SortDescriptor<Target>](), metadata).map { column, forward in
            var term = "\(targetTable).\(column.quoted)"
            if column.isString { term += "::text" }
            term += forward ? " ASC" : " DESC"
            if column.isOptional { term += forward ? " NULLS FIRST" : " NULLS LAST" }
            return term
        }.joined(separator: ", ")
        return PGQuery(unsafeSQL: sql, binds: [ids])
    }
}
