import Foundation
import SkyrosPostgres
import SkyrosStore

/// One row changed by a context and not yet committed: its key, its entity kind and its new state.
package struct PendingRow: Sendable {
    /// What happened to the row, relative to its parent's view.
    enum State: Sendable {
        case inserted(any Entity)
        /// `original` is the row as it was read (the diff base for "only changed columns").
        case updated(any Entity, original: any Entity, base: BaseVersion)
        case upserted(any Entity)
        /// `emit == false`: a `delete(where:)` of the same change set removes the row.
        case deleted(base: BaseVersion, emit: Bool)
    }

    package let key: RowKey
    let kind: any AnyEntityKind
    /// The primary key as `T.ID`.
    let id: any Sendable
    /// Setting it drops ``encoded`` (made for the state before).
    var state: State {
        didSet { self.encoded = nil }
    }
    /// For an update, its value's and its original's column values (``RowEncoder``), as `update` encoded them
    /// to find what changed: the commit queue binds and compares these instead of encoding both again. Only
    /// ever for the state they were made with: any new ``state`` drops them.
    private(set) var encoded: (value: [PGValue], original: [PGValue])?
    /// An update guarded by a version the app gave (`DataContext.update(_:ifVersion:)`): it fails on a
    /// conflict under every merge policy.
    var pinsVersion = false

    init(key: RowKey, kind: any AnyEntityKind, id: any Sendable, state: State) {
        (self.key, self.kind, self.id, self.state) = (key, kind, id, state)
    }

    /// The version base of an update or delete.
    var base: BaseVersion? {
        switch self.state {
        case .updated(_, _, let base), .deleted(let base, _): base
        case .inserted, .upserted: nil
        }
    }

    /// Replaces the version base of an update or delete (keeping ``encoded``: the values are the same).
    mutating func rebase(_ base: BaseVersion) {
        let encoded = self.encoded
        switch self.state {
        case .updated(let value, let original, _): self.state = .updated(value, original: original, base: base)
        case .deleted(_, let emit): self.state = .deleted(base: base, emit: emit)
        case .inserted, .upserted: return
        }
        self.encoded = encoded
    }

    /// An update, with its value's and its original's encodings.
    init(
        key: RowKey, kind: any AnyEntityKind, id: any Sendable, updated value: any Entity, original: any Entity,
        base: BaseVersion, encoded: (value: [PGValue], original: [PGValue])
    ) {
        self.init(key: key, kind: kind, id: id, state: .updated(value, original: original, base: base))
        self.encoded = encoded
    }

    /// An insert or upsert, with its value's encoding (as the door checked it). It has no original: the empty
    /// one stored is never read (an update of the row replaces `state`, which clears `encoded`).
    init(key: RowKey, kind: any AnyEntityKind, id: any Sendable, state: State, encoded: [PGValue]) {
        switch state {
        case .inserted, .upserted: break
        case .updated, .deleted: preconditionFailure("PendingRow(encoded:) is for inserts and upserts")
        }
        self.init(key: key, kind: kind, id: id, state: state)
        self.encoded = (encoded, [])
    }

    /// The row's value after the change, or `nil` when it is deleted.
    var value: (any Entity)? {
        switch self.state {
        case .inserted(let value), .upserted(let value), .updated(let value, _, _): return value
        case .deleted: return nil
        }
    }

    /// Whether this state re-creates a row after a delete (then it must run after any earlier delete).
    var recreates: Bool {
        if case .upserted = self.state { return true }
        return false
    }

    /// The state after `child` is applied on top of `parent`; `nil` when they cancel out (inserted then deleted).
    static func merge(parent: PendingRow?, child: PendingRow) -> PendingRow? {
        guard var merged = parent else { return child }
        switch (merged.state, child.state) {
        case (.inserted, .inserted(let value)), (.inserted, .updated(let value, _, _)), (.inserted, .upserted(let value)):
            merged.state = .inserted(value)
        case (.inserted, .deleted):
            return nil
        case (.updated(_, let original, let base), .updated(let value, _, _)):
            let encodedOriginal = merged.encoded?.original
            merged.state = .updated(value, original: original, base: base)
            merged.pinsVersion = merged.pinsVersion || child.pinsVersion
            if let encodedOriginal, let encodedValue = child.encoded?.value {
                merged.encoded = (encodedValue, encodedOriginal)
            }
        case (.updated, .inserted(let value)), (.updated, .upserted(let value)):
            merged.state = .upserted(value)
        case (.updated(_, _, let base), .deleted(_, let emit)):
            // A delete by predicate (`emit` false) counts on its `DELETE … WHERE`, which sees the stored row, not
            // this unsaved update: the row is deleted by id instead (unguarded: the `DELETE … WHERE` may have
            // removed it already, if the stored row matched too).
            merged.state = emit ? .deleted(base: base, emit: true) : .deleted(base: .none, emit: true)
        case (.upserted, .inserted(let value)), (.upserted, .updated(let value, _, _)), (.upserted, .upserted(let value)):
            merged.state = .upserted(value)
        case (.upserted, .deleted):
            // By id whatever deleted it (as above: the stored row may not match a delete by predicate).
            merged.state = .deleted(base: .none, emit: true)
        case (.deleted, .inserted(let value)), (.deleted, .updated(let value, _, _)), (.deleted, .upserted(let value)):
            merged.state = .upserted(value)
        case (.deleted(let base, let emitted), .deleted(_, let emit)):
            merged.state = .deleted(base: base, emit: emitted || emit)
        }
        return merged
    }
}

