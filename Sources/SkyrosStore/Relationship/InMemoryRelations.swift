import Foundation
import SkyrosPostgres

/// A foreign key as the in-memory store enforces it.
struct InMemoryForeignKey: Sendable, Hashable {
    let key: ForeignKey
    /// The referring entity's name (for the row changes a delete rule reports).
    let entity: String
}

/// The foreign keys the in-memory store enforces, as PostgreSQL does: a written reference must name an
/// existing row, and deleting a referenced row applies the key's ``DeleteRule``.
///
/// They are the to-one relationships of the entity types written to the store so far: a row can only refer to
/// another once an entity type with that reference wrote it.
struct InMemoryRelations: Sendable {
    /// The foreign keys referring to a table, by referenced table.
    var referring: [String: [InMemoryForeignKey]] = [:]
    /// The foreign keys of a table, by referring table.
    var outgoing: [String: [InMemoryForeignKey]] = [:]
    var registered: Set<ObjectIdentifier> = []
    /// The rows the delete rules changed during the change set being applied.
    var cascaded: [RowChange] = []
    /// Sets a column of a row to `NULL`, by referring table and column (built with the entity's plan).
    var nullifiers: [String: [String: @Sendable (inout InMemoryRow) -> Void]] = [:]
}

extension InMemoryDatabase {
    /// Records the foreign keys of `T`'s to-one relationships (once per type).
    mutating func register<T: Entity>(_ type: T.Type) throws {
        let id = ObjectIdentifier(type)
        guard !self.relations.registered.contains(id) else { return }
        let plan = try EntityPlan<T>.shared
        for foreignKey in try RelationshipCatalog.foreignKeys(of: T.self) {
            let key = InMemoryForeignKey(key: foreignKey, entity: plan.entityName)
            if !(self.relations.outgoing[foreignKey.table]?.contains(key) ?? false) {
                self.relations.outgoing[foreignKey.table, default: []].append(key)
                self.relations.referring[foreignKey.referencedTable, default: []].append(key)
            }
            if let index = plan.columnIndex[foreignKey.column] {
                let nulls = [PGValue](repeating: .null, count: plan.columnNames.count)
                self.relations.nullifiers[foreignKey.table, default: [:]][foreignKey.column] = { row in
                    row.set(nulls, at: [index], plan: plan)
                }
            }
        }
        self.relations.registered.insert(id)
    }

    /// Throws PostgreSQL's `foreign_key_violation` when a reference among `values` (at `indices`, or every
    /// column) names no row of its table.
    func checkReferences<T>(_ plan: EntityPlan<T>, _ values: [PGValue], at indices: [Int]? = nil) throws {
        guard let keys = self.relations.outgoing[plan.tableName] else { return }
        for foreignKey in keys {
            guard let index = plan.columnIndex[foreignKey.key.column], indices?.contains(index) ?? true,
                let text = values[index].text
            else { continue }
            let table = self.tables[foreignKey.key.referencedTable]
            if table?.rows[values[index]] != nil { continue }
            if table?.rows.keys.contains(where: { $0.text == text }) ?? false { continue }
            let constraint = foreignKey.key.defaultConstraintName
            throw PGError(
                kind: .foreignKeyViolation, sqlState: .foreignKeyViolation, severity: "ERROR",
                message: "insert or update on table \"\(plan.tableName)\" violates foreign key constraint \"\(constraint)\"",
                detail: "Key (\(foreignKey.key.column))=(\(text)) is not present in table \"\(foreignKey.key.referencedTable)\".",
                table: plan.tableName, constraint: constraint)
        }
    }

    /// Deletes the row `key` of `table` and applies the delete rule of every foreign key referring to it
    /// (cascading further); returns whether the row existed.
    /// - Throws: `PGError` `.foreignKeyViolation` for a ``DeleteRule/restrict`` or ``DeleteRule/noAction``
    ///   key still referring to it (the change set is then undone).
    @discardableResult
    mutating func deleteRow(_ table: String, _ key: PGValue) throws -> Bool {
        guard self.row(table, key) != nil else { return false }
        self.setRow(table, key, nil)
        guard let referring = self.relations.referring[table], let text = key.text else { return true }
        for foreignKey in referring {
            let referringTable = foreignKey.key.table
            guard let rows = self.tables[referringTable]?.rows else { continue }
            let matches = rows.filter { $0.value.value(named: foreignKey.key.column)?.text == text }
                .sorted { $0.value.sequence < $1.value.sequence }
            guard !matches.isEmpty else { continue }
            switch foreignKey.key.deleteRule {
            case .cascade:
                for (rowKey, _) in matches where try self.deleteRow(referringTable, rowKey) {
                    self.relations.cascaded.append(
                        RowChange(entity: foreignKey.entity, table: referringTable, id: rowKey, kind: .deleted, version: nil))
                }
            case .setNull:
                guard let nullify = self.relations.nullifiers[referringTable]?[foreignKey.key.column] else { continue }
                for (rowKey, var row) in matches {
                    nullify(&row)
                    row.version += 1
                    self.setRow(referringTable, rowKey, row)
                    self.relations.cascaded.append(
                        RowChange(entity: foreignKey.entity, table: referringTable, id: rowKey, kind: .updated, version: row.version))
                }
            case .restrict, .noAction:
                let constraint = foreignKey.key.defaultConstraintName
                throw PGError(
                    kind: .foreignKeyViolation, sqlState: .foreignKeyViolation, severity: "ERROR",
                    message: "update or delete on table \"\(table)\" violates foreign key constraint \"\(constraint)\" on table \"\(referringTable)\"",
                    detail: "Key (\(foreignKey.key.referencedColumn))=(\(text)) is still referenced from table \"\(referringTable)\".",
                    table: referringTable, constraint: constraint)
            }
        }
        return true
    }
}
