import Foundation
import SkyrosPostgres
import Synchronization

/// A store in process memory with PostgreSQL's semantics: unique primary keys (a duplicate fails with a
/// `PGError` `.uniqueViolation` naming constraint `<table>_pkey`), a version per row that grows on every
/// write, atomic change sets, and the same predicate evaluation (`InMemoryQuery`) as the SQL path.
///
/// Rows are kept encoded (as the values that would be bound), so values round-trip exactly as they would
/// through PostgreSQL (for example text with a NUL is refused, dates keep microseconds).
///
/// ```swift
/// let store = InMemoryStore()
/// try await store.insert(User(id: 1, name: "Ada"))
/// let ada = try await store.object(User.self, id: 1)      // Versioned(value: …, version: 1)
/// ```
///
/// Column types declared with ``declare(_:columns:)`` are checked as PostgreSQL checks them (integer ranges,
/// `varchar(n)` lengths, `numeric(p, s)`, NOT NULL, enum labels), with the same ``ColumnValueError`` a stack
/// throws at its door; a `numeric(p, s)` value is rounded to its scale and a `char(n)` value padded, as stored.
///
/// Strings compare and sort by Unicode code point (as Swift's `String` does), which is PostgreSQL's order on a
/// `COLLATE "C"` column. PostgreSQL compares and sorts a column in its own collation: on another one
/// (`en_US.utf8`, `"en-US-x-icu"`) equality, `contains` and prefix matches still agree with this store, while
/// `<`, ranges, sorts and keyset pages by that column do not. Declare `COLLATE "C"` on text columns whose order
/// tests rely on. A raw-value enum compares with its Swift `<`, PostgreSQL's enum column by its labels' order.
///
/// Only the primary key is unique; other constraints (foreign keys, checks) are not modelled. Columns
/// are matched by name, as on PostgreSQL, so two entity types mapped to one table read and write each other's
/// rows (a column a row never got reads as NULL).
public final class InMemoryStore: Store, ColumnDoorKeeping {
    private let database: Locked<InMemoryDatabase>
    /// The declared column types, which writes are checked against.
    package let columnDoor: ColumnDoor

    /// Creates an empty store.
    public init() {
        let door = ColumnDoor()
        self.columnDoor = door
        self.database = Locked(InMemoryDatabase(door: door))
    }

    /// Declares the types of an entity's columns, so that values are checked as PostgreSQL would check them,
    /// at a stack's door and when a change set is applied. Columns not named are not checked; declaring a table
    /// again replaces its declaration.
    ///
    /// ```swift
    /// let store = InMemoryStore()
    /// store.declare(Ticket.self, columns: [
    ///     "priority": ColumnDefinition(.integer),
    ///     "title": ColumnDefinition(.varchar(255)),
    ///     "price": ColumnDefinition(.numeric(6, 2), nullable: true),
    /// ])
    /// ```
    /// - Parameters:
    ///   - type: the entity type (its table is declared).
    ///   - columns: each column's definition, by column name.
    public func declare<T: Entity>(_ type: T.Type, columns: [String: ColumnDefinition]) {
        self.columnDoor.define(table: T.tableName, columns: columns)
    }

    public var generation: Int { self.database.withLock { $0.generation } }

    public func fetch<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> [Versioned<T>] {
        let (all, targets) = try self.allWithTargets(T.self)
        let selected = try InMemoryQuery.apply(descriptor, to: all.map(\.value), targets: targets)
        let versions = Dictionary(all.map { ($0.value.id, $0.version) }, uniquingKeysWith: { a, _ in a })
        return selected.map { Versioned(value: $0, version: versions[$0.id] ?? 0) }
    }

    public func count<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> Int {
        let (all, targets) = try self.allWithTargets(T.self)
        return try InMemoryQuery.apply(descriptor, to: all.map(\.value), targets: targets).count
    }

