import Foundation
import SkyrosPostgres

/// Per-entity facts the query layer needs on every fetch, computed once per type and cached:
/// key path → column, the primary key column, and the quoted select list.
package struct EntityQueryMetadata: @unchecked Sendable {
    // @unchecked Sendable: holds only immutable key paths (immutable values the standard library does not mark
    // Sendable) and strings, and is never mutated after creation.

    /// One mapped column.
    package struct Column {
        /// The column name, unquoted.
        package let name: String
        /// The column name, quoted.
        package let quoted: String
        /// Whether the Swift property is an `Optional`.
        package let isOptional: Bool
        /// Whether the Swift property is a `String` or `String?` (compared as `text`).
        package let isString: Bool
    }

    /// The entity type's name, for messages.
    package let entityName: String
    /// The columns by key path.
    package let columnsByKeyPath: [AnyKeyPath: Column]
    /// All columns, in declaration order.
    package let columns: [Column]
    /// The primary key's columns, in key order (one unless the key is a ``CompositeKey``).
    package let primaryKey: [Column]
    /// `"a", "b", …` for every column, in declaration order.
    package let selectList: String
    /// The primary key as one SQL value: its column, or `ROW("a", "b")` for a composite key, whose text is the
    /// key's (``CompositeKey``).
    package var keyExpression: String {
        self.primaryKey.count == 1 ? self.primaryKey[0].quoted : "ROW(\(self.primaryKey.map(\.quoted).joined(separator: ", ")))"
    }

    private static let cache = Locked<[ObjectIdentifier: EntityQueryMetadata]>([:])

    /// The cached metadata for `T`, computed on first use.
    /// - Throws: ``QueryError`` with code `missingPrimaryKey` when `T.columns` has no column for `\.id`.
    package static func of<T: Entity>(_ type: T.Type) throws -> EntityQueryMetadata {
        let key = ObjectIdentifier(type)
        if let cached = cache.withLock({ $0[key] }) { return cached }
        let metadata = try EntityQueryMetadata(type)
        cache.withLock { $0[key] = metadata }
        return metadata
    }

    private init<T: Entity>(_ type: T.Type) throws {
        self.entityName = String(describing: T.self)
        var byKeyPath: [AnyKeyPath: Column] = [:]
        var columns: [Column] = []
        var primaryKey: Column?
        // `\T.id` written generically names the protocol requirement, which is a different key path from the
        // concrete stored property the entity lists; so match it exactly first, then by the `id` property.
        let genericID: AnyKeyPath = \T.id
        // Candidates by the property's name come before those by the column's name: an entity may map another
        // column of the key's type to a column named `id` (its key then being another column).
        var idCandidates: [Column] = []
        var idNamedColumns: [Column] = []
        for entityColumn in T.columns {
            let column = Column(
                name: entityColumn.name,
                quoted: quoteIdentifier(entityColumn.name),
                isOptional: isOptionalType(entityColumn.valueType),
                isString: entityColumn.valueType == String.self || entityColumn.valueType == String?.self
            )
            byKeyPath[entityColumn.keyPath] = column
            columns.append(column)
            if entityColumn.keyPath == genericID { primaryKey = column }
            if entityColumn.valueType == T.ID.self {
                if String(describing: entityColumn.keyPath).hasSuffix(".id") { idCandidates.append(column) }
                if entityColumn.name == "id" { idNamedColumns.append(column) }
            }
        }
        if primaryKey == nil, idCandidates.count == 1 { primaryKey = idCandidates[0] }
        if primaryKey == nil, idCandidates.isEmpty, idNamedColumns.count == 1 { primaryKey = idNamedColumns[0] }
        let keyColumns: [Column]
        if !T.primaryKey.keyPaths.isEmpty {
            keyColumns = try Self.compositeKey(T.primaryKey, of: T.self, byKeyPath)
        } else if T.ID.self is any CompositeKeyProtocol.Type {
            throw QueryError(
                code: .missingPrimaryKey, entity: String(describing: T.self), construct: "\\\(T.self).id",
                message: "\(T.self)'s id is a CompositeKey: name its columns with static let primaryKey = PrimaryKey<\(T.self)>(…)")
        } else if let primaryKey {
            keyColumns = [primaryKey]
        } else {
            throw QueryError(
                code: .missingPrimaryKey, entity: String(describing: T.self), construct: "\\\(T.self).id",
                message: "\(T.self).columns has no column for the primary key \\.id (of type \(T.ID.self))"
            )
        }
        self.columnsByKeyPath = byKeyPath
        self.columns = columns
        self.primaryKey = keyColumns
        self.selectList = columns.map(\.quoted).joined(separator: ", ")
    }
}

extension EntityQueryMetadata {
    /// The columns of a ``PrimaryKey``, checked against the entity's `ID`: a ``CompositeKey`` of as many
    /// values, of the key properties' types in the same order.
    private static func compositeKey<T: Entity>(
        _ key: PrimaryKey<T>, of type: T.Type, _ byKeyPath: [AnyKeyPath: Column]
    ) throws -> [Column] {
        func invalid(_ message: String) -> QueryError {
            QueryError(code: .missingPrimaryKey, entity: String(describing: T.self), construct: "\(T.self).primaryKey", message: message)
        }
        guard let id = T.ID.self as? any CompositeKeyProtocol.Type else {
            throw invalid("\(T.self).primaryKey names several columns, so its id must be a CompositeKey of their values, not \(T.ID.self)")
        }
        guard key.keyPaths.count >= 2 else {
            throw invalid("\(T.self).primaryKey names \(key.keyPaths.count) column; a key of one column is the one for \\.id")
        }
        let types = id.componentTypes
        guard types.count == key.keyPaths.count else {
            throw invalid("\(T.self).primaryKey names \(key.keyPaths.count) columns but its id, \(T.ID.self), has \(types.count) values")
        }
        var columns: [Column] = []
        for (index, keyPath) in key.keyPaths.enumerated() {
            guard let column = byKeyPath[keyPath], let declared = T.columns.first(where: { $0.keyPath == keyPath }) else {
                throw invalid("\(T.self).primaryKey names a property (\(keyPath)) that columns does not map")
            }
            guard declared.valueType == types[index] else {
                throw invalid(
                    "\(T.self).primaryKey's column \"\(column.name)\" is a \(declared.valueType), but value \(index + 1) of \(T.ID.self) is a \(types[index]): list the key in the id's order")
            }
            guard !column.isOptional else { throw invalid("the primary key column \"\(column.name)\" cannot be optional") }
            if columns.contains(where: { $0.name == column.name }) { throw invalid("\(T.self).primaryKey names \"\(column.name)\" twice") }
            columns.append(column)
        }
        return columns
    }
}

/// Marks `Optional` so generic code can ask whether a type is optional.
package protocol OptionalMarker {
    /// Whether this optional value is `nil`.
    var isNil: Bool { get }
}

extension Optional: OptionalMarker {
    package var isNil: Bool { self == nil }
}

/// Whether `type` is `Optional<Something>`.
package func isOptionalType(_ type: Any.Type) -> Bool { type is any OptionalMarker.Type }
