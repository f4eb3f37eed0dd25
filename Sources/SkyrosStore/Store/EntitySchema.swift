import Foundation
import SkyrosPostgres

/// One way an entity does not fit its table.
public struct SchemaIssue: Sendable, Hashable, CustomStringConvertible {
    /// The entity type's name.
    public var entity: String
    /// The column concerned; `nil` for table-level issues (missing table, no unique key).
    public var column: String?
    /// The Swift property type, when the issue is about a type (e.g. `Optional<Int>`).
    public var swiftType: String?
    /// The PostgreSQL column type, when known (e.g. `text`, `int8[]`).
    public var postgresType: String?
    /// The explanation.
    public var message: String
    /// The relationship's foreign key (both sides), when the issue is about one (see ``Relationship``).
    public var foreignKey: ForeignKey? = nil

    /// The entity, the column when there is one, and the explanation.
    public var description: String {
        if let column { return "entity \(self.entity), column \"\(column)\": \(self.message)" }
        return "entity \(self.entity): \(self.message)"
    }
}

/// Entities do not match the live database schema. Thrown by ``EntitySchema/validate(_:on:schema:)``; lists
/// every issue found, one per line.
///
/// ```
/// entity User, column "age": Swift type Optional<Int> is incompatible with PostgreSQL type text
/// ```
public struct SchemaMismatchError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Every issue, in entity and column order.
    public var issues: [SchemaIssue]

    /// Every issue, one per line.
    public var description: String { self.issues.map(\.description).joined(separator: "\n") }
}

/// Checks entities against the live schema (`pg_attribute`), so a mismatch fails at start, not at the first
/// unlucky row.
///
/// It is an error when:
/// - the table does not exist, or a declared column is missing;
/// - a column's type cannot hold the property's Swift type (`Int` needs `int2/int4/int8`, `String` needs
///   `text/varchar/bpchar/citext`, an enum column needs a `String` raw-value enum type, nested Codable values
///   need `json/jsonb`, …);
/// - a **non-optional property maps to a nullable column**: a NULL would fail decoding later, for some rows
///   only, so Skyros refuses it at start (make the property optional or add `NOT NULL`);
/// - a `NOT NULL` column without a default is not mapped (every insert would fail);
/// - the primary key column has no unique index, or only a deferrable one (upsert and findOrCreate need
///   `ON CONFLICT (id)`, which accepts no deferrable constraint);
/// - a `GENERATED ALWAYS AS IDENTITY` column is not declared ``DatabaseGenerated/identity``, a
///   `GENERATED ALWAYS AS (…) STORED` column is not declared ``DatabaseGenerated/computed`` (PostgreSQL refuses a
///   value for either), or a column declared ``DatabaseGenerated/identity`` has no sequence;
/// - the version column is missing or not an integer.
///
/// An optional property on a `NOT NULL` column is fine. That each Codable key has a column (and each column a
/// key) is checked the first time a value is encoded or decoded (``EntityMappingError``).
///
/// ```swift
/// try await pool.withConnection { connection in
///     try await EntitySchema.validate([User.self, Post.self], on: connection, schema: "app")
/// }
/// ```
public enum EntitySchema {
    /// Validates entity types against the database; throws one error listing every issue.
    /// - Parameters:
    ///   - types: the entity types.
    ///   - connection: a connection to the database.
    ///   - schema: the schema holding the tables; `nil` for `current_schema()`.
    /// - Throws: ``SchemaMismatchError``, ``EntityMappingError``, or `PGError`.
    public static func validate(_ types: [any Entity.Type], on connection: PGConnection, schema: String?) async throws {
        var issues: [SchemaIssue] = []
        for type in types {
            issues += try await self.issues(type, on: connection, schema: schema)
        }
        issues += ForeignKeyCheck.joinEntityIssues(types)
        if !issues.isEmpty { throw SchemaMismatchError(issues: issues) }
    }