    public func object<T: Entity>(_ type: T.Type, id: T.ID) async throws -> Versioned<T>? {
        let plan = try EntityPlan<T>.shared
        let key = try plan.idValue(id)
        guard let row = self.database.withLock({ $0.tables[plan.tableName]?.rows[key] }) else { return nil }
        return Versioned(value: try RowDecoder(plan: plan).decode(values: row.values(for: plan)), version: row.version)
    }

    public func findOrCreate<T: Entity>(_ value: T) async throws -> (value: Versioned<T>, created: Bool) {
        let plan = try EntityPlan<T>.shared
        var values = try RowEncoder(plan: plan).encode(value)
        try self.columnDoor.check(plan, &values)
        let key = plan.key(of: values)
        let (row, created) = try self.database.withLock { database -> (InMemoryRow, Bool) in
            if let existing = database.tables[plan.tableName]?.rows[key] { return (existing, false) }
            try database.register(T.self)
            try database.checkReferences(plan, values)
            return (database.insert(values, columns: plan.columnNames, key: key, table: plan.tableName), true)
        }
        return (Versioned(value: try RowDecoder(plan: plan).decode(values: row.values(for: plan)), version: row.version), created)
    }

    public func apply(_ changes: ChangeSet) async throws -> ChangeSetResult {
        try self.database.withLock { try $0.applyAtomically(changes) }
    }

    /// The next `count` values of `T`'s table's sequence (one counter per table, from 1, like a new
    /// `bigserial`; ids written explicitly do not move it, as on PostgreSQL).
    func nextIdentities<T: Entity>(_ type: T.Type, count: Int) throws -> [Int64] {
        let table = try EntityPlan<T>.shared.tableName
        return self.database.withLock { database in
            let first = database.sequences[table, default: 0] + 1
            database.sequences[table] = first + Int64(max(1, count)) - 1
            return Array(first..<(first + Int64(max(1, count))))
        }
    }

    public func destroy(confirm: DestroyConfirmation) async throws {
        self.database.withLock { database in
            database.tables.removeAll()
            database.sequences.removeAll()
            database.generation += 1
        }
    }

    /// Every row of `T`, decoded, in insertion order, and the rows references are read from, as of the same
    /// moment.
    private func allWithTargets<T: Entity>(_ type: T.Type) throws -> ([Versioned<T>], InMemoryTargets) {
        let plan = try EntityPlan<T>.shared
        let (rows, targets) = self.database.withLock { database -> ([InMemoryRow], InMemoryTargets) in
            let targets = InMemoryTargets(tables: database.tables)
            guard let table = database.tables[plan.tableName] else { return ([], targets) }
            return (table.rows.values.sorted { $0.sequence < $1.sequence }, targets)
        }
        let values = try RowDecoder(plan: plan).decode(valueRows: rows.map { $0.values(for: plan) })
        return (zip(values, rows).map { Versioned(value: $0, version: $1.version) }, targets)
    }
}

/// One stored row: encoded column values, named by `columns` (the ``Entity/columns`` of the entity that wrote
/// it, plus any column another entity type of the table wrote since).
struct InMemoryRow: Sendable {
    private(set) var columns: [String]
    private(set) var values: [PGValue]
    var version: Int64
    /// Insertion order, for a stable scan order.
    var sequence: Int

    init(values: [PGValue], columns: [String], version: Int64, sequence: Int) {
        (self.values, self.columns, self.version, self.sequence) = (values, columns, version, sequence)
    }

    /// The values in `plan`'s column order (`NULL` for a column this row never got).
    func values<T>(for plan: EntityPlan<T>) -> [PGValue] {
        // The same entity wrote it (the usual case): the very same column array.
        if self.columns == plan.columnNames { return self.values }
        return plan.columnNames.map { self.value(named: $0) ?? PGValue(type: .unknown, text: nil) }
    }

    /// The value of column `name`, `nil` when this row has no such column.
    func value(named name: String) -> PGValue? {
        self.columns.firstIndex(of: name).map { self.values[$0] }
    }

