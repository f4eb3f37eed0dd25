import Foundation
import SkyrosPostgres

/// An ordered list of writes across entity types that a ``Store`` applies atomically (one transaction).
///
/// ```swift
/// var changes = ChangeSet()
/// changes.insert(User(id: 1, name: "Ada"))
/// changes.update(renamed, changedColumns: ["name"], expectedVersion: fetched.version)
/// changes.delete(Post.self, id: 7, expectedVersion: postVersion)
/// let result = try await store.apply(changes)     // all or nothing
/// let newVersion = result.operations[1].first?.version
/// ```
public struct ChangeSet: Sendable {
    /// One write: its kind, its entity and table, and the typed payload the stores execute.
    public struct Operation: Sendable, CustomStringConvertible {
        /// What an operation does.
        public enum Kind: String, Sendable, Hashable {
            /// `insert`, `update`, `delete` and `upsert` write one row; `bulkInsert` many rows of one entity in one
            /// statement; `deleteWhere` and `updateWhere` the rows a predicate selects.
            case insert, update, delete, upsert, bulkInsert, deleteWhere, updateWhere
        }

        /// The kind of write.
        public let kind: Kind
        /// The entity type's name.
        public let entity: String
        /// The entity's (unqualified) table name.
        public let table: String
        let change: any EntityOperation

        /// The kind and the entity (`update User`); never values.
        public var description: String { "\(self.kind) \(self.entity)" }
    }

    /// The writes, in the order they run.
    public private(set) var operations: [Operation] = []
    /// When set, the store refuses the set (``StoreError/storeDestroyed(generation:)``) if it was destroyed
    /// since: a stack sets it to the ``Store/generation`` it started with.
    public var expectedGeneration: Int?

    /// An empty change set.
    public init(expectedGeneration: Int? = nil) {
        self.expectedGeneration = expectedGeneration
    }

    /// Whether the set has no operations.
    public var isEmpty: Bool { self.operations.isEmpty }

    /// The entity's name from its cached plan (no `String(describing:)` per operation on the write path).
    private static func entityName<T: Entity>(_ type: T.Type) -> String {
        (try? EntityPlan<T>.shared)?.entityName ?? String(describing: type)
    }

    private mutating func add<T: Entity>(
        _ kind: Operation.Kind, _ payload: EntityChange<T>.Payload, resolution: ConflictResolution = .fail,
        encodedRows: [[PGValue]]? = nil
    ) -> Int {
        let change = EntityChange<T>(payload: payload, resolution: resolution, encodedRows: encodedRows)
        self.operations.append(Operation(kind: kind, entity: Self.entityName(T.self), table: T.tableName, change: change))
        return self.operations.count - 1
    }

    /// Inserts a row; a duplicate primary key fails with `PGError` `.uniqueViolation`.
    /// - Returns: the operation's index in ``operations`` (and in ``ChangeSetResult/operations``).
    @discardableResult
    public mutating func insert<T: Entity>(_ value: T) -> Int { self.add(.insert, EntityChange<T>.Payload.insert(value)) }

    /// Writes the named columns of the row with `value.id`; nothing at all when `changedColumns` is empty.
    ///
    /// - Parameters:
    ///   - value: the row's new state; only `changedColumns` are read from it.
    ///   - changedColumns: column names (as in ``Entity/columns``).
    ///   - expectedVersion: when set, the write fails with ``StoreError/versionConflict(entity:id:expected:actual:)``
    ///     unless the row still has this version.
    @discardableResult
    public mutating func update<T: Entity>(_ value: T, changedColumns: [String], expectedVersion: Int64? = nil) -> Int {
        self.add(.update, EntityChange<T>.Payload.update(value, changedColumns, expectedVersion))
    }