    /// The issues of one entity type (empty when it fits).
    public static func issues<T: Entity>(_ type: T.Type, on connection: PGConnection, schema: String?) async throws -> [SchemaIssue] {
        try await self.inspect(type, on: connection, schema: schema).issues
    }

    /// Validates entity types and returns their tables' column definitions (for ``ColumnDoor``), by table.
    /// - Throws: ``SchemaMismatchError``, ``EntityMappingError``, or `PGError`.
    package static func validateAndDescribe(
        _ types: [any Entity.Type], on connection: PGConnection, schema: String?
    ) async throws -> [String: [String: ColumnDefinition]] {
        var issues: [SchemaIssue] = []
        var tables: [String: [String: ColumnDefinition]] = [:]
        for type in types {
            let (found, columns) = try await self.inspect(type, on: connection, schema: schema)
            issues += found
            tables[type.tableName] = columns
        }
        issues += ForeignKeyCheck.joinEntityIssues(types)
        if !issues.isEmpty { throw SchemaMismatchError(issues: issues) }
        return tables
    }

    /// The issues of one entity type, and its table's column definitions as the catalog describes them.
    static func inspect<T: Entity>(
        _ type: T.Type, on connection: PGConnection, schema: String?
    ) async throws -> (issues: [SchemaIssue], columns: [String: ColumnDefinition]) {
        let plan = try EntityPlan<T>.shared
        let entity = plan.entityName
        let tableName = plan.table(schema: schema).joined(separator: ".")
        guard let table = try await self.liveTable(T.tableName, on: connection, schema: schema) else {
            return ([SchemaIssue(entity: entity, message: "table \(tableName) does not exist")], [:])
        }
        let rows = table.columns
        let setBeforeInsert = table.setBeforeInsert
        var live: [String: LiveColumn] = [:]
        for column in rows { live[column.name] = column }

        var issues: [SchemaIssue] = []
        for (index, declared) in T.columns.enumerated() {
            let swiftName = String(describing: declared.valueType)
            guard let column = live[declared.name] else {
                issues.append(SchemaIssue(
                    entity: entity, column: declared.name, swiftType: swiftName,
                    message: "the column does not exist in table \(tableName)"))
                continue
            }
            let generation = declared.generated?.kind
            var declaredIdentity = false
            if case .identity? = generation { declaredIdentity = true }
            if column.isGenerated, generation != .computed {
                issues.append(SchemaIssue(
                    entity: entity, column: declared.name, swiftType: swiftName, postgresType: column.displayType,
                    message: "the column is GENERATED ALWAYS AS (…) STORED: PostgreSQL refuses a value for it (declare it EntityColumn(…, generated: .computed), read-only)"))
            } else if column.identity == "a", !declaredIdentity {
                issues.append(SchemaIssue(
                    entity: entity, column: declared.name, swiftType: swiftName, postgresType: column.displayType,
                    message: "the column is GENERATED ALWAYS AS IDENTITY: PostgreSQL refuses a value for it (declare it EntityColumn(…, generated: .identity))"))
            }
            if let generated = declared.generated, generated == .onInsert || generated == .onInsertAndUpdate,
                !column.hasDefault, !setBeforeInsert
            {
                issues.append(SchemaIssue(
                    entity: entity, column: declared.name, swiftType: swiftName, postgresType: column.displayType,
                    message: "the column is declared .\(generated) but nothing in the database sets it: it has no DEFAULT and the table no enabled BEFORE INSERT row trigger, so every insert would store NULL\(column.notNull ? " and fail" : "") (add a DEFAULT, or declare it without generated:)"))
            }
            if declaredIdentity, !column.hasSequence {
                issues.append(SchemaIssue(
                    entity: entity, column: declared.name, swiftType: swiftName, postgresType: column.displayType,
                    message: "the column is declared .identity but has no sequence (make it GENERATED … AS IDENTITY or serial/bigserial)"))
            }
            let (wrapped, optional) = unwrapOptional(declared.valueType)
            if !ColumnTypeRule.accepts(wrapped, column) {
                issues.append(SchemaIssue(
                    entity: entity, column: declared.name, swiftType: swiftName, postgresType: column.displayType,
                    message: "Swift type \(swiftName) is incompatible with PostgreSQL type \(column.displayType)"))
            }
            if !optional, !column.notNull {
                issues.append(SchemaIssue(
                    entity: entity, column: declared.name, swiftType: swiftName, postgresType: column.displayType,
                    message: "Swift type \(swiftName) is not optional but the column allows NULL (add NOT NULL or make the property optional)"))
            }
            if index == plan.idIndex, !plan.hasCompositeKey, !column.unique {
                issues.append(SchemaIssue(
                    entity: entity, column: declared.name,
                    message: "the primary key column has no primary key or unique index that is not deferrable (upsert and findOrCreate need one: ON CONFLICT does not accept a deferrable one)"))
            }
        }
        if plan.hasCompositeKey {
            let declared = plan.keyIndices.map { plan.columnNames[$0] }
            let shown = { (names: [String]) in "(" + names.joined(separator: ", ") + ")" }
            if table.primaryKey != declared {
                let message =
                    Set(table.primaryKey) == Set(declared)
                    ? "the primary key is declared \(shown(declared)); declare it in the table's column order, \(shown(table.primaryKey)), the order in which change capture names a row's key"
                    : "the primary key is declared \(shown(declared)), but the table's primary key is \(table.primaryKey.isEmpty ? "missing" : shown(table.primaryKey))"
                issues.append(SchemaIssue(entity: entity, message: message))
            }
        }
        if let version = plan.versionColumn {
            if let column = live[version] {
                if !["int2", "int4", "int8"].contains(column.typeName) {
                    issues.append(SchemaIssue(
                        entity: entity, column: version, swiftType: "Int64", postgresType: column.displayType,
                        message: "the version column must be an integer column, not \(column.displayType)"))
                }
            } else {
                issues.append(SchemaIssue(
                    entity: entity, column: version, message: "the version column does not exist in table \(tableName)"))
            }
        }
        for row in rows {
            let name = row.name
            guard let column = live[name], plan.columnIndex[name] == nil, name != plan.versionColumn else { continue }
            if column.notNull, !column.hasDefault {
                issues.append(SchemaIssue(
                    entity: entity, column: name, postgresType: column.displayType,
                    message: "the column is NOT NULL without a default and no property maps to it, so every insert would fail"))
            }
        }
        issues += try await ForeignKeyCheck.issues(T.self, on: connection, schema: schema)
        return (issues, live.mapValues(\.definition))
    }

