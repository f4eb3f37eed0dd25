import Foundation
import SkyrosPostgres
import SkyrosStore

/// Turns queued commits into what the store commits: a ``ChangeSet`` per commit, with the expected versions of
/// rows read from earlier queued commits resolved in commit order, or for a commit of plain inserts encoded at
/// enqueue, its pipelined operation directly.
struct ChangeSetBuilder: Sendable {
    let store: any GroupCommitStore
    /// The store generation the stack's core was made for: a set for another generation is refused by the store.
    let generation: Int

    /// The pipelined operation of a commit made only of inserts of one entity whose rows were encoded when it
    /// was queued: one ``MergeableInsert`` straight from those values, which is what ``changeSet(for:state:prior:)``
    /// and the store's conversion of it make of such a set, without the change set, the typed operation and
    /// the conversion they go through.
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

    /// The change set of a commit; expected versions of rows read from earlier queued commits are resolved now,
    /// from the versions those commits produced: `prior` holds the outcomes of the sets of its group that ran
    /// before it, and of unsettled sets before the group; a commit settled before is looked up in the
    /// stack's record of settled versions (``SettledVersions``, in `view`, read under the stack's lock). A version
    /// that is not known — that commit failed or wrote nothing, or a later commit of this stack wrote the row —
    /// resolves to ``BaseVersion/unknownVersion``: the write conflicts rather than going out unguarded. Without
    /// `view` the set is built ahead, while an earlier group may still be running, and it throws
    /// ``NeedsSettledVersions`` when it needs such a version; so it does when built before a set of its own
    /// group that it needs has run (as one pipeline). Nothing else reads the view (a queued commit does not
    /// change), so a set built ahead takes no lock.
    func changeSet(for commit: QueuedCommit, view: StackView?, prior: PriorOutcomes) throws -> ChangeSet {
        var changes = ChangeSet(expectedGeneration: self.generation)
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
                guard let view else {
                    needsSettledVersions = true
                    return nil
                }
                switch prior.outcome(of: source) {
                case .ran(.success(let result)):
                    let change = result.changes.last { $0.table == key.table && $0.id == key.id }
                    return change?.version ?? BaseVersion.unknownVersion
                case .ran(.failure):
                    return BaseVersion.unknownVersion
                case .notYetRun:
                    needsSettledVersions = true
                    return nil
                case .settled:
                    return view.settled.version(of: key, writtenBy: source) ?? BaseVersion.unknownVersion
                }
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
                try row.kind.emit(row, encoded: commit.slotValues[index], resolve: resolve, policy: commit.policy, into: &changes)
            case .setWrite(let operation):
                flushInserts()
                operation.emit(&changes)
            }
        }
        flushInserts()
        if needsSettledVersions { throw NeedsSettledVersions() }
        return changes
    }
}

/// A set built ahead needs the version a commit still running produces (see `CommitQueue.prepareAhead()`).
struct NeedsSettledVersions: Error {}

/// The outcome of a set that ran before the one being built (see ``ChangeSetBuilder/changeSet(for:view:prior:)``).
struct PriorOutcome {
    let commit: UInt64
    let result: Result<ChangeSetResult, any Error>
}

/// The outcomes a set being built may take versions from: unsettled sets before its group, then the first sets
/// of its group (`results[i]` is `group[i]`'s), without copying them for each set.
struct PriorOutcomes {
    var earlier: [PriorOutcome] = []
    var group: [QueuedCommit] = []
    var results: [Result<ChangeSetResult, any Error>] = []

    enum Lookup {
        /// The commit ran before (in this group, or unsettled before it).
        case ran(Result<ChangeSetResult, any Error>)
        /// It is in this group and has not run yet (the group is built before any of it runs).
        case notYetRun
        /// Neither: it settled before this group.
        case settled
    }

    func outcome(of commit: UInt64) -> Lookup {
        if let index = self.group.firstIndex(where: { $0.id == commit }) {
            return index < self.results.count ? .ran(self.results[index]) : .notYetRun
        }
        if let earlier = self.earlier.last(where: { $0.commit == commit }) { return .ran(earlier.result) }
        return .settled
    }
}