    /// An update whose version conflict is resolved as `resolution` says (the commit queue's merge policies).
    @discardableResult
    package mutating func update<T: Entity>(
        _ value: T, changedColumns: [String], expectedVersion: Int64?, resolution: ConflictResolution = .fail,
        encoded: [PGValue]? = nil
    ) -> Int {
        self.add(
            .update, EntityChange<T>.Payload.update(value, changedColumns, expectedVersion), resolution: resolution,
            encodedRows: encoded.map { [$0] })
    }

    /// A delete whose version conflict is resolved as `resolution` says.
    @discardableResult
    package mutating func delete<T: Entity>(_ type: T.Type, id: T.ID, expectedVersion: Int64?, resolution: ConflictResolution) -> Int {
        self.add(.delete, EntityChange<T>.Payload.delete(id, expectedVersion), resolution: resolution)
    }

    /// Deletes the row with `id` (no error when it does not exist and no version is expected).
    @discardableResult
    public mutating func delete<T: Entity>(_ type: T.Type, id: T.ID, expectedVersion: Int64? = nil) -> Int {
        self.add(.delete, EntityChange<T>.Payload.delete(id, expectedVersion))
    }

    /// Inserts the row, or overwrites every column of the existing row with the same primary key
    /// (`INSERT … ON CONFLICT (id) DO UPDATE`).
    @discardableResult
    public mutating func upsert<T: Entity>(_ value: T) -> Int { self.add(.upsert, EntityChange<T>.Payload.upsert(value)) }

    /// Inserts the row, or, when it conflicts with a stored row on `conflict` (see ``UpsertConflict``),
    /// overwrites every column the app sets of that row except its primary key
    /// (`INSERT … ON CONFLICT ("email") DO UPDATE`). The operation's ``RowChange`` carries the primary key of
    /// the row written, which is the stored row's, not the value's, when it was updated.
    ///
    /// ```swift
    /// var changes = ChangeSet()
    /// changes.upsert(User(id: 9, email: "ada@example.com", name: "Ada"), onConflict: .columns(\.email))
    /// let writtenID = try await store.apply(changes).operations[0][0].id
    /// ```
    @discardableResult
    public mutating func upsert<T: Entity>(_ value: T, onConflict conflict: UpsertConflict<T>) -> Int {
        if conflict.isPrimaryKey { return self.upsert(value) }
        return self.add(.upsert, EntityChange<T>.Payload.upsertOn(value, conflict))
    }

    /// Inserts many rows (COPY for large batches on PostgreSQL, multi-row INSERT otherwise).
    @discardableResult
    public mutating func bulkInsert<T: Entity>(_ values: [T]) -> Int { self.add(.bulkInsert, EntityChange<T>.Payload.bulkInsert(values)) }

    /// An insert whose column values were encoded already (by the commit queue, when the write was queued).
    @discardableResult
    package mutating func insert<T: Entity>(_ value: T, encoded: [PGValue]?) -> Int {
        self.add(.insert, EntityChange<T>.Payload.insert(value), encodedRows: encoded.map { [$0] })
    }

    /// A bulk insert whose rows were encoded already.
    @discardableResult
    package mutating func bulkInsert<T: Entity>(_ values: [T], encoded: [[PGValue]]?) -> Int {
        self.add(.bulkInsert, EntityChange<T>.Payload.bulkInsert(values), encodedRows: encoded)
    }

    /// Deletes every row matching `predicate` (`nil`: every row of the table).
    @discardableResult
    public mutating func delete<T: Entity>(where predicate: Predicate<T>?) -> Int {
        self.add(.deleteWhere, EntityChange<T>.Payload.deleteWhere(predicate))
    }