/// A `delete(where:)` or `update(where:set:)` recorded by a context: one statement over the rows a predicate
/// selects, emitted at its place in the change set. An upsert on another key than the primary key is recorded
/// as one too (`updates`): which row it writes is known only when it runs.
package struct PendingSetWrite: Sendable {
    package let table: String
    /// Whether it updates rows (else it deletes them).
    let updates: Bool
    let emit: @Sendable (inout ChangeSet) -> Void
    /// What it is, for reports (`upsert on users`); `nil`: `update where on users` or `delete where on users`.
    var label: String? = nil
}

/// The typed operations on one entity type, behind a type-erased ``PendingRow``.
protocol AnyEntityKind: Sendable {
    var table: String { get }
    /// The entity type's name.
    var entityName: String { get }
    /// Appends the operation for `row` (consecutive inserts of one type become one bulk insert by the caller).
    /// `encoded`: the row's values as ``encode(_:)`` made them when it was queued (an insert reuses them).
    func emit(
        _ row: PendingRow, encoded: [PGValue]?, resolve: (RowKey, BaseVersion) -> Int64?, policy: MergePolicy,
        into changes: inout ChangeSet
    ) throws
    /// Appends one bulk insert of several inserted rows (`encoded`: their values, when all were encoded).
    func emitBulkInsert(_ rows: [PendingRow], encoded: [[PGValue]]?, into changes: inout ChangeSet)
    /// The row's column values as they are bound, in declared order; `nil` when it cannot be encoded (the
    /// store then reports the error when it encodes the row itself).
    func encode(_ value: any Entity) -> [PGValue]?
    /// A plain insert of rows of this entity, encoded already, for a group commit's pipeline.
    func mergeableInsert(rows: [[PGValue]], schema: String?) throws -> MergeableInsert
    /// Whether the database sets some of the entity's columns (``DatabaseGenerated``), read back by each write.
    var hasReadBack: Bool { get }
    /// The row as stored: `written` (its encoded values) with the values of the columns the database sets as a
    /// write returned them; `nil` when it cannot be decoded.
    func stored(_ written: [PGValue], readBack: [PGValue]) -> (any Entity)?
    /// The tables the entity's foreign keys (its to-one relationships) refer to.
    var referencedTables: [String] { get }
    /// The keys of the rows `value` refers to through its to-one relationships (its non-nil references).
    func referencedKeys(of value: any Entity) -> [RowKey]
}