    /// A table's columns as the catalog describes them (`nil` when the table does not exist): what
    /// `validate(_:on:schema:)` checks entities against, and what a drafted migration is compared with.
    package static func liveTable(_ table: String, on connection: PGConnection, schema: String?) async throws -> LiveTable? {
        let schemaName = try PGValue(schema)
        let rows = try await connection.query(
            """
            SELECT a.attname::text, coalesce(bt.typname, t.typname)::text, coalesce(bt.typtype, t.typtype)::text,
                   et.typname::text, a.attnotnull,
                   (a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '' OR (t.typtype = 'd' AND t.typdefault IS NOT NULL)),
                   EXISTS (SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND i.indisunique
                           AND i.indimmediate AND i.indnkeyatts = 1 AND i.indkey[0] = a.attnum AND i.indpred IS NULL),
                   (CASE WHEN a.atttypmod <> -1 THEN a.atttypmod ELSE t.typtypmod END)::int4,
                   (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder) FROM pg_catalog.pg_enum e
                    WHERE e.enumtypid = coalesce(bt.oid, t.oid)),
                   (a.attnotnull OR (t.typtype = 'd' AND t.typnotnull)),
                   a.attidentity::text, (a.attgenerated <> ''),
                   (pg_catalog.pg_get_serial_sequence(pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname),
                                                      a.attname) IS NOT NULL),
                   -- A row trigger that fires BEFORE INSERT in an ordinary session (tgtype bits: ROW 1, BEFORE 2,
                   -- INSERT 4; tgenabled O: origin and local, A: always).
                   EXISTS (SELECT 1 FROM pg_catalog.pg_trigger tg WHERE tg.tgrelid = c.oid AND NOT tg.tgisinternal
                           AND tg.tgenabled IN ('O', 'A') AND (tg.tgtype & 7) = 7)
            FROM pg_catalog.pg_class c
            JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
            JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
            LEFT JOIN pg_catalog.pg_type bt ON t.typtype = 'd' AND bt.oid = t.typbasetype
            LEFT JOIN pg_catalog.pg_type et ON et.oid = coalesce(bt.typelem, t.typelem)
                 AND coalesce(bt.typcategory, t.typcategory) = 'A'
            WHERE c.relname = \(table) AND n.nspname = coalesce(\(schemaName)::text, current_schema())
              AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
            ORDER BY a.attnum
            """)
        guard !rows.isEmpty else { return nil }
        var columns: [LiveColumn] = []
        for row in rows {
            columns.append(LiveColumn(
                name: try row.decode(String.self, at: 0), typeName: try row.decode(String.self, at: 1),
                typeKind: try row.decode(String.self, at: 2), elementType: try row.decode(String?.self, at: 3),
                notNull: try row.decode(Bool.self, at: 4), hasDefault: try row.decode(Bool.self, at: 5),
                unique: try row.decode(Bool.self, at: 6),
                typeModifier: try row.decode(Int.self, at: 7), enumLabels: try row.decode([String]?.self, at: 8),
                refusesNull: try row.decode(Bool.self, at: 9), identity: try row.decode(String.self, at: 10),
                isGenerated: try row.decode(Bool.self, at: 11), hasSequence: try row.decode(Bool.self, at: 12)))
        }
        let key = try await connection.query(
            """
            SELECT a.attname::text FROM pg_catalog.pg_index i
            JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
            WHERE i.indisprimary AND i.indrelid = (
                SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                WHERE c.relname = \(table) AND n.nspname = coalesce(\(schemaName)::text, current_schema()))
            ORDER BY a.attnum
            """)
        return LiveTable(
            columns: columns, setBeforeInsert: try rows[0].decode(Bool.self, at: 13),
            primaryKey: try key.map { try $0.decode(String.self, at: 0) })
    }
}