    /// Sets columns of every row matching `predicate` (`nil`: every row of the table) in one statement, each
    /// to a constant or to an expression over the row's columns evaluated against the row as it stands when
    /// the statement runs (`views = views + 1`): no version is read or compared, so concurrent updates neither
    /// conflict nor lose one another's changes. Each row's version goes up by one.
    ///
    /// ```swift
    /// var changes = ChangeSet()
    /// changes.update(where: #Predicate<Post> { $0.id == 7 }, set: [.set(\.views, to: \.views + 1)])
    /// ```
    @discardableResult
    public mutating func update<T: Entity>(where predicate: Predicate<T>?, set assignments: [ColumnAssignment<T>]) -> Int {
        self.add(.updateWhere, EntityChange<T>.Payload.updateWhere(predicate, assignments))
    }

    /// Appends another set's operations after these.
    public mutating func append(contentsOf other: ChangeSet) {
        self.operations += other.operations
    }
}

/// One row written by a change set: for change logs, identity maps and notifications.
public struct RowChange: Sendable, Hashable {
    /// What happened to the row.
    public enum Kind: String, Sendable, Hashable {
        /// Whether the row was inserted, updated or deleted.
        case inserted, updated, deleted
    }

    /// The entity type's name.
    public var entity: String
    /// The (unqualified) table name.
    public var table: String
    /// The primary key, encoded as it is bound (`PGValue.text` is its text form).
    public var id: PGValue
    /// Whether the row was inserted, updated or deleted.
    public var kind: Kind
    /// The row's new version; `nil` for deleted rows.
    public var version: Int64?
    /// For a guarded update sent in a group commit's pipeline: the whole row as written, so other stacks that
    /// cache the version it replaced can refresh their copy from the announcement instead of reading it again.
    package var row: AnnouncedRow?
    /// For an update that may keep other writers' changes (unguarded, or merged by property), whether the
    /// stored row is the value written, so that a stack may cache that value at ``version`` (`false`: another
    /// writer's columns were kept, and the stack reads the row again). `nil` for other writes: a guarded
    /// update's stored row is the value written.
    package var isStoredAsWritten: Bool?
    /// For an entity with columns the database sets (``DatabaseGenerated``): their stored values, in the order of
    /// ``EntityPlan/readBackIndices``, as the write's `RETURNING` gave them; `nil` when not known (a `COPY`).
    package var readBack: [PGValue]?

    /// A change as a store reports it; a test's custom ``Store`` builds these for its ``ChangeSetResult``.
    public init(entity: String, table: String, id: PGValue, kind: Kind, version: Int64?) {
        self.entity = entity
        self.table = table
        self.id = id
        self.kind = kind
        self.version = version
    }
}

/// An updated row's values as announced to other stacks (see ``RowChange/row``).
///
/// Only an update guarded by the version it read carries one: the stored row is then exactly the row at
/// `base` with the update's columns written over it, that is, the value the writer holds. (An unguarded or
/// merged update may keep another writer's columns, and a skipped one writes nothing.)
package struct AnnouncedRow: Sendable, Hashable {
    /// The version the update replaced.
    package var base: Int64
    /// The entity's ``EntityPlan/layout``.
    package var layout: String
    /// Every column's value, in ``Entity/columns`` order.
    package var values: [PGValue]
}

/// What a change set wrote: per operation, the rows it touched with their new versions.
public struct ChangeSetResult: Sendable, Hashable {
    /// One entry per ``ChangeSet/operations`` element, in the same order. An update with no changed columns,
    /// or a delete of a missing row, has no rows.
    public var operations: [[RowChange]]

    /// A result with the rows each operation touched, in ``ChangeSet/operations`` order.
    public init(operations: [[RowChange]]) { self.operations = operations }

    /// The set committed, but its rows are not known: the connection broke after `COMMIT` was sent, and the
    /// commit log said so afterwards.
    package static let committedUnseen: ChangeSetResult = {
        var result = ChangeSetResult(operations: [])
        result.isUnseen = true
        return result
    }()

    /// See ``committedUnseen``: the rows a delete by predicate removed are not known either.
    package private(set) var isUnseen = false

    /// Rows the foreign keys' delete rules changed: deleted by a cascade, or set to `NULL` (reported by the
    /// in-memory store; PostgreSQL's change capture announces them).
    public var cascaded: [RowChange] = []

