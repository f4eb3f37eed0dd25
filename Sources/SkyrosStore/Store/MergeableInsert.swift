import SkyrosPostgres

/// The rows of one plain insert, in a form that merges with neighbouring inserts into the same table: a group
/// commit sends consecutive ones, across change sets, as one multi-row `INSERT`.
package struct MergeableInsert: Sendable {
    /// The entity's plan: inserts with the same plan and schema merge.
    let target: any InsertTarget
    let schema: String?
    /// `, 1` when the entity has a version column (every new row starts at version 1), else empty.
    let rowSuffix: String
    let entity: String
    let table: String
    /// Encoded columns per row, in declared order.
    let rows: [[PGValue]]
    let ids: [PGValue]
    /// Every inserted row's version when known before the statement runs (entities with a version column).
    let fixedVersion: Int64?

    var columnCount: Int { self.rows.first?.count ?? 0 }

    /// Whether `other` inserts into the same table (and so can share a statement with these rows).
    func sharesTable(with other: MergeableInsert) -> Bool {
        self.target === other.target && self.schema == other.schema
    }

    /// `INSERT INTO "schema"."table" ("a", "b"[, "version"]) VALUES ` (trusted SQL text), made once per merged
    /// statement rather than per row.
    var statementPrefix: String { self.target.insertPrefix(schema: self.schema) }

    /// The changes these rows make, with `version` for each.
    func changes(version: Int64?) -> [RowChange] {
        self.ids.map { RowChange(entity: self.entity, table: self.table, id: $0, kind: .inserted, version: version) }
    }
}

extension MergeableInsert {
    /// The rows of `values` for entity `T`'s table in `schema`; `encoded`: their values, when encoded already.
    package init<T: Entity>(plan: EntityPlan<T>, values: [T], encoded: [[PGValue]]? = nil, schema: String?) throws {
        let encoder = RowEncoder(plan: plan)
        let rows = try encoded ?? values.map { try encoder.encode($0) }
        self.init(
            target: plan, schema: schema, rowSuffix: plan.versionColumn == nil ? "" : ", 1",
            entity: plan.entityName, table: plan.tableName, rows: rows, ids: rows.map(plan.key(of:)),
            fixedVersion: plan.versionColumn == nil ? nil : 1)
    }
}

/// What a ``MergeableInsert`` inserts into: an entity's plan.
protocol InsertTarget: AnyObject, Sendable {
    func insertPrefix(schema: String?) -> String
}

extension EntityPlan: InsertTarget {
    /// `INSERT INTO t (<written columns>[, version]) [OVERRIDING SYSTEM VALUE] VALUES ` (the ids of an
    /// ``DatabaseGenerated/identity`` key are allocated by Skyros, also for `GENERATED ALWAYS`).
    func insertPrefix(schema: String?) -> String {
        var columns = self.quotedInsertedColumns
        if let version = self.versionColumn { columns += ", \(quoteIdentifier(version))" }
        let overriding = self.identityIndex == nil ? "" : " OVERRIDING SYSTEM VALUE"
        return "INSERT INTO \(self.quotedTable(schema: schema)) (\(columns))\(overriding) VALUES "
    }
}