/// A table as the catalog describes it.
package struct LiveTable: Sendable, Hashable {
    /// The columns, in `attnum` order.
    package var columns: [LiveColumn]
    /// The table has an enabled `BEFORE INSERT` row trigger (it may set columns no `DEFAULT` sets).
    package var setBeforeInsert: Bool
    /// The primary key's columns in `attnum` order (the order change capture names a changed row's key in);
    /// empty without one.
    package var primaryKey: [String]

    package init(columns: [LiveColumn], setBeforeInsert: Bool = false, primaryKey: [String] = []) {
        self.columns = columns
        self.setBeforeInsert = setBeforeInsert
        self.primaryKey = primaryKey
    }
}

/// A column as the catalog describes it.
package struct LiveColumn: Sendable, Hashable {
    package var name: String
    /// `pg_type.typname` (of the base type for domains): `int8`, `text`, `_text` for arrays.
    package var typeName: String
    /// `pg_type.typtype`: `b` base, `e` enum, `c` composite, …
    package var typeKind: String
    /// The element type name for arrays.
    package var elementType: String?
    package var notNull: Bool
    package var hasDefault: Bool
    /// Alone covered by a unique index (or the primary key).
    package var unique: Bool

    /// `atttypmod` (the domain's `typtypmod` for a domain column): a length, or a numeric's precision and scale;
    /// -1 for none.
    package var typeModifier: Int = -1
    /// The labels of an enum type, in order.
    package var enumLabels: [String]? = nil
    /// `NOT NULL` on the column or on its domain.
    package var refusesNull: Bool = false
    /// `pg_attribute.attidentity`: `a` (`GENERATED ALWAYS AS IDENTITY`), `d` (`BY DEFAULT`), or empty.
    package var identity: String = ""
    /// A generated column (`GENERATED ALWAYS AS (…) STORED`).
    package var isGenerated: Bool = false
    /// The column owns a sequence (an identity or a `serial` column): ids can be allocated from it.
    package var hasSequence: Bool = false

    /// A column as the catalog describes it; what is not given is as for a plain column.
    package init(
        name: String, typeName: String, typeKind: String = "b", elementType: String? = nil, notNull: Bool,
        hasDefault: Bool = false, unique: Bool = false, typeModifier: Int = -1, enumLabels: [String]? = nil,
        refusesNull: Bool? = nil, identity: String = "", isGenerated: Bool = false, hasSequence: Bool = false
    ) {
        self.name = name
        self.typeName = typeName
        self.typeKind = typeKind
        self.elementType = elementType
        self.notNull = notNull
        self.hasDefault = hasDefault
        self.unique = unique
        self.typeModifier = typeModifier
        self.enumLabels = enumLabels
        self.refusesNull = refusesNull ?? notNull
        self.identity = identity
        self.isGenerated = isGenerated
        self.hasSequence = hasSequence
    }

    package var displayType: String { self.elementType.map { "\($0)[]" } ?? self.typeName }

    /// The column as the door checks it (array columns are not checked element by element).
    var definition: ColumnDefinition {
        ColumnDefinition(self.columnType, nullable: !self.refusesNull, hasDefault: self.hasDefault)
    }

    var columnType: ColumnType {
        if self.elementType != nil { return .named(self.displayType) }
        if self.typeKind == "e", let labels = self.enumLabels { return .enumeration(self.typeName, labels: labels) }
        switch self.typeName {
        case "int2": return .smallint
        case "int4": return .integer
        case "int8": return .bigint
        case "text": return .text
        case "varchar": return self.typeModifier >= 4 ? .varchar(self.typeModifier - 4) : .text
        case "bpchar": return self.typeModifier >= 4 ? .char(self.typeModifier - 4) : ColumnType(.characters(limit: nil, padded: true))
        case "numeric":
            guard self.typeModifier >= 4 else { return .unconstrainedNumeric }
            let modifier = self.typeModifier - 4
            // The scale is 11 bits, signed (negative scales since PostgreSQL 15).
            var scale = modifier & 0x7FF
            if scale & 0x400 != 0 { scale -= 0x800 }
            return .numeric((modifier >> 16) & 0xFFFF, scale)
        default: return .named(self.typeName)
        }
    }
}

