import SkyrosStore
import SkyrosStack

/// What a save or another process's commit changed, as the ``ObserverRegistry`` wakes observers for it: the
/// rows it names, and the tables it may have changed any row of (a set-based delete or update).
///
/// An observer of a query wakes for any change to its tables. An observer of one row
/// (``DataStack/observe(_:id:)``) wakes only for a change naming its row, or any row of its table: with many
/// such observers on one table (a feed per order, say), a commit wakes the few that watch its rows, not all.
package struct ObservedChanges: Sendable {
    /// Rows changed.
    var rows: Set<RowKey> = []
    /// Tables any row of which may have changed.
    var wholeTables: Set<String> = []

    /// Every table touched.
    var tables: Set<String> { self.wholeTables.union(self.rows.lazy.map(\.table)) }

    /// The rows a local save (or a reverted commit) wrote.
    package init(saved slots: [ResolvedSlot]) {
        for slot in slots {
            switch slot {
            case .row(let row): self.rows.insert(row.key)
            case .setWrite(let operation): self.wholeTables.insert(operation.table)
            }
        }
    }

    /// The rows other stacks' log entries changed.
    package init(remote entries: [ChangeLogEntry]) {
        for entry in entries {
            for change in entry.changes {
                if change.isTruncate {
                    self.wholeTables.insert(change.table)
                } else {
                    self.rows.insert(change.key)
                }
            }
        }
    }

    init(rows: Set<RowKey> = [], wholeTables: Set<String> = []) {
        self.rows = rows
        self.wholeTables = wholeTables
    }
}
