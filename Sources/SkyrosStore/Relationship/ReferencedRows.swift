import SkyrosPostgres

/// A value that names one row of another table: a ``Reference`` (an optional one names a row when it is not
/// `nil`, which a cast of the optional through `Any` unwraps).
package protocol ReferencedRow {
    /// The key of the row referred to; `nil` when its id cannot be bound.
    var referencedRowKey: RowKey? { get }
}

extension Reference: ReferencedRow {
    package var referencedRowKey: RowKey? { try? RowKey(Target.self, id: self.id) }
}

extension RelationshipCatalog {
    private static let referencedTablesCache = Locked<[ObjectIdentifier: [String]]>([:])

    /// The tables `T`'s to-one relationships refer to (each once); none when a relationship does not resolve
    /// (start reports that).
    package static func referencedTables<T: Entity>(of type: T.Type) -> [String] {
        let key = ObjectIdentifier(type)
        if let cached = self.referencedTablesCache.withLock({ $0[key] }) { return cached }
        var tables: [String] = []
        for relationship in self.relationships(of: type) where relationship.kind == .toOne {
            guard let table = try? relationship.foreignKey().referencedTable, !tables.contains(table) else { continue }
            tables.append(table)
        }
        self.referencedTablesCache.withLock { $0[key] = tables }
        return tables
    }

    /// The keys of the rows `value` refers to through its to-one relationships (its non-nil references).
    package static func referencedKeys<T: Entity>(of value: T) -> [RowKey] {
        self.relationships(of: T.self).compactMap { relationship in
            guard relationship.kind == .toOne else { return nil }
            return (value[keyPath: relationship.keyPath] as? any ReferencedRow)?.referencedRowKey
        }
    }
}
