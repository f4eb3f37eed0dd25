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
    /// The primary key column.
    package let primaryKey: Column
    /// `"a", "b", …` for every column, in declaration order.
    package let selectList: String

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
        guard let primaryKey else {
            throw QueryError(
                code: .missingPrimaryKey, entity: String(describing: T.self), construct: "\\\(T.self).id",
                message: "\(T.self).columns has no column for the primary key \\.id (of type \(T.ID.self))"
            )
        }
        self.columnsByKeyPath = byKeyPath
        self.columns = columns
        self.primaryKey = primaryKey
        self.selectList = columns.map(\.quoted).joined(separator: ", ")
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