/// Which PostgreSQL types a Swift property type can be stored in (as the row codec binds and decodes it).
///
/// The first type of each list is the type's natural column type: the one a drafted migration writes
/// (`naturalType(_:)`), so that a draft is always what validation accepts.
package enum ColumnTypeRule {
    static func scalarTypes(_ type: Any.Type) -> [String]? {
        switch type {
        case is Bool.Type: return ["bool"]
        case is Int.Type, is Int64.Type, is UInt32.Type: return ["int8", "int4", "int2"]
        case is Int32.Type, is UInt16.Type: return ["int4", "int2", "int8"]
        case is Int16.Type, is Int8.Type, is UInt8.Type: return ["int2", "int4", "int8"]
        case is UInt.Type, is UInt64.Type: return ["int8"]
        case is Double.Type: return ["float8", "float4", "numeric"]
        case is Float.Type: return ["float4", "float8", "numeric"]
        case is Decimal.Type: return ["numeric"]
        case is String.Type: return ["text", "varchar", "bpchar", "name", "citext"]
        case is UUID.Type: return ["uuid"]
        case is Date.Type: return ["timestamptz", "timestamp", "date"]
        case is Data.Type: return ["bytea"]
        default: return nil
        }
    }

    /// The column type a property of `type` gets in a drafted migration, as the catalog names it (`int8`,
    /// `text`, `_text`-style arrays as `text[]`, `jsonb`), and whether it is nullable (an `Optional`).
    ///
    /// `Int`/`Int64` → `int8`, `Int32` → `int4`, `String` → `text`, `Bool` → `bool`, `Double` → `float8`,
    /// `Date` → `timestamptz`, `UUID` → `uuid`, `Data` → `bytea`, `Decimal` → `numeric`; a raw-value enum → its
    /// raw value's type; an array of those → an array column; anything else Codable → `jsonb`.
    package static func naturalType(_ type: Any.Type) -> (typeName: String, elementType: String?, nullable: Bool) {
        let (wrapped, optional) = unwrapOptional(type)
        if let (reference, _) = referenceType(wrapped) { return (self.naturalType(reference.idType).typeName, nil, optional) }
        if let scalar = self.scalarTypes(wrapped)?.first { return (scalar, nil, optional) }
        if let raw = rawValueType(wrapped), let scalar = self.scalarTypes(raw)?.first { return (scalar, nil, optional) }
        if let element = arrayElementType(wrapped) {
            let (elementWrapped, _) = unwrapOptional(element)
            if self.isNativeArrayElement(elementWrapped), let scalar = self.scalarTypes(elementWrapped)?.first {
                return ("_" + scalar, scalar, optional)
            }
        }
        return ("jsonb", nil, optional)
    }

    package static func accepts(_ type: Any.Type, _ column: LiveColumn) -> Bool {
        if let (reference, _) = referenceType(type) { return self.accepts(reference.idType, column) }
        if let scalars = self.scalarTypes(type) {
            // Not a String on an enum column: a String is bound as `text`, which PostgreSQL does not assign to an
            // enum column (every write would fail); a String raw-value enum type is bound untyped and fits.
            return scalars.contains(column.typeName)
        }
        if let raw = rawValueType(type) {
            // Raw-value enums are bound as their raw value (text untyped, so enum columns work too).
            if raw == String.self, column.typeKind == "e" { return true }
            if let scalars = self.scalarTypes(raw) { return scalars.contains(column.typeName) }
        }
        if let element = arrayElementType(type) {
            let (wrapped, _) = unwrapOptional(element)
            if let scalars = self.scalarTypes(wrapped), isNativeArrayElement(wrapped) {
                guard let columnElement = column.elementType else { return false }
                return scalars.contains(columnElement)
            }
        }
        // Anything else with structure is stored as JSON.
        return column.typeName == "jsonb" || column.typeName == "json"
    }

    /// Arrays of these bind as PostgreSQL arrays (`[String]` → `text[]`); other arrays become JSON.
    static func isNativeArrayElement(_ type: Any.Type) -> Bool {
        type is any PGArrayElement.Type
    }
}

private protocol OptionalTypeUnwrapping { static var wrappedType: Any.Type { get } }
extension Optional: OptionalTypeUnwrapping { static var wrappedType: Any.Type { Wrapped.self } }

private protocol ArrayTypeUnwrapping { static var elementType: Any.Type { get } }
extension Array: ArrayTypeUnwrapping { static var elementType: Any.Type { Element.self } }

/// The non-optional type and whether it was optional (nested optionals unwrap fully).
package func unwrapOptional(_ type: Any.Type) -> (Any.Type, Bool) {
    var current = type
    var optional = false
    while let unwrapping = current as? any OptionalTypeUnwrapping.Type {
        current = unwrapping.wrappedType
        optional = true
    }
    return (current, optional)
}

func arrayElementType(_ type: Any.Type) -> Any.Type? {
    (type as? any ArrayTypeUnwrapping.Type)?.elementType
}

func rawValueType(_ type: Any.Type) -> Any.Type? {
    func raw<R: RawRepresentable>(_ type: R.Type) -> Any.Type { R.RawValue.self }
    guard let representable = type as? any RawRepresentable.Type else { return nil }
    return raw(representable)
}
