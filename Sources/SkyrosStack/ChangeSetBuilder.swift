import Foundation
import SkyrosPostgres
import SkyrosStore

/// Turns a group of queued commits into what the store commits, a ``GroupPlan``: a ``ChangeSet`` per commit,
/// with the expected versions of rows read from earlier queued commits resolved in commit order (or, for those
/// of its own group, where they come from), and for a commit of plain inserts encoded at enqueue, its
/// pipelined operations directly.
struct ChangeSetBuilder: Sendable {
    let store: any GroupCommitStore
    /// The store generation the stack's core was made for: a set for another generation is refused by the store.
    let generation: Int

    /// The pipelined operation of a commit made only of inserts of one entity whose rows were encoded when it
    /// was queued: one ``MergeableInsert`` straight from those values, which is what the store's conversion of the
    /// set's change set makes of it, without the typed operation and the conversion they go through.
    /// `nil` for any other set.
    func insertOperations(for commit: QueuedCommit) -> [GroupOperation]? {
        // An entity whose columns the database sets inserts row by row, each returning them.
        guard self.generation == self.store.generation, case .row(let first)? = commit.slots.first, !first.kind.hasReadBack
        else { return nil }
        let kind = ObjectIdentifier(type(of: first.kind))
        var rows: [[PGValue]] = []
        rows.reserveCapacity(commit.slots.count)
        for (index, slot) in commit.slots.enumerated() {
            guard case .row(let row) = slot, case .inserted = row.state, ObjectIdentifier(type(of: row.kind)) == kind,
                let values = commit.slotValues[index]
            else { return nil }
            rows.append(values)
        }
        return self.store.directInsert(rows: rows.count) { schema in try first.kind.mergeableInsert(rows: rows, schema: schema) }
    }

    /// The plan of a group: each commit's change set (or its plain inserts, encoded at enqueue), with the
    /// expected versions of rows read from earlier queued commits resolved in commit order. A version an
    /// earlier commit of the same group writes becomes a ``GroupVersion``, filled in by the store once that set
    /// ran; one of an unsettled commit before the group comes from `earlier`, its outcome; one of a commit
    /// settled before, from the stack's record of settled versions, read through `settled` (under the stack's
    /// lock). A version that is not known — that commit failed or wrote nothing, or a later commit of this
    /// stack wrote the row — resolves to ``BaseVersion/unknownVersion``: the write conflicts rather than going
    /// out unguarded. A set that cannot be built fails alone (``PlannedSet/Writes/failed(_:)``).
    ///
    /// Without `settled` the group is planned ahead, while an earlier group may still be running: `nil` when a
    /// set needs a settled version. Nothing else reads the stack's state (a queued commit does not change), so
    /// a group planned ahead takes no lock.
    func plan(
        _ group: [QueuedCommit], earlier: [PriorOutcome] = [], settled: ((RowKey, UInt64) -> Int64?)?
    ) -> GroupPlan? {
        var sets: [PlannedSet] = []
        sets.reserveCapacity(group.count)
        for (index, commit) in group.enumerated() {
            if let operations = self.insertOperations(for: commit) {
                // Plain inserts resolve no version: their change set is made only if the store asks for it.
                let changes: @Sendable () throws -> ChangeSet = {
                    try self.changeSet(for: commit, at: index, in: group, earlier: [], settled: nil).0
                }
                sets.append(PlannedSet(id: commit.commitID, writes: .inserts(operations, changes: changes)))
                continue
            }
            do {
                let (changes, versions) = try self.changeSet(for: commit, at: index, in: group, earlier: earlier, settled: settled)
                sets.append(PlannedSet(id: commit.commitID, writes: .changes(changes), versionsFromGroup: versions))
            } catch is NeedsSettledVersions {
                return nil
            } catch {
                sets.append(PlannedSet(id: commit.commitID, writes: .failed(error)))
            }
        }
        return GroupPlan(sets: sets)
    }

