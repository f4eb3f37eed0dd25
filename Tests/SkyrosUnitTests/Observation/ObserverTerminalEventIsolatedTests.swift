import Foundation
@testable import Skyros
import SkyrosPostgres
@testable import SkyrosObservation
@testable import SkyrosStack
@testable import SkyrosStore
@testable import SkyrosSync
import SkyrosTestSupport
import Testing

/// A stress test of the observer registry's terminal event. It runs alone (a thread spinning wake-ups takes a
/// core for seconds, which slowed the parallel run's other tests).
@Suite(.timeLimit(.minutes(2)))
struct ObserverTerminalEventIsolatedTests {
    /// `finishAll`'s terminal event is the last thing an observer's stream yields, even while wake-ups race it
    /// from another thread: a wake-up landing between the terminal event and the end of the stream once
    /// replaced it in the one-element buffer, and the observation then ended normally instead of throwing.
    @Test func theTerminalEventSurvivesWakeUpsRacingIt() async {
        let rounds = 200
        var lost = 0
        for _ in 0..<rounds {
            let registry = ObserverRegistry()
            let observers = (0..<200).map { _ in registry.register(tables: ["t"]) }
            let racing = Locked((on: true, wakes: 0))
            let waker = Thread {
                while racing.withLock({ $0.wakes += 1; return $0.on }) { registry.changedAll() }
            }
            waker.start()
            while racing.withLock({ $0.wakes < 2 }) {}   // the waker is running
            registry.finishAll(throwing: ObservationError.storeRebuilt)
            racing.withLock { $0.on = false }
            for observer in observers {
                var last: ObserverSignal?
                for await signal in observer.signals { last = signal }
                guard case .finished(let error as ObservationError) = last, error == .storeRebuilt else {
                    lost += 1
                    continue
                }
            }
        }
        #expect(lost == 0, "the terminal event was lost for \(lost) of \(rounds * 200) observers")
    }
}
