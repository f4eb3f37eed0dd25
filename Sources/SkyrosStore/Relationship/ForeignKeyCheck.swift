import Foundation
import SkyrosPostgres

/// A foreign key as the catalog describes it (`pg_constraint`).
package struct LiveForeignKey: Sendable, Hashable {
    package var name: String
    /// The referring columns, in key order.
    package var columns: [String]
    package var referencedSchema: String
    package var referencedTable: String
    /// The referenced columns, in key order.
    package var referencedColumns: [String]
    /// `nil` for `SET DEFAULT`.
    package var deleteRule: DeleteRule?
}

/// Checks an entity's to-one relationships against the live schema's foreign keys (`pg_constraint`): each needs
/// a foreign key on its column to the target's table and primary key, with the declared delete rule.
package enum ForeignKeyCheck {
    /// The issues of `T`'s to-one relationships (empty when each has its foreign key).
    package static func issues<T: Entity>(_ type: T.Type, on connection: PGConnection, schema: String?) async throws -> [SchemaIssue] {
        let relationships = RelationshipCatalog.relationships(of: T.self).filter { $0.kind == .toOne }
        guard !relationships.isEmpty else { return [] }
        let live = try await self.liveForeignKeys(T.tableName, on: connection, schema: schema)
        let expectedSchema = try await self.schemaName(schema, on: connection)
        var issues: [SchemaIssue] = []
        for relationship in relationships {
            let declared: ForeignKey
            do {
                declared = try relationship.foreignKey()
            } catch let error as RelationshipError {
                issues.append(SchemaIssue(entity: String(describing: T.self), column: nil, message: error.message))
                continue
            }
            let optional = T.columns.first(where: { $0.name == declared.column }).map { referenceType($0.valueType)?.optional ?? false } ?? false
            issues += self.issues(declared, entity: String(describing: T.self), optional: optional, live: live, schema: expectedSchema)
        }
        return issues
    }

    /// The issues of one declared foreign key against the table's live foreign keys (pure: unit-tested).
    package static func issues(
        _ declared: ForeignKey, entity: String, optional: Bool, live: [LiveForeignKey], schema: String
    ) -> [SchemaIssue] {
        func issue(_ message: String) -> SchemaIssue {
            var issue = SchemaIssue(entity: entity, column: declared.column, message: message)
            issue.foreignKey = declared
            return issue
        }
        var issues: [SchemaIssue] = []
        if declared.deleteRule == .setNull, !optional {
            issues.append(issue(
                "the relationship \(declared) is declared ON DELETE SET NULL but its reference is not optional (make it Reference<…>?)"))
        }
        let onColumn = live.filter { $0.columns == [declared.column] }
        let matching = onColumn.filter {
            $0.referencedSchema == schema && $0.referencedTable == declared.referencedTable
                && $0.referencedColumns == [declared.referencedColumn]
        }
        guard let found = matching.first else {
            if let other = onColumn.first {
                issues.append(issue(
                    "the relationship \(declared) does not match the database: its foreign key \"\(other.name)\" on \(declared.table).\(declared.column) references \(other.referencedSchema == schema ? "" : "\(other.referencedSchema).")\(other.referencedTable).\(other.referencedColumns.joined(separator: ", "))"))
            } else {
                issues.append(issue(
                    "the relationship \(declared) has no foreign key in the database (add FOREIGN KEY (\(quoteIdentifier(declared.column))) REFERENCES \(quoteIdentifier(declared.referencedTable)) (\(quoteIdentifier(declared.referencedColumn))) ON DELETE \(declared.deleteRule))"))
            }
            return issues
        }
        if found.deleteRule != declared.deleteRule {
            let live = found.deleteRule.map { "ON DELETE \($0)" } ?? "ON DELETE SET DEFAULT (not supported)"
            issues.append(issue(
                "the relationship \(declared) is declared ON DELETE \(declared.deleteRule) but the database's foreign key \"\(found.name)\" is \(live)"))
        }
        return issues
    }

    /// The foreign keys of a table, as the catalog describes them.
    package static func liveForeignKeys(_ table: String, on connection: PGConnection, schema: String?) async throws -> [LiveForeignKey] {
        let schemaName = try PGValue(schema)
        let rows = try await connection.query(
            """
            SELECT con.conname::text,
                   (SELECT array_agg(a.attname::text ORDER BY k.ordinality) FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, ordinality)
                    JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum),
                   rn.nspname::text, rc.relname::text,
                   (SELECT array_agg(a.attname::text ORDER BY k.ordinality) FROM unnest(con.confkey) WITH ORDINALITY AS k(attnum, ordinality)
                    JOIN pg_catalog.pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum),
                   con.confdeltype::text
            FROM pg_catalog.pg_constraint con
            JOIN pg_catalog.pg_class c ON c.oid = con.conrelid
            JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            JOIN pg_catalog.pg_class rc ON rc.oid = con.confrelid
            JOIN pg_catalog.pg_namespace rn ON rn.oid = rc.relnamespace
            WHERE con.contype = 'f' AND c.relname = \(table) AND n.nspname = coalesce(\(schemaName)::text, current_schema())
            ORDER BY con.conname
            """)
        return try rows.map { row in
            LiveForeignKey(
                name: try row.decode(String.self, at: 0), columns: try row.decode([String].self, at: 1),
                referencedSchema: try row.decode(String.self, at: 2), referencedTable: try row.decode(String.self, at: 3),
                referencedColumns: try row.decode([String].self, at: 4),
                deleteRule: DeleteRule(catalogCode: try row.decode(String.self, at: 5)))
        }
    }

    private static func schemaName(_ schema: String?, on connection: PGConnection) async throws -> String {
        if let schema { return schema }
        let rows = try await connection.query("SELECT current_schema()::text")
        return try rows[0].decode(String.self, at: 0)
    }
}