    /// The change set of `commit`, the set at `position` of `group`, and the versions it takes from earlier sets
    /// of the group (see ``plan(_:earlier:settled:)``).
    /// - Throws: ``NeedsSettledVersions`` when it needs a settled version and `settled` is `nil`.
    func changeSet(
        for commit: QueuedCommit, at position: Int, in group: [QueuedCommit], earlier: [PriorOutcome],
        settled: ((RowKey, UInt64) -> Int64?)?
    ) throws -> (ChangeSet, [GroupVersion]) {
        var changes = ChangeSet(expectedGeneration: self.generation)
        var fromGroup: [GroupVersion] = []
        var rowVersions: [(key: RowKey, set: Int)] = []
        var needsSettledVersions = false
        func resolve(_ key: RowKey, _ base: BaseVersion) -> Int64? {
            switch base {
            case .known(let version): return version
            case .none: return nil
            case .parentChange:
                // Resolved when the change reached a context: none reaches the queue (a stack's contexts
                // resolve it), but never unguarded if one did.
                return BaseVersion.unknownVersion
            case .pending(let source):
                if let set = group[..<position].lastIndex(where: { $0.id == source }) {
                    // The operation it guards is the one the row's emit appends (numbered after it returns).
                    rowVersions.append((key, set))
                    return BaseVersion.unknownVersion
                }
                if let outcome = earlier.last(where: { $0.commit == source }) {
                    guard case .success(let result) = outcome.result else { return BaseVersion.unknownVersion }
                    return result.changes.last { $0.table == key.table && $0.id == key.id }?.version ?? BaseVersion.unknownVersion
                }
                guard let settled else {
                    needsSettledVersions = true
                    return nil
                }
                return settled(key, source) ?? BaseVersion.unknownVersion
            }
        }
        var inserts: [PendingRow] = []
        var insertValues: [[PGValue]] = []
        var allEncoded = true
        func flushInserts() {
            if inserts.count == 1 {
                try? inserts[0].kind.emit(
                    inserts[0], encoded: allEncoded ? insertValues[0] : nil, resolve: resolve, policy: commit.policy,
                    into: &changes)
            } else if let first = inserts.first {
                first.kind.emitBulkInsert(inserts, encoded: allEncoded ? insertValues : nil, into: &changes)
            }
            inserts.removeAll()
            insertValues.removeAll()
            allEncoded = true
        }
        for (index, slot) in commit.slots.enumerated() {
            switch slot {
            case .row(let row):
                if case .inserted = row.state {
                    // One bulk insert per entity type: two types mapped to one table have their own columns.
                    if let first = inserts.first,
                        first.key.table != row.key.table || ObjectIdentifier(type(of: first.kind)) != ObjectIdentifier(type(of: row.kind))
                    {
                        flushInserts()
                    }
                    inserts.append(row)
                    if let values = commit.slotValues[index] { insertValues.append(values) } else { allEncoded = false }
                    continue
                }
                flushInserts()
                let before = changes.operations.count
                try row.kind.emit(row, encoded: commit.slotValues[index], resolve: resolve, policy: commit.policy, into: &changes)
                if !rowVersions.isEmpty {
                    // An update or delete appends one operation, guarded by the version it resolved.
                    if changes.operations.count == before + 1 {
                        fromGroup += rowVersions.map { GroupVersion(operation: before, key: $0.key, set: $0.set) }
                    }
                    rowVersions.removeAll()
                }
            case .setWrite(let operation):
                flushInserts()
                operation.emit(&changes)
            }
        }
        flushInserts()
        if needsSettledVersions { throw NeedsSettledVersions() }
        return (changes, fromGroup)
    }
}

/// A group planned ahead needs the version a commit settled before it produced (see `CommitQueue.prepareAhead()`).
struct NeedsSettledVersions: Error {}

/// The outcome of a set queued before the group being planned, not settled yet (see ``ChangeSetBuilder/plan(_:earlier:settled:)``).
struct PriorOutcome {
    let commit: UInt64
    let result: Result<ChangeSetResult, any Error>
}
