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

    public init(entity: String, column: String? = nil, message: String) {
        self.entity = entity
        self.column = column
        self.message = message
    }

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
    package let idIndex: Int
    /// The columns of `Date` properties (optional or not): the door rounds their values to microseconds.
    package let dateColumns: [(index: Int, column: EntityColumn<T>)]
    package let keyStrategy: ColumnKeyStrategy
    /// The version column, or `nil` for `xmin`.
    package let versionColumn: String?
    /// The quoted column list in declared order (trusted SQL text).
    package let quotedColumns: String
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
        // The primary key is the query layer's (one rule for both: the column for \.id).
        let primaryKey = try EntityQueryMetadata.of(T.self).primaryKey.name
        guard let idIndex = index[primaryKey] else {
            throw EntityMappingError(entity: name, column: primaryKey, message: "the primary key is not a declared column")
        }
        self.idIndex = idIndex
    }

    package var idColumn: String { self.columnNames[self.idIndex] }

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
            if guardedByVersion { sql += " AND \(self.versionExpression) = $\(columns.count + 2)" }
            sql += " RETURNING \(self.versionExpression)"
            return mustAffectRow ? Self.mustAffectRow(sql + " AS v") : sql
        }
    }

    /// `write` (whose one returned column is `v`) as a statement that fails (a division by zero) when it affects
    /// no row, and otherwise returns the largest `v`: for a pipelined group, where a guard that does not hold
    /// must abort the transaction.
    static func mustAffectRow(_ write: String) -> String {
        "WITH skyros_write AS (\(write)) SELECT max(skyros_write.v), 1 / count(*) FROM skyros_write"
    }

    /// `SELECT <columns>, <version> AS <alias> FROM <table> WHERE <id> = $1`, built once per schema.
    func selectByIDSQL(schema: String?) -> String {
        self.statement(.selectByID(schema: schema)) {
            "SELECT \(self.quotedColumns), \(SQLQueryBuilder.versionSelection(self.versionColumn)) AS "
                + "\(quoteIdentifier(SQLQueryBuilder.versionAlias)) FROM \(self.quotedTable(schema: schema)) "
                + "WHERE \(quoteIdentifier(self.idColumn)) = $1"
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

    /// `UPDATE <table> SET <columns> = $1…[, version + 1] WHERE <id> = $n`: binds the changed columns' values,
    /// then the id.
    package func updateHead(schema: String?, columns: [Int]) -> String {
        var assignments = columns.enumerated().map { "\(quoteIdentifier(self.columnNames[$1])) = $\($0 + 1)" }
        if let versionColumn = self.versionColumn {
            assignments.append("\(quoteIdentifier(versionColumn)) = \(quoteIdentifier(versionColumn)) + 1")
        }
        return "UPDATE \(self.quotedTable(schema: schema)) SET \(assignments.joined(separator: ", ")) "
            + "WHERE \(quoteIdentifier(self.idColumn)) = $\(columns.count + 1)"
    }


    /// Encodes an id as a bound value.
    package func idValue(_ id: T.ID) throws -> PostgresValue {
        try PostgresValue(id)
    }

    /// A printable id for error messages.
    package func describe(id: PostgresValue) -> String { id.text ?? "NULL" }

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
