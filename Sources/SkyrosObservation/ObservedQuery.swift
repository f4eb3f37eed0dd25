import Foundation
import SkyrosPostgres
import SkyrosStore

/// The query behind an ``ObservationSequence``, which ``ObservationSequence/update(_:)`` replaces: the current
/// query, the tables it reads, a generation counting the updates, and the live observations (their registry
/// ids) to move to the new tables.
///
/// Registering an observation and updating the query take this box's lock (and, inside it, the registry's), so
/// an observation registers for the tables of the query it then fetches, and an update retargets every
/// observation registered before it. Each retarget wakes its observation, whose next fetch runs the new query.
package final class ObservedQuery<Query: Sendable>: Sendable {
    private struct State {
        var query: Query
        var tables: Set<String>
        var generation: UInt64 = 0
        var observers: Set<UUID> = []
    }

    let registry: ObserverRegistry
    private let state: Locked<State>

    package init(_ query: Query, tables: Set<String>, registry: ObserverRegistry) {
        self.registry = registry
        self.state = Locked(State(query: query, tables: tables))
    }

    /// The current query and its generation.
    var current: (query: Query, generation: UInt64) {
        self.state.withLock { ($0.query, $0.generation) }
    }

    /// The number of updates so far.
    var generation: UInt64 { self.state.withLock { $0.generation } }

    /// Registers an observation for the current query's tables (for one `row` of them: an object observation).
    func register(row: RowKey?) -> (id: UUID, signals: AsyncStream<ObserverSignal>) {
        self.state.withLock { state in
            let registered = self.registry.register(tables: state.tables, row: row)
            state.observers.insert(registered.id)
            return registered
        }
    }

    /// Ends the observation `id` (and finishes its signals).
    func remove(_ id: UUID) {
        _ = self.state.withLock { $0.observers.remove(id) }
        self.registry.remove(id)
    }

    /// Replaces the query: every live observation watches `tables` from now on and is woken to run it.
    package func update(_ query: Query, tables: Set<String>) {
        self.state.withLock { state in
            state.query = query
            state.tables = tables
            state.generation += 1
            for id in state.observers { self.registry.retarget(id, tables: tables) }
        }
    }
}
