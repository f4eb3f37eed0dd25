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
        let signal: AsyncStream<ObserverSignal>.Continuation
    }

    private let observers = Locked<[UUID: Observer]>([:])

    /// Registers an observer of `tables`; its signal stream keeps at most one pending wake-up (bursts coalesce).
    func register(tables: Set<String>) -> (id: UUID, signals: AsyncStream<ObserverSignal>) {
        let (signals, continuation) = AsyncStream.makeStream(of: ObserverSignal.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID.random()
        self.observers.withLock { $0[id] = Observer(tables: tables, signal: continuation) }
        return (id, signals)
    }

    func remove(_ id: UUID) {
        self.observers.withLock { $0.removeValue(forKey: id) }?.signal.finish()
    }

    var count: Int { self.observers.withLock { $0.count } }

    /// Wakes the observers of any of `tables` (worked out only when something is observed: every save calls this).
    func changed(_ tables: @autoclosure () -> Set<String>) {
        guard self.count > 0 else { return }
        let tables = tables()
        let woken = self.observers.withLock { $0.values.filter { !$0.tables.isDisjoint(with: tables) } }
        for observer in woken { observer.signal.yield(.changed) }
    }

    /// Wakes every observer.
    func changedAll() {
        for observer in self.observers.withLock({ Array($0.values) }) { observer.signal.yield(.changed) }
    }

    /// Ends every observation.
    func finishAll(throwing error: (any Error)?) {
        let all = self.observers.withLock { observers in
            defer { observers = [:] }
            return Array(observers.values)
        }
        for observer in all {
            observer.signal.yield(.finished(error))
            observer.signal.finish()
        }
    }
}
