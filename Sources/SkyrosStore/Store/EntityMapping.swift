import Foundation
import SkyrosPostgres

/// How an entity's Codable keys become column names.
///
/// ```swift
/// struct Order: Entity, ColumnKeyStrategyProviding {
///     var id: Int
///     var createdAt: Date                     // Codable key "createdAt" → column "created_at"
///     static let tableName = "orders"
///     static let columns: [EntityColumn<Order>] = [EntityColumn(\.id, "id"), EntityColumn(\.createdAt, "created_at")]
///     static let columnKeyStrategy = ColumnKeyStrategy.convertToSnakeCase
/// }
/// ```
public enum ColumnKeyStrategy: Sendable, Hashable {
    /// A Codable key is the column name (rename with `CodingKeys`).
    case useCodingKeys
    /// `createdAt` → `created_at`, `userURL` → `user_url` (the same rule as `JSONEncoder.KeyEncodingStrategy`).
    case convertToSnakeCase

    /// The column name for a Codable key.
    public func columnName(forKey key: String) -> String {
        switch self {
        case .useCodingKeys: return key
        case .convertToSnakeCase: return snakeCased(key)
        }
    }
}

/// Adopt on an ``Entity`` to choose a ``ColumnKeyStrategy`` other than ``ColumnKeyStrategy/useCodingKeys``.
public protocol ColumnKeyStrategyProviding {
    /// The strategy used for every column of the entity.
    static var columnKeyStrategy: ColumnKeyStrategy { get }
}

/// An entity's declaration does not match its Codable shape (a key without a column, a column no key fills,
/// no primary key column, …). Raised the first time the type is encoded, decoded or validated.
public struct EntityMappingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The entity type's name.
    public var entity: String
    /// The column concerned, when there is one.
    public var column: String?
    /// What is wrong.
    public var message: String

    /// An error about an entity's mapping, optionally about one of its columns.
    public init(entity: String, column: String? = nil, message: String) {
        self.entity = entity
        self.column = column
        self.message = message
    }

    /// The entity, the column when there is one, and what is wrong.
    public var description: String {
        if let column { return "entity \(self.entity), column \"\(column)\": \(self.message)" }
        return "entity \(self.entity): \(self.message)"
    }
}

func snakeCased(_ key: String) -> String {
    let characters = Array(key)
    var out = ""
    out.reserveCapacity(characters.count + 4)
    for (i, character) in characters.enumerated() {
        if character.isUppercase, i > 0 {
            let previous = characters[i - 1]
            let nextIsLower = i + 1 < characters.count && characters[i + 1].isLowercase
            if previous.isLowercase || previous.isNumber || (previous.isUppercase && nextIsLower) {
                out.append("_")
            }
        }
        out += character.lowercased()
    }
    return out
}