    /// Every written row, in order.
    public var changes: [RowChange] { self.operations.count == 1 ? self.operations[0] : self.operations.flatMap { $0 } }
}

/// How a guarded update or delete resolves a conflict (the row changed since it was read).
package enum ConflictResolution: Sendable {
    /// Throw ``StoreError/versionConflict(entity:id:expected:actual:)`` (the expected version is the guard).
    case fail
    /// Write nothing for this operation and report no row: the store's row stays (expected version guard).
    case skip
    /// Updates: the guard is "each changed column still holds the value it had when read" (`originals`, in
    /// the order of the changed columns), not the version; a failing guard throws a version conflict.
    case compareColumns(originals: [String: PGValue])
}

/// The typed work behind a ``ChangeSet/Operation``: plain data (``EntityChange/Payload``) that each store
/// translates, PostgreSQL into statements (``PostgresOperation``, beside `PostgresStore`) and the in-memory
/// store into row changes (``InMemoryOperation``, beside `InMemoryStore`).
typealias EntityOperation = PostgresOperation & InMemoryOperation

/// A typed operation on entity `T`.
struct EntityChange<T: Entity>: Sendable {
    enum Payload: Sendable {
        case insert(T)
        case update(T, [String], Int64?)
        case delete(T.ID, Int64?)
        case upsert(T)
        /// An upsert on a conflict target other than the primary key.
        case upsertOn(T, UpsertConflict<T>)
        case bulkInsert([T])
        case deleteWhere(Predicate<T>?)
        case updateWhere(Predicate<T>?, [ColumnAssignment<T>])
    }

    let payload: Payload
    /// What a guarded update or delete does when its guard does not hold.
    var resolution: ConflictResolution = .fail
    /// An insert's (or an update's) rows as ``RowEncoder`` encodes them, when the commit queue encoded them
    /// already.
    var encodedRows: [[PGValue]]?

    /// Column indices for an update, validated against the entity.
    static func columnIndices(_ names: [String], plan: EntityPlan<T>) throws -> [Int] {
        var indices: [Int] = []
        indices.reserveCapacity(names.count)
        for name in names {
            guard let index = plan.columnIndex[name] else {
                throw StoreError.unknownColumn(entity: plan.entityName, column: name)
            }
            // The database sets it: never written.
            if plan.hasReadBack, plan.readBackIndices.contains(index) { continue }
            // A linear search: an update names a few columns (a `Set` was a visible cost per commit).
            if !indices.contains(index) { indices.append(index) }
        }
        return indices
    }
}

extension ChangeSet {
    /// Replaces the version that the guarded update or delete at `index` expects (a version an earlier set of
    /// its group wrote, known once that set ran: see ``GroupPlan``). An operation without a guard keeps none.
    package mutating func replaceExpectedVersion(ofOperationAt index: Int, with version: Int64) {
        let operation = self.operations[index]
        guard let guarded = operation.change as? any VersionGuardedOperation, let replaced = guarded.expecting(version) else { return }
        self.operations[index] = Operation(kind: operation.kind, entity: operation.entity, table: operation.table, change: replaced)
    }
}

/// An operation whose guard (the version it expects) can be replaced.
protocol VersionGuardedOperation {
    /// The same operation expecting `version`; `nil` when it has no guard to replace.
    func expecting(_ version: Int64) -> (any EntityOperation)?
}

extension EntityChange: VersionGuardedOperation {
    func expecting(_ version: Int64) -> (any EntityOperation)? {
        switch self.payload {
        case .update(let value, let columns, .some):
            EntityChange(payload: .update(value, columns, version), resolution: self.resolution, encodedRows: self.encodedRows)
        case .delete(let id, .some):
            EntityChange(payload: .delete(id, version), resolution: self.resolution, encodedRows: self.encodedRows)
        default:
            nil
        }
    }
}