    /// Sets the columns `indices` of `plan` from `values` (in `plan`'s order), keeping the columns `plan` does
    /// not map.
    mutating func set<T>(_ values: [PGValue], at indices: [Int], plan: EntityPlan<T>) {
        let sameLayout = self.columns == plan.columnNames
        for index in indices {
            if sameLayout {
                self.values[index] = values[index]
            } else if let position = self.columns.firstIndex(of: plan.columnNames[index]) {
                self.values[position] = values[index]
            } else {
                self.columns.append(plan.columnNames[index])
                self.values.append(values[index])
            }
        }
    }
}

struct InMemoryTable: Sendable {
    var rows: [PGValue: InMemoryRow] = [:]
}

/// The whole in-memory database. A change set runs in place while an undo journal records every row it
/// replaces; on failure the journal is replayed backwards, so a write costs O(1), not a copy of the table.
struct InMemoryDatabase: Sendable {
    private struct Undo: Sendable {
        var table: String
        var key: PGValue
        var previous: InMemoryRow?
    }

    var tables: [String: InMemoryTable] = [:]
    /// Each table's identity sequence: the last value handed out.
    var sequences: [String: Int64] = [:]
    /// The declared columns, checked on every row written.
    let door: ColumnDoor
    var generation = 0
    var nextSequence = 0
    /// The foreign keys of the entity types written so far, and the rows their delete rules changed.
    var relations = InMemoryRelations()
    private var journal: [Undo]?

    init(door: ColumnDoor) { self.door = door }

    /// Applies every operation or none.
    mutating func applyAtomically(_ changes: ChangeSet) throws -> ChangeSetResult {
        if let expected = changes.expectedGeneration, expected != self.generation {
            throw StoreError.storeDestroyed(generation: self.generation)
        }
        self.journal = []
        self.relations.cascaded = []
        defer { self.journal = nil }
        do {
            var results: [[RowChange]] = []
            results.reserveCapacity(changes.operations.count)
            for operation in changes.operations {
                results.append(try operation.change.run(in: &self))
            }
            var result = ChangeSetResult(operations: results)
            result.cascaded = self.relations.cascaded
            return result
        } catch {
            for undo in (self.journal ?? []).reversed() {
                self.tables[undo.table, default: InMemoryTable()].rows[undo.key] = undo.previous
            }
            throw error
        }
    }

    func row(_ table: String, _ key: PGValue) -> InMemoryRow? { self.tables[table]?.rows[key] }

    /// Replaces (or removes, with `nil`) one row, journaling the previous state.
    mutating func setRow(_ table: String, _ key: PGValue, _ row: InMemoryRow?) {
        let previous = self.tables[table]?.rows[key]
        self.tables[table, default: InMemoryTable()].rows[key] = row
        self.journal?.append(Undo(table: table, key: key, previous: previous))
    }

    @discardableResult
    mutating func insert(_ values: [PGValue], columns: [String], key: PGValue, table: String) -> InMemoryRow {
        self.nextSequence += 1
        let row = InMemoryRow(values: values, columns: columns, version: 1, sequence: self.nextSequence)
        self.setRow(table, key, row)
        return row
    }
}

/// An entity operation as the in-memory store applies it.
protocol InMemoryOperation: Sendable {
    func run(in database: inout InMemoryDatabase) throws -> [RowChange]
}