/// Everything about an entity type that is computed once: column list, primary key, version handling.
///
/// Plans are cached per type for the life of the process (`EntityPlan<User>.shared`).
package final class EntityPlan<T: Entity>: Sendable {
    package let entityName: String
    package let tableName: String
    /// Column names in ``Entity/columns`` order: the order of encoded values and of selected columns.
    package let columnNames: [String]
    package let columnIndex: [String: Int]
    /// The primary key's column (the first of a composite key's: use ``keyIndices`` and ``key(of:)``).
    package let idIndex: Int
    /// The primary key's columns, in key order: one, or a ``CompositeKey``'s.
    package let keyIndices: [Int]
    /// The parameter types of a composite key's values, in key order (empty for a key of one column).
    package let compositeKeyTypes: [PGType]
    /// The columns of `Date` properties (optional or not): the door rounds their values to microseconds.
    package let dateColumns: [(index: Int, column: EntityColumn<T>)]
    package let keyStrategy: ColumnKeyStrategy
    /// The version column, or `nil` for `xmin`.
    package let versionColumn: String?
    /// The quoted column list in declared order (trusted SQL text).
    package let quotedColumns: String
    /// The index of the key column whose ids come from its sequence (``DatabaseGenerated/identity``), if any.
    package let identityIndex: Int?
    /// How many ids one round trip takes from the identity column's sequence.
    package let identityBlockSize: Int
    /// Sets the primary key of a value (for an ``DatabaseGenerated/identity`` key; `nil` otherwise).
    // nonisolated(unsafe): a key path to a stored property is an immutable value; the standard library does not
    // mark it Sendable.
    private nonisolated(unsafe) let identityKeyPath: WritableKeyPath<T, T.ID>?
    /// The columns the database sets on insert, update or both, and generated ones (every
    /// ``DatabaseGenerated`` column but the identity key), in declared order: never written, returned by every
    /// insert, update and upsert (`RETURNING`), and set into the cached row after the commit.
    package let readBackIndices: [Int]
    /// The columns an insert writes (declared order, minus ``readBackIndices``).
    package let insertedIndices: [Int]
    /// `, "a", "b"` for ``readBackIndices`` (empty when none): appended to a `RETURNING` list.
    package let returningReadBack: String
    /// `INSERT`'s column list (minus ``readBackIndices``), quoted.
    let quotedInsertedColumns: String
    /// A fingerprint of the table, column names and order, and version column, stable across processes and
    /// builds (FNV-1a, not Swift's per-process seeded hash). An update announces its row's values with it
    /// (``AnnouncedRow``); another process refreshes its cached copy only when its own plan has the same
    /// fingerprint (during a rolling deploy that adds a column, it reads the row again instead).
    package let layout: String
    /// Statement texts built once: they were built (identifiers quoted, text joined) for every row read or
    /// written.
    private let statements = Locked<[StatementKey: String]>([:])

    private enum StatementKey: Hashable {
        case update(schema: String?, columns: [Int], guardedByVersion: Bool, mustAffectRow: Bool)
        case selectByID(schema: String?)
    }

    init() throws {
        let name = String(describing: T.self)
        self.entityName = name
        self.tableName = T.tableName
        let columns = T.columns
        guard !columns.isEmpty else { throw EntityMappingError(entity: name, message: "declares no columns") }
        self.columnNames = columns.map(\.name)
        var index: [String: Int] = [:]
        for (i, column) in columns.enumerated() {
            if index[column.name] != nil {
                throw EntityMappingError(entity: name, column: column.name, message: "is declared twice in columns")
            }
            index[column.name] = i
        }
        self.columnIndex = index
        self.dateColumns = columns.enumerated().filter { unwrapOptional($0.element.valueType).0 == Date.self }
            .map { (index: $0.offset, column: $0.element) }
        self.keyStrategy = (T.self as? any ColumnKeyStrategyProviding.Type)?.columnKeyStrategy ?? .useCodingKeys
        self.versionColumn = T.versionColumn
        self.quotedColumns = self.columnNames.map(quoteIdentifier).joined(separator: ", ")
        let generated = columns.map(\.generated)
        let readBack = generated.indices.filter { index in
            guard let kind = generated[index]?.kind else { return false }
            if case .identity = kind { return false }
            return true
        }
        self.readBackIndices = readBack
        self.insertedIndices = columns.indices.filter { !readBack.contains($0) }
        let names = self.columnNames
        self.returningReadBack = readBack.map { ", " + quoteIdentifier(names[$0]) }.joined()
        self.quotedInsertedColumns = self.insertedIndices.map { quoteIdentifier(names[$0]) }.joined(separator: ", ")
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for name in [T.tableName, T.versionColumn ?? ""] + self.columnNames {
            for byte in name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            hash = (hash ^ 0xFF) &* 0x100_0000_01b3   // a separator no UTF-8 name contains
        }
        self.layout = String(hash, radix: 16)
        if let version = T.versionColumn, index[version] != nil {
            throw EntityMappingError(
                entity: name, column: version,
                message: "is the version column, which the store manages; remove it from columns and read Versioned.version")
        }
        // The primary key is the query layer's (one rule for both: the column for \.id, or T.primaryKey's).
        var keyIndices: [Int] = []
        for key in try EntityQueryMetadata.of(T.self).primaryKey {
            guard let keyIndex = index[key.name] else {
                throw EntityMappingError(entity: name, column: key.name, message: "the primary key is not a declared column")
            }
            keyIndices.append(keyIndex)
        }
        let idIndex = keyIndices[0]
        self.idIndex = idIndex
        self.keyIndices = keyIndices
        self.compositeKeyTypes = keyIndices.count > 1 ? (T.ID.self as? any CompositeKeyProtocol.Type)?.componentPostgresTypes ?? [] : []
        if keyIndices.count > 1, let identity = columns.first(where: { $0.generated?.kind.isIdentity == true }) {
            throw EntityMappingError(
                entity: name, column: identity.name, message: "a composite primary key cannot be .identity: the app sets its values")
        }
        var identity: (index: Int, blockSize: Int)?
        for (index, column) in columns.enumerated() {
            guard case .identity(let blockSize)? = column.generated?.kind else { continue }
            guard index == idIndex else {
                throw EntityMappingError(
                    entity: name, column: column.name,
                    message: "only the primary key can be declared .identity (declare other sequence-filled columns .onInsert)")
            }
            identity = (index, blockSize)
        }
        if let readKey = keyIndices.first(where: readBack.contains) {
            throw EntityMappingError(
                entity: name, column: names[readKey],
                message: "the primary key must be known when a row is inserted: declare it .identity, or let the app set it")
        }
        self.identityIndex = identity?.index
        self.identityBlockSize = identity?.blockSize ?? 0
        if identity != nil {
            guard let keyPath = columns[idIndex].keyPath as? WritableKeyPath<T, T.ID> else {
                throw EntityMappingError(
                    entity: name, column: names[idIndex], message: "an .identity key is set by insert: declare the id property with var")
            }
            guard Self.identity(1, as: T.ID.self) != nil else {
                throw EntityMappingError(
                    entity: name, column: names[idIndex], message: "an .identity key must be an integer (Int, Int64 or Int32)")
            }
            self.identityKeyPath = keyPath
        } else {
            self.identityKeyPath = nil
        }
    }

    /// `value` as an id of type `ID`, when `ID` is an integer type that holds it.
    private static func identity<ID>(_ value: Int64, as type: ID.Type) -> ID? {
        switch type {
        case is Int.Type: return Int(value) as? ID
        case is Int64.Type: return value as? ID
        case is Int32.Type: return Int32(exactly: value) as? ID
        case is UInt64.Type: return UInt64(exactly: value) as? ID
        case is UInt.Type: return UInt(exactly: value) as? ID
        default: return nil
        }
    }

    /// Whether `value` asks for an allocated id: its entity has an ``DatabaseGenerated/identity`` key and the
    /// value's id is `0`.
    package func needsIdentity(_ value: T) -> Bool {
        guard self.identityKeyPath != nil else { return false }
        return Self.identity(0, as: T.ID.self) == value.id
    }

    /// `value` with the id `id` (an ``DatabaseGenerated/identity`` key).
    package func settingIdentity(_ id: Int64, of value: T) throws -> T {
        guard let keyPath = self.identityKeyPath, let typed = Self.identity(id, as: T.ID.self) else {
            throw EntityMappingError(entity: self.entityName, column: self.idColumn, message: "the allocated id does not fit the id's type")
        }
        var value = value
        value[keyPath: keyPath] = typed
        return value
    }

    /// Whether the database sets some columns that are read back after each write (``readBackIndices``).
    package var hasReadBack: Bool { !self.readBackIndices.isEmpty }

    /// The values of ``readBackIndices`` in a returned row, from column `first` on (text as PostgreSQL sent it).
    package func readBack(_ row: PGRow, from first: Int) -> [PGValue] {
        let columns = row.columns
        return self.readBackIndices.indices.map { offset in
            let column = first + offset
            guard column < columns.count, let bytes = row.bytes(at: column) else { return .null }
            return PGValue(type: columns[column].type, text: String(decoding: bytes, as: UTF8.self))
        }
    }

    /// A written row's values with the stored values of ``readBackIndices`` in place of what the app gave.
    package func stored(_ written: [PGValue], readBack: [PGValue]) -> [PGValue] {
        var values = written
        for (offset, index) in self.readBackIndices.enumerated() where offset < readBack.count && index < values.count {
            values[index] = readBack[offset]
        }
        return values
    }

    /// The primary key's column, or a composite key's columns joined by `, ` (for messages).
    package var idColumn: String { self.keyIndices.map { self.columnNames[$0] }.joined(separator: ", ") }

    /// Whether the key has several columns (its id a ``CompositeKey``).
    package var hasCompositeKey: Bool { self.keyIndices.count > 1 }

    /// The key's columns quoted and joined by `, ` (`ON CONFLICT (…)`'s target).
    package var quotedKeyColumns: String { self.keyIndices.map { quoteIdentifier(self.columnNames[$0]) }.joined(separator: ", ") }

    /// The key as one SQL value: its column, or `ROW("a", "b")`, whose text is a ``CompositeKey``'s.
    package var keyExpression: String {
        self.hasCompositeKey ? "ROW(\(self.quotedKeyColumns))" : quoteIdentifier(self.columnNames[self.idIndex])
    }

    /// `"id" = $n`, or `"a" = $n AND "b" = $n+1` for a composite key: the key's condition binding
    /// ``keyBinds(_:)`` from parameter `first` on. `qualifier`: a table or alias prefixed to each column.
    package func keyCondition(first: Int, qualifier: String? = nil) -> String {
        let prefix = qualifier.map { $0 + "." } ?? ""
        return self.keyIndices.enumerated().map { "\(prefix)\(quoteIdentifier(self.columnNames[$1])) = $\(first + $0)" }
            .joined(separator: " AND ")
    }

    /// The key of a row's encoded values (``RowEncoder``): its column's value, or a composite key's text.
    package func key(of values: [PGValue]) -> PGValue {
        guard self.hasCompositeKey else { return values[self.idIndex] }
        return PGValue(type: .record, text: RecordText.format(self.keyIndices.map { values[$0].text }))
    }

    /// Whether column `index` is part of the primary key.
    package func isKeyColumn(_ index: Int) -> Bool { self.keyIndices.contains(index) }

    /// A key (``idValue(_:)``, ``key(of:)``) as the parameters ``keyCondition(first:qualifier:)`` binds: itself,
    /// or a composite key's values one by one.
    package func keyBinds(_ key: PGValue) throws -> [PGValue] {
        guard self.hasCompositeKey else { return [key] }
        let fields = try RecordText.parse(ArraySlice((key.text ?? "").utf8))
        guard fields.count == self.compositeKeyTypes.count else {
            throw EntityMappingError(
                entity: self.entityName, column: self.idColumn,
                message: "a key of \(fields.count) values for a primary key of \(self.compositeKeyTypes.count) columns")
        }
        return zip(self.compositeKeyTypes, fields).map { PGValue(type: $0, text: $1) }
    }

    /// The qualified table name parts for a schema.
    package func table(schema: String?) -> [String] {
        schema.map { [$0, self.tableName] } ?? [self.tableName]
    }

    /// The quoted, qualified table name (trusted SQL text).
    package func quotedTable(schema: String?) -> String {
        self.table(schema: schema).map(quoteIdentifier).joined(separator: ".")
    }

    /// The SQL expression of the row version as `int8`.
    package var versionExpression: String {
        self.versionColumn.map(quoteIdentifier) ?? "xmin::text::int8"
    }

    /// `UPDATE <table> SET <columns> = $1…[, version + 1] WHERE <id> = $n [AND <version> = $n+1]
    /// RETURNING <version>`, built once per schema, column set, guard and `mustAffectRow` (then wrapped by
    /// ``mustAffectRow(_:)``).
    package func updateSQL(schema: String?, columns: [Int], guardedByVersion: Bool, mustAffectRow: Bool = false) -> String {
        let key = StatementKey.update(schema: schema, columns: columns, guardedByVersion: guardedByVersion, mustAffectRow: mustAffectRow)
        return self.statement(key) {
            var sql = self.updateHead(schema: schema, columns: columns)
            if guardedByVersion { sql += " AND \(self.versionExpression) = $\(columns.count + self.keyIndices.count + 1)" }
            sql += " RETURNING \(self.versionExpression)"
            guard mustAffectRow else { return sql + self.returningReadBack }
            if self.hasReadBack { return Self.mustAffectRowKeepingColumns(sql + " AS v" + self.returningReadBack) }
            return Self.mustAffectRow(sql + " AS v")
        }
    }

    /// `write` (whose one returned column is `v`) as a statement that fails (a division by zero) when it affects
    /// no row, and otherwise returns the largest `v`: for a pipelined group, where a guard that does not hold
    /// must abort the transaction.
    static func mustAffectRow(_ write: String) -> String {
        "WITH skyros_write AS (\(write)) SELECT max(skyros_write.v), 1 / count(*) FROM skyros_write"
    }

    /// ``mustAffectRow(_:)`` that keeps the write's returned columns (version, read-back columns) as they are, and
    /// adds the check as the last column.
    static func mustAffectRowKeepingColumns(_ write: String) -> String {
        "WITH skyros_write AS (\(write)) SELECT skyros_write.*, 1 / (SELECT count(*) FROM skyros_write) "
            + "FROM (SELECT) AS skyros_one LEFT JOIN skyros_write ON true"
    }

    /// `SELECT <columns>, <version> AS <alias> FROM <table> WHERE <key> = $1…`, built once per schema.
    func selectByIDSQL(schema: String?) -> String {
        self.statement(.selectByID(schema: schema)) {
            "SELECT \(self.quotedColumns), \(SQLQueryBuilder.versionSelection(self.versionColumn)) AS "
                + "\(quoteIdentifier(SQLQueryBuilder.versionAlias)) FROM \(self.quotedTable(schema: schema)) "
                + "WHERE \(self.keyCondition(first: 1))"
        }
    }

    private func statement(_ key: StatementKey, build: () -> String) -> String {
        if let sql = self.statements.withLock({ $0[key] }) { return sql }
        let sql = build()
        self.statements.withLock { statements in
            // Bounded: an application uses a handful of schemas and column sets per entity.
            if statements.count >= 256 { statements.removeAll() }
            statements[key] = sql
        }
        return sql
    }

    /// `UPDATE <table> SET <columns> = $1…[, version + 1] WHERE <key> = $n…`: binds the changed columns' values,
    /// then the key (``keyBinds(_:)``).
    package func updateHead(schema: String?, columns: [Int]) -> String {
        var assignments = columns.enumerated().map { "\(quoteIdentifier(self.columnNames[$1])) = $\($0 + 1)" }
        if let versionColumn = self.versionColumn {
            assignments.append("\(quoteIdentifier(versionColumn)) = \(quoteIdentifier(versionColumn)) + 1")
        }
        return "UPDATE \(self.quotedTable(schema: schema)) SET \(assignments.joined(separator: ", ")) "
            + "WHERE \(self.keyCondition(first: columns.count + 1))"
    }


    /// Encodes an id as a bound value.
    package func idValue(_ id: T.ID) throws -> PGValue {
        try PGValue(id)
    }

    /// A printable id for error messages.
    package func describe(id: PGValue) -> String {
        guard self.hasCompositeKey, let text = id.text, let fields = try? RecordText.parse(ArraySlice(text.utf8)) else {
            return id.text ?? "NULL"
        }
        return fields.map { $0 ?? "NULL" }.joined(separator: ", ")
    }

    /// The cached plan of `T`.
    package static var shared: EntityPlan<T> {
        get throws { try planCache.plan(for: T.self) }
    }
}

/// The process-wide cache of entity plans, keyed by type.
private final class PlanCache: Sendable {
    private let plans = Locked<[ObjectIdentifier: AnyObject]>([:])

    func plan<T: Entity>(for type: T.Type) throws -> EntityPlan<T> {
        let key = ObjectIdentifier(type)
        // Stored under its type's identifier, so the object is an `EntityPlan<T>`: no dynamic cast (checking
        // one looked up `EntityPlan<T>`'s generic metadata on every call, several times per queued write).
        if let plan = self.plans.withLock({ $0[key] }) { return unsafeDowncast(plan, to: EntityPlan<T>.self) }
        let plan = try EntityPlan<T>()
        self.plans.withLock { $0[key] = plan }
        return plan
    }
}

private let planCache = PlanCache()
