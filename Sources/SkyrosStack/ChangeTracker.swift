import Foundation
import SkyrosStore

/// A context's unsaved changes: rows keyed by (table, id) and `delete(where:)` operations, in the order each
/// row was first changed. A later change of a row merges into its first one, at that one's place (a recreated
/// row, and a row changed after a `delete(where:)`, move to the end): one statement per row, whatever the
/// number of changes, at the price of an order that can differ from the order the changes were made in.
/// Also remembers the rows the context read (value and version) so an update is diffed against what was read
/// and sent with that version.
///
/// A value type guarded by the owning context's mutex; every method is synchronous.
struct ChangeTracker: Sendable {
    enum Slot: Sendable {
        case row(RowKey)
        case setWrite(PendingSetWrite)
    }

    /// Changes in order; `nil` marks a slot whose row moved or cancelled out.
    private(set) var slots: [Slot?] = []
    /// The current change of each row and its slot.
    private(set) var rows: [RowKey: (slot: Int, row: PendingRow)] = [:]
    /// Rows as read by this context: the diff base and expected version of a later update.
    private(set) var snapshots: [RowKey: (value: any Entity, base: BaseVersion)] = [:]
    /// The number of changed rows per table.
    private(set) var countByTable = TableCounts()
    /// How many times this context saved or reset: its changes between two of those are one generation.
    private(set) var generation: UInt64 = 0
    /// The rows of each generation this context saved, with the base that a change a child read from them
    /// while they were unsaved (``BaseVersion/parentChange(_:)``) takes when it arrives after the save. Kept
    /// across saves (bounded); moved out and back by a save, so that noting one does not copy them.
    var savedBases: [SavedRow: BaseVersion] = [:]
    private static let savedBasesLimit = 10_000

    struct SavedRow: Hashable {
        let key: RowKey
        let generation: UInt64
    }

    var hasChanges: Bool { !self.rows.isEmpty || self.slots.contains { if case .setWrite? = $0 { return true } else { return false } } }

    func row(_ key: RowKey) -> PendingRow? { self.rows[key]?.row }

    /// The changed rows of one table.
    func rows(ofTable table: String) -> [RowKey: PendingRow] {
        guard self.countByTable[table] > 0 else { return [:] }
        var result: [RowKey: PendingRow] = [:]
        for (key, entry) in self.rows where key.table == table { result[key] = entry.row }
        return result
    }

    mutating func remember(_ key: RowKey, value: any Entity, base: BaseVersion) {
        self.snapshots[key] = (value, base)
    }

    func snapshot(_ key: RowKey) -> (value: any Entity, base: BaseVersion)? { self.snapshots[key] }

    /// The error for `change` when this context holds an unsaved change of its row as another entity type of the
    /// same table (the two cannot be merged into one row change); `nil` otherwise.
    func typeMismatch(_ change: PendingRow) -> DataStackError? {
        guard let held = self.rows[change.key]?.row.kind, ObjectIdentifier(type(of: held)) != ObjectIdentifier(type(of: change.kind))
        else { return nil }
        return DataStackError(
            code: .entityTypeMismatch,
            message: "row \(change.key.id.text ?? "NULL") of table \(change.key.table) has an unsaved change as \(held.entityName); "
                + "save it before changing the row as \(change.kind.entityName)")
    }

    /// Records `change` on top of this context's current change of the row (merging the two).
    /// - Parameter moveToEnd: place the row after every earlier change (after a `delete(where:)`).
    mutating func record(_ change: PendingRow, moveToEnd: Bool = false) {
        let existing = self.rows[change.key]
        let merged = PendingRow.merge(parent: existing?.row, child: change)
        if let existing {
            if let merged, !moveToEnd, !merged.recreates {
                self.rows[change.key] = (existing.slot, merged)
                return
            }
            self.slots[existing.slot] = nil
            self.rows[change.key] = nil
            self.countByTable[change.key.table] -= 1
        }
        guard let merged else { return }
        self.slots.append(.row(change.key))
        self.rows[change.key] = (self.slots.count - 1, merged)
        self.countByTable[change.key.table] += 1
    }

    /// Drops this context's change of a row (an update back to the value read).
    mutating func discard(_ key: RowKey) {
        guard let existing = self.rows.removeValue(forKey: key) else { return }
        self.slots[existing.slot] = nil
        self.countByTable[key.table] -= 1
    }

    mutating func record(setWrite operation: PendingSetWrite) {
        self.slots.append(.setWrite(operation))
    }

    /// The changes in order, for a save; the tracker is left empty (snapshots too), but for what
    /// ``noteSaved(_:generation:as:)`` recorded, and starts its next generation.
    mutating func take() -> [ResolvedSlot] {
        let result: [ResolvedSlot] = self.slots.compactMap { slot in
            switch slot {
            case .row(let key)?: return self.rows[key].map { .row($0.row) }
            case .setWrite(let operation)?: return .setWrite(operation)
            case nil: return nil
            }
        }
        self.startGeneration()
        return result
    }

    /// Empties the tracker for the next generation (a save or a reset), keeping what was noted of saves.
    private mutating func startGeneration() {
        let (saved, generation) = (self.savedBases, self.generation)
        self.savedBases = [:]   // `saved` alone holds them: no copy below
        self = ChangeTracker()
        (self.savedBases, self.generation) = (saved, generation + 1)
    }

    /// Records that `slots`, the changes of `generation`, were saved, so that a change a child read from them
    /// arrives based on `base`.
    mutating func noteSaved(_ slots: [ResolvedSlot], generation: UInt64, as base: BaseVersion) {
        // Past the bound, what was noted goes: such a child's change then conflicts (the base is not known).
        if self.savedBases.count > Self.savedBasesLimit { self.savedBases.removeAll() }
        for case .row(let row) in slots { self.savedBases[SavedRow(key: row.key, generation: generation)] = base }
    }

    /// Applies a child's saved changes on top of these (this context is `context`), in the child's order. A
    /// change the child read from this context's own change (``BaseVersion/parentChange(_:)``) is merged with
    /// it, or, when this context saved it since, takes the base that save gave it (a version no row has when
    /// this context discarded it).
    mutating func merge(_ changes: [ResolvedSlot], into context: UInt64) {
        var afterSetWrite = false
        for slot in changes {
            switch slot {
            case .row(var row):
                if case .parentChange(let read)? = row.base, read.context == context,
                    read.generation != self.generation || self.rows[row.key] == nil
                {
                    let saved = self.savedBases[SavedRow(key: row.key, generation: read.generation)]
                    row.rebase(saved ?? .known(BaseVersion.unknownVersion))
                }
                self.record(row, moveToEnd: afterSetWrite)
            case .setWrite(let operation):
                self.record(setWrite: operation)
                afterSetWrite = true
            }
        }
    }

    /// Discards every change (a child's change read from one of them then conflicts).
    mutating func reset() { self.startGeneration() }
}

/// A saved change with its row resolved (what a save hands to the parent).
package enum ResolvedSlot: Sendable {
    case row(PendingRow)
    case setWrite(PendingSetWrite)
}


extension ResolvedSlot {
    /// The table the slot writes.
    var table: String {
        switch self {
        case .row(let row): row.key.table
        case .setWrite(let operation): operation.table
        }
    }
}