extension EntityChange: InMemoryOperation {
    func run(in database: inout InMemoryDatabase) throws -> [RowChange] {
        let plan = try EntityPlan<T>.shared
        try database.register(T.self)
        let table = plan.tableName
        func change(_ key: PGValue, _ kind: RowChange.Kind, _ version: Int64?) -> RowChange {
            RowChange(entity: plan.entityName, table: table, id: key, kind: kind, version: version)
        }
        let definitions = plan.hasReadBack ? database.door.definitions(table: table) : [:]
        /// What the database sets: a default it can evaluate (`now()`, `gen_random_uuid()`, a constant) on insert,
        /// and on update for ``DatabaseGenerated/onInsertAndUpdate`` (a trigger's `now()`); otherwise the app's
        /// value stays. Returns the indices it set.
        @discardableResult
        func setByDatabase(_ values: inout [PGValue], inserting: Bool) -> [Int] {
            var set: [Int] = []
            for index in plan.readBackIndices {
                guard let defaultValue = definitions[plan.columnNames[index]]?.defaultValue else { continue }
                if !inserting, T.columns[index].generated?.kind != .onInsertAndUpdate { continue }
                values[index] = defaultValue.evaluate()
                set.append(index)
            }
            return set
        }
        func withReadBack(_ change: RowChange, _ values: [PGValue]) -> RowChange {
            guard plan.hasReadBack else { return change }
            var change = change
            change.readBack = plan.readBackIndices.map { values[$0] }
            return change
        }
        func insert(_ value: T) throws -> RowChange {
            var values = try RowEncoder(plan: plan).encode(value)
            try database.door.check(plan, &values)
            if plan.hasReadBack { setByDatabase(&values, inserting: true) }
            let key = plan.key(of: values)
            try database.checkReferences(plan, values)
            if database.row(table, key) != nil {
                throw PGError(
                    kind: .uniqueViolation, sqlState: .uniqueViolation, severity: "ERROR",
                    message: "duplicate key value violates unique constraint \"\(table)_pkey\"",
                    detail: "Key (\(plan.idColumn))=(\(plan.describe(id: key))) already exists.",
                    table: table, constraint: "\(table)_pkey")
            }
            return withReadBack(change(key, .inserted, database.insert(values, columns: plan.columnNames, key: key, table: table).version), values)
        }

        switch self.payload {
        case .insert(let value):
            return [try insert(value)]

        case .bulkInsert(let values):
            return try values.map(insert)

        case .update(let value, let columns, let expected):
            let indices = try Self.columnIndices(columns, plan: plan)
            let key = try plan.idValue(value.id)
            if indices.isEmpty { return [] }
            guard var row = database.row(table, key) else {
                if let expected {
                    // The store wins (as on PostgreSQL): the row another write deleted stays deleted.
                    if case .skip = self.resolution { return [] }
                    throw StoreError.versionConflict(entity: plan.entityName, id: plan.describe(id: key), expected: expected, actual: nil)
                }
                throw StoreError.notFound(entity: plan.entityName, id: plan.describe(id: key))
            }
            if case .compareColumns(let originals) = self.resolution {
                // Merge by property: only the columns this update changes must still hold what was read.
                for index in indices
                where originals[plan.columnNames[index]].map({ $0 != row.values(for: plan)[index] }) ?? false {
                    throw StoreError.versionConflict(
                        entity: plan.entityName, id: plan.describe(id: key), expected: expected ?? 0, actual: row.version)
                }
            } else if let expected, row.version != expected {
                if case .skip = self.resolution { return [] }
                throw StoreError.versionConflict(entity: plan.entityName, id: plan.describe(id: key), expected: expected, actual: row.version)
            }
            var written = try RowEncoder(plan: plan).encode(value)
            try database.door.check(plan, &written)
            try database.checkReferences(plan, written, at: indices)
            var writtenIndices = indices
            if plan.hasReadBack { writtenIndices += setByDatabase(&written, inserting: false) }
            row.set(written, at: writtenIndices, plan: plan)
            row.version += 1
            database.setRow(table, key, row)
            let stored = row.values(for: plan)
            var updated = withReadBack(change(key, .updated, row.version), stored)
            // As on PostgreSQL: an update that may keep other writers' columns tells whether it did (the columns
            // the database sets are returned, not compared).
            var mayMerge = expected == nil
            if case .compareColumns = self.resolution { mayMerge = true }
            if mayMerge {
                updated.isStoredAsWritten = stored.indices.allSatisfy { stored[$0] == written[$0] || plan.readBackIndices.contains($0) }
            }
            return [updated]

        case .delete(let id, let expected):
            let key = try plan.idValue(id)
            guard let row = database.row(table, key) else {
                if let expected {
                    if case .skip = self.resolution { return [] }
                    throw StoreError.versionConflict(entity: plan.entityName, id: plan.describe(id: key), expected: expected, actual: nil)
                }
                return []
            }
            if let expected, row.version != expected {
                if case .skip = self.resolution { return [] }
                throw StoreError.versionConflict(entity: plan.entityName, id: plan.describe(id: key), expected: expected, actual: row.version)
            }
            try database.deleteRow(table, key)
            return [change(key, .deleted, nil)]

        case .upsert(let value):
            var values = try RowEncoder(plan: plan).encode(value)
            try database.door.check(plan, &values)
            try database.checkReferences(plan, values)
            let key = plan.key(of: values)
            guard var row = database.row(table, key) else {
                if plan.hasReadBack { setByDatabase(&values, inserting: true) }
                return [withReadBack(change(key, .inserted, database.insert(values, columns: plan.columnNames, key: key, table: table).version), values)]
            }
            var indices = plan.insertedIndices
            if plan.hasReadBack { indices += setByDatabase(&values, inserting: false) }
            row.set(values, at: indices, plan: plan)
            row.version += 1
            database.setRow(table, key, row)
            return [withReadBack(change(key, .updated, row.version), row.values(for: plan))]

        case .upsertOn(let value, let conflict):
            return try self.upsert(value, onConflict: conflict, in: &database)

        case .deleteWhere(let predicate):
            guard let rows = database.tables[table]?.rows.values.sorted(by: { $0.sequence < $1.sequence }) else { return [] }
            let decoder = RowDecoder(plan: plan)
            let matches = try InMemoryQuery.evaluator(predicate, targets: InMemoryTargets(tables: database.tables))
            var deleted: [RowChange] = []
            for row in rows {
                let values = row.values(for: plan)
                let value = try decoder.decode(values: values)
                guard try matches(value) else { continue }
                let key = plan.key(of: values)
                // A cascade from an earlier row may have removed it (a table referring to itself).
                guard try database.deleteRow(table, key) else { continue }
                deleted.append(change(key, .deleted, nil))
            }
            return deleted

        case .updateWhere(let predicate, let assignments):
            let columns = try SQLQueryBuilder.checked(assignments, plan: plan)
            guard let rows = database.tables[table]?.rows.values.sorted(by: { $0.sequence < $1.sequence }) else { return [] }
            let decoder = RowDecoder(plan: plan)
            let matches = try InMemoryQuery.evaluator(predicate, targets: InMemoryTargets(tables: database.tables))
            var updated: [RowChange] = []
            for var row in rows {
                let values = row.values(for: plan)
                guard try matches(try decoder.decode(values: values)) else { continue }
                // Every expression sees the row as it was before this statement, as in SQL.
                func column(_ name: String) throws -> PGValue {
                    guard let index = plan.columnIndex[name] else { throw StoreError.unknownColumn(entity: plan.entityName, column: name) }
                    return values[index]
                }
                var written = values
                for assignment in columns { written[assignment.index] = try assignment.assignment.evaluate(column) }
                do {
                    try database.door.check(plan, &written)
                } catch let error as ColumnValueError where error.reason == .outOfRange {
                    throw PGError.outOfRange("\(error)")
                }
                var indices = columns.map(\.index)
                try database.checkReferences(plan, written, at: indices)
                if plan.hasReadBack { indices += setByDatabase(&written, inserting: false) }
                row.set(written, at: indices, plan: plan)
                row.version += 1
                let key = plan.key(of: values)
                database.setRow(table, key, row)
                updated.append(withReadBack(change(key, .updated, row.version), row.values(for: plan)))
            }
            return updated
        }
    }
}
