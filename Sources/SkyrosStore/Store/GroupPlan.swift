import Foundation
import SkyrosPostgres

/// One group of queued writes as the stack planned it, for a ``GroupCommitStore`` to interpret: the sets in
/// commit order, each with its commit id, what it writes, and where the expected versions it cannot know yet
/// come from (rows an earlier set of the same group writes).
///
/// The stack decides everything it can before the group reaches the store (the order of each set's
/// writes, the version each guarded write expects, which sets are plain inserts encoded already); the
/// store decides how to send it: PostgreSQL as one pipeline, or one transaction with a savepoint per set;
/// the in-memory store set by set.
package struct GroupPlan: Sendable {
    /// The sets, in commit order.
    package var sets: [PlannedSet]

    package init(sets: [PlannedSet]) { self.sets = sets }

    /// Each set's commit id, in order.
    package var ids: [UUID] { self.sets.map(\.id) }

    /// Whether some set takes a version an earlier set of the group writes: the group cannot be built as one
    /// pipeline before it runs.
    package var dependsOnItself: Bool { self.sets.contains { !$0.versionsFromGroup.isEmpty } }

    /// How many of the group's first sets must have run before set `index` can be built (its versions come
    /// from them).
    package func setsNeeded(before index: Int) -> Int {
        self.sets[index].versionsFromGroup.reduce(0) { max($0, $1.set + 1) }
    }

    /// Set `index`'s change set, with the versions it takes from the sets before it filled in from their
    /// `results` (`results[j]` is set `j`'s; it must hold ``setsNeeded(before:)`` of them). A version that
    /// set did not write (it failed, or wrote another row) is one no row has: the guarded write conflicts
    /// instead of going out unguarded.
    /// - Throws: the error the set was planned with (``PlannedSet/Writes/failed(_:)``).
    package func changeSet(at index: Int, after results: [Result<ChangeSetResult, any Error>]) throws -> ChangeSet {
        let set = self.sets[index]
        var changes: ChangeSet
        switch set.writes {
        case .failed(let error): throw error
        case .changes(let planned): changes = planned
        case .inserts(_, let make): changes = try make()
        }
        for source in set.versionsFromGroup {
            var version = unknownRowVersion
            if source.set < results.count, case .success(let result) = results[source.set],
                let written = result.changes.last(where: { $0.table == source.key.table && $0.id == source.key.id })?.version
            {
                version = written
            }
            changes.replaceExpectedVersion(ofOperationAt: source.operation, with: version)
        }
        return changes
    }
}

/// One set of a ``GroupPlan``: one save's writes, committed or failed as a whole.
package struct PlannedSet: Sendable {
    /// What a set writes.
    package enum Writes: Sendable {
        /// A change set.
        case changes(ChangeSet)
        /// Plain inserts whose rows were encoded when queued: the operations go into a pipeline as they are;
        /// `changes` makes the same inserts as a change set, only where the store applies sets one by one (the
        /// pipeline, the common path, never pays for it).
        case inserts([GroupOperation], changes: @Sendable () throws -> ChangeSet)
        /// The set could not be planned: it fails alone, with this error.
        case failed(any Error)
    }

    /// The commit id recorded in the commit log with the set (its idempotency key).
    package var id: UUID
    package var writes: Writes
    /// The expected versions the set takes from earlier sets of its group, filled in when they ran.
    package var versionsFromGroup: [GroupVersion]

    package init(id: UUID, writes: Writes, versionsFromGroup: [GroupVersion] = []) {
        (self.id, self.writes, self.versionsFromGroup) = (id, writes, versionsFromGroup)
    }

    /// The plain inserts sent as they are, when the set is made of them.
    package var directOperations: [GroupOperation]? {
        if case .inserts(let operations, _) = self.writes { return operations }
        return nil
    }
}

/// An expected version that an earlier set of the group produces: operation `operation` of this set guards
/// the row `key` with the version set `set` writes to it.
package struct GroupVersion: Sendable, Hashable {
    package var operation: Int
    package var key: RowKey
    package var set: Int

    package init(operation: Int, key: RowKey, set: Int) { (self.operation, self.key, self.set) = (operation, key, set) }
}
