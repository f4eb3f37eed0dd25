import Foundation
@testable import SkyrosObservation
@testable import SkyrosStack
@testable import SkyrosStore
@testable import SkyrosSync
import SkyrosPostgres
import SkyrosTestEntities
import Testing

/// Which observers a change wakes, on the registry alone: an observer of a query for any change to its tables,
/// an observer of one row only for its row (or a change to any row of its table). Through real saves and
/// commits: `ObserverWakeUpTests` (SkyrosTests).
@Suite struct ObserverRegistryTests {
    typealias Registered = RegisteredObservers

    static func key(_ table: String, _ id: Int64) -> RowKey { RowKey(table: table, id: PGValue(type: .int8, text: String(id))) }

    @Test func aChangeWakesTheQueriesOfItsTablesAndTheObserversOfItsRowsOnly() async {
        func observers() -> Registered {
            Registered(ObserverRegistry(), [
                ("row 1", ["t"], Self.key("t", 1)), ("row 2", ["t"], Self.key("t", 2)), ("also row 1", ["t"], Self.key("t", 1)),
                ("query t", ["t"], nil), ("query u", ["u"], nil), ("query t and u", ["t", "u"], nil),
            ])
        }
        var registered = observers()
        registered.registry.changed(ObservedChanges(rows: [Self.key("t", 1)]))
        #expect(await registered.woken() == ["row 1", "also row 1", "query t", "query t and u"])

        registered = observers()
        registered.registry.changed(ObservedChanges(rows: [Self.key("u", 1)]))
        #expect(await registered.woken() == ["query u", "query t and u"])

        registered = observers()
        registered.registry.changed(ObservedChanges(wholeTables: ["t"]))
        #expect(await registered.woken() == ["row 1", "row 2", "also row 1", "query t", "query t and u"])

        registered = observers()
        registered.registry.changedAll()
        #expect(await registered.woken() == ["row 1", "row 2", "also row 1", "query t", "query t and u", "query u"])
    }

    @Test func aRemovedObserverOfARowLeavesTheOthersOfThatRowWatched() async {
        let registry = ObserverRegistry()
        let first = registry.register(tables: ["t"], row: Self.key("t", 1))
        let second = Registered(registry, [("second", ["t"], Self.key("t", 1))])
        registry.remove(first.id)
        #expect(registry.observedRows(among: [Self.key("t", 1), Self.key("t", 2)]) == [Self.key("t", 1)])
        registry.changed(ObservedChanges(rows: [Self.key("t", 1)]))
        #expect(await second.woken() == ["second"])
        #expect(!registry.watchesRows)
        #expect(registry.count == 0)
    }
}
