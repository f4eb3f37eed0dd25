import Foundation
import SkyrosObservation
import SkyrosStore

/// Observers registered straight on an ``ObserverRegistry`` as `(name, tables, row)`, to see which ones a change
/// wakes (the registry's own tests, and the wake-up tests through real saves and commits).
package struct RegisteredObservers {
    package let registry: ObserverRegistry
    package let observers: [String: (id: UUID, signals: AsyncStream<ObserverSignal>)]

    package init(_ registry: ObserverRegistry, _ observers: [(String, Set<String>, RowKey?)]) {
        self.registry = registry
        var registered: [String: (id: UUID, signals: AsyncStream<ObserverSignal>)] = [:]
        for (name, tables, row) in observers { registered[name] = registry.register(tables: tables, row: row) }
        self.observers = registered
    }

    /// Removes every observer and returns the names of those woken before (removing one finishes its stream
    /// after the wake-up it holds; at most one is held).
    package func woken() async -> Set<String> {
        var woken: Set<String> = []
        for (name, observer) in self.observers {
            self.registry.remove(observer.id)
            for await signal in observer.signals {
                if case .changed = signal { woken.insert(name) }
            }
        }
        return woken
    }
}