/// The approximate memory of a row: the encoded size of its column values.
func approximateSize(of values: [PGValue]?) -> Int {
    guard let values else { return 64 }
    return values.reduce(64) { $0 + 16 + ($1.text?.utf8.count ?? 0) }
}

/// The ``AnyEntityKind`` of `T`.
struct EntityKind<T: Entity>: AnyEntityKind {
    var table: String { T.tableName }
    var entityName: String { String(describing: T.self) }

    func mergeableInsert(rows: [[PGValue]], schema: String?) throws -> MergeableInsert {
        try MergeableInsert(plan: EntityPlan<T>.shared, values: [], encoded: rows, schema: schema)
    }

    var hasReadBack: Bool { (try? EntityPlan<T>.shared)?.hasReadBack ?? false }

    func stored(_ written: [PGValue], readBack: [PGValue]) -> (any Entity)? {
        guard let plan = try? EntityPlan<T>.shared else { return nil }
        return try? RowDecoder(plan: plan).decode(values: plan.stored(written, readBack: readBack))
    }

    func emit(
        _ row: PendingRow, encoded: [PGValue]?, resolve: (RowKey, BaseVersion) -> Int64?, policy: MergePolicy,
        into changes: inout ChangeSet
    ) throws {
        switch row.state {
        case .inserted(let value):
            changes.insert(value as! T, encoded: encoded)
        case .upserted(let value):
            changes.upsert(value as! T)
        case .updated(let value, let original, let base):
            let value = value as! T
            let encoder = try RowEncoder<T>()
            let encodedOriginal = try row.encoded?.original ?? encoder.encode(original as! T)
            let encoded = try encoded ?? encoder.encode(value)
            let columns = encoder.changedColumns(fromEncoded: encodedOriginal, toEncoded: encoded)
            if columns.isEmpty { return }
            let expected = resolve(row.key, base)
            switch row.pinsVersion ? .error : policy {
            case .error:
                changes.update(value, changedColumns: columns, expectedVersion: expected, encoded: encoded)
            case .storeWins:
                changes.update(value, changedColumns: columns, expectedVersion: expected, resolution: .skip, encoded: encoded)
            case .contextWins:
                changes.update(value, changedColumns: columns, expectedVersion: nil, encoded: encoded)
            case .mergeByProperty:
                let plan = encoder.plan
                var originals: [String: PGValue] = [:]
                for name in columns { if let index = plan.columnIndex[name] { originals[name] = encodedOriginal[index] } }
                changes.update(
                    value, changedColumns: columns, expectedVersion: expected,
                    resolution: .compareColumns(originals: originals), encoded: encoded)
            }
        case .deleted(let base, let emit):
            guard emit else { return }
            let id = row.id as! T.ID
            switch policy {
            case .error, .mergeByProperty:
                changes.delete(T.self, id: id, expectedVersion: resolve(row.key, base))
            case .storeWins:
                changes.delete(T.self, id: id, expectedVersion: resolve(row.key, base), resolution: .skip)
            case .contextWins:
                changes.delete(T.self, id: id, expectedVersion: nil)
            }
        }
    }

    func emitBulkInsert(_ rows: [PendingRow], encoded: [[PGValue]]?, into changes: inout ChangeSet) {
        // Every row is an inserted `T` (the commit queue groups consecutive inserts by entity type).
        assert(rows.allSatisfy { $0.value is T }, "a bulk insert of \(T.self) holds rows of another entity type")
        changes.bulkInsert(rows.compactMap { $0.value as? T }, encoded: encoded)
    }

    func encode(_ value: any Entity) -> [PGValue]? {
        guard let value = value as? T else { return nil }
        return try? RowEncoder<T>().encode(value)
    }

    var referencedTables: [String] { RelationshipCatalog.referencedTables(of: T.self) }

    func referencedKeys(of value: any Entity) -> [RowKey] {
        guard let value = value as? T else { return [] }
        return RelationshipCatalog.referencedKeys(of: value)
    }
}
