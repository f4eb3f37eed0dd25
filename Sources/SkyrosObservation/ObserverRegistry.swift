import Foundation
import SkyrosPostgres
import SkyrosStore
import SkyrosStack

/// Why an observation ended.
public enum ObservationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `DataStack/destroyAndRebuild(confirm:)` deleted every row: observe again on the rebuilt store.
    case storeRebuilt

    /// A sentence naming what happened and what to do.
    public var description: String {
        switch self {
        case .storeRebuilt: "the store was destroyed and rebuilt; this observation ended (observe again)"
        }
    }
}

/// A wake-up for an observer.
package enum ObserverSignal: Sendable {
    /// Rows of an observed table may have changed.
    case changed
    /// The observation ends (with an error, or normally for `nil`).
    case finished((any Error)?)
}

/// The active observers of a stack, indexed by the tables and rows they watch: wakes those a change concerns.
package final class ObserverRegistry: Sendable {
    package init() {}

    private struct Observer: Sendable {
        let tables: Set<String>
        /// The one row an observer of a row (``DataStack/observe(_:id:)``) watches.
        let row: RowKey?
        let signal: AsyncStream<ObserverSignal>.Continuation
    }

    private struct Observers: Sendable {
        var byID: [UUID: Observer] = [:]
        /// Observers of queries, by each table they read.
        var queriesByTable: [String: Set<UUID>] = [:]
        /// Observers of one row, by that row.
        var byRow: [RowKey: Set<UUID>] = [:]
        /// Observers of one row, by its table (woken when any row of it may have changed).
        var rowsByTable: [String: Set<UUID>] = [:]
        /// The stack shut down: observations registered from now on end at once.
        var closed = false

        mutating func insert(_ observer: Observer, id: UUID) {
            self.byID[id] = observer
            if let row = observer.row {
                self.byRow[row, default: []].insert(id)
                self.rowsByTable[row.table, default: []].insert(id)
            } else {
                for table in observer.tables { self.queriesByTable[table, default: []].insert(id) }
            }
        }

        mutating func remove(_ id: UUID) -> Observer? {
            guard let observer = self.byID.removeValue(forKey: id) else { return nil }
            if let row = observer.row {
                Self.remove(id, from: &self.byRow, at: row)
                Self.remove(id, from: &self.rowsByTable, at: row.table)
            } else {
                for table in observer.tables { Self.remove(id, from: &self.queriesByTable, at: table) }
            }
            return observer
        }

        private static func remove<Key: Hashable>(_ id: UUID, from index: inout [Key: Set<UUID>], at key: Key) {
            index[key]?.remove(id)
            if index[key]?.isEmpty == true { index[key] = nil }
        }

        /// The observers `changes` concerns.
        func woken(by changes: ObservedChanges) -> [Observer] {
            var ids: Set<UUID> = []
            for table in changes.tables { ids.formUnion(self.queriesByTable[table] ?? []) }
            for table in changes.wholeTables { ids.formUnion(self.rowsByTable[table] ?? []) }
            for row in changes.rows { ids.formUnion(self.byRow[row] ?? []) }
            return ids.compactMap { self.byID[$0] }
        }
    }

    private let observers = Locked(Observers())

    /// Registers an observer of `tables` (of one `row` of them, for ``DataStack/observe(_:id:)``); its signal
    /// stream keeps at most one pending wake-up (bursts coalesce).
    package func register(tables: Set<String>, row: RowKey? = nil) -> (id: UUID, signals: AsyncStream<ObserverSignal>) {
        let (signals, continuation) = AsyncStream.makeStream(of: ObserverSignal.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID.random()
        let closed = self.observers.withLock { observers -> Bool in
            if observers.closed { return true }
            observers.insert(Observer(tables: tables, row: row, signal: continuation), id: id)
            return false
        }
        if closed { continuation.finish() }
        return (id, signals)
    }

    package func remove(_ id: UUID) {
        self.observers.withLock { $0.remove(id) }?.signal.finish()
    }

    /// Makes the observer of a query `id` watch `tables` from now on (its query changed) and wakes it, under
    /// the lock: a change committed after this returns wakes it for the new tables, and one committed before,
    /// the fetch it wakes for sees. Nothing happens to an observer that has ended.
    package func retarget(_ id: UUID, tables: Set<String>) {
        self.observers.withLock { observers in
            guard let observer = observers.remove(id) else { return }
            observers.insert(Observer(tables: tables, row: observer.row, signal: observer.signal), id: id)
            observer.signal.yield(.changed)
        }
    }

    /// The tables the observer `id` watches (`nil` once it ended).
    func tables(of id: UUID) -> Set<String>? { self.observers.withLock { $0.byID[id]?.tables } }

    var count: Int { self.observers.withLock { $0.byID.count } }

    /// Whether any observer watches one row.
    package var watchesRows: Bool { self.observers.withLock { !$0.byRow.isEmpty } }

    /// Those of `keys` that an observer of one row watches.
    package func observedRows(among keys: [RowKey]) -> [RowKey] {
        self.observers.withLock { observers in
            observers.byRow.isEmpty ? [] : keys.filter { observers.byRow[$0] != nil }
        }
    }

    /// Wakes the observers `changes` concerns (worked out only when something is observed: every save calls this).
    ///
    /// Wake-ups are yielded under the lock, like ``finishAll(throwing:closing:)``'s removal: a wake-up yielded
    /// after `finishAll` had yielded its terminal event would replace that event in the one-element buffer, and
    /// the observation would end normally instead of throwing. Yielding only enqueues the waiting task; it runs
    /// no code of the observer's.
    package func changed(_ changes: @autoclosure () -> ObservedChanges) {
        guard self.count > 0 else { return }
        let changes = changes()
        self.observers.withLock { observers in
            for observer in observers.woken(by: changes) { observer.signal.yield(.changed) }
        }
    }

    /// Wakes every observer (under the lock, as ``changed(_:)`` does).
    package func changedAll() {
        self.observers.withLock { observers in
            for observer in observers.byID.values { observer.signal.yield(.changed) }
        }
    }

    /// Ends every observation; `closing`: and every one registered later (the stack shut down). The observers
    /// leave the registry under the lock, so no wake-up reaches them after their terminal event.
    package func finishAll(throwing error: (any Error)?, closing: Bool = false) {
        let all = self.observers.withLock { observers in
            defer {
                let closed = observers.closed || closing
                observers = Observers()
                observers.closed = closed
            }
            return Array(observers.byID.values)
        }
        for observer in all {
            observer.signal.yield(.finished(error))
            observer.signal.finish()
        }
    }
}
