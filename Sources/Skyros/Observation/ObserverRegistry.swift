import Foundation
import SkyrosPostgres

/// Why an observation ended.
public enum ObservationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// ``DataStack/destroyAndRebuild(confirm:)`` deleted every row: observe again on the rebuilt store.
    case storeRebuilt

    /// A sentence naming what happened and what to do.
    public var description: String {
        switch self {
        case .storeRebuilt: "the store was destroyed and rebuilt; this observation ended (observe again)"
        }
    }
}

/// A wake-up for an observer.
enum ObserverSignal: Sendable {
    /// Rows of an observed table may have changed.
    case changed
    /// The observation ends (with an error, or normally for `nil`).
    case finished((any Error)?)
}

/// The active observers of a stack, by table: wakes those whose tables changed.
final class ObserverRegistry: Sendable {
    private struct Observer: Sendable {
        let tables: Set<String>
        /// The one row an observer of a row (``DataStack/observe(_:id:)``) watches.
        let row: RowKey?
        let signal: AsyncStream<ObserverSignal>.Continuation
    }

    private struct Observers: Sendable {
        var byID: [UUID: Observer] = [:]
        /// How many observers watch each row (observers of one row).
        var rows: [RowKey: Int] = [:]
    }

    private let observers = Locked(Observers())

    /// Registers an observer of `tables` (of one `row` of them, for ``DataStack/observe(_:id:)``); its signal
    /// stream keeps at most one pending wake-up (bursts coalesce).
    func register(tables: Set<String>, row: RowKey? = nil) -> (id: UUID, signals: AsyncStream<ObserverSignal>) {
        let (signals, continuation) = AsyncStream.makeStream(of: ObserverSignal.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID.random()
        self.observers.withLock { observers in
            observers.byID[id] = Observer(tables: tables, row: row, signal: continuation)
            if let row { observers.rows[row, default: 0] += 1 }
        }
        return (id, signals)
    }

    func remove(_ id: UUID) {
        self.observers.withLock { observers -> Observer? in
            guard let removed = observers.byID.removeValue(forKey: id) else { return nil }
            if let row = removed.row {
                if let count = observers.rows[row], count > 1 { observers.rows[row] = count - 1 } else { observers.rows[row] = nil }
            }
            return removed
        }?.signal.finish()
    }

    var count: Int { self.observers.withLock { $0.byID.count } }

    /// Whether any observer watches one row.
    var watchesRows: Bool { self.observers.withLock { !$0.rows.isEmpty } }

    /// Those of `keys` that an observer of one row watches.
    func observedRows(among keys: [RowKey]) -> [RowKey] {
        self.observers.withLock { observers in
            observers.rows.isEmpty ? [] : keys.filter { observers.rows[$0] != nil }
        }
    }

    /// Wakes the observers of any of `tables` (worked out only when something is observed: every save calls this).
    func changed(_ tables: @autoclosure () -> Set<String>) {
        guard self.count > 0 else { return }
        let tables = tables()
        let woken = self.observers.withLock { $0.byID.values.filter { !$0.tables.isDisjoint(with: tables) } }
        for observer in woken { observer.signal.yield(.changed) }
    }

    /// Wakes every observer.
    func changedAll() {
        for observer in self.observers.withLock({ Array($0.byID.values) }) { observer.signal.yield(.changed) }
    }

    /// Ends every observation.
    func finishAll(throwing error: (any Error)?) {
        let all = self.observers.withLock { observers in
            defer { observers = Observers() }
            return Array(observers.byID.values)
        }
        for observer in all {
            observer.signal.yield(.finished(error))
            observer.signal.finish()
        }
    }
}
