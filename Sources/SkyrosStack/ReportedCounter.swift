import Metrics
import Synchronization
import SkyrosPostgres
import SkyrosStore

/// A counter kept in process (read by a stack's statistics) and, when it has a label, reported to
/// swift-metrics as well — one count for both.
package final class ReportedCounter: Sendable {
    private let value = Atomic<Int>(0)
    private let reported: Metrics.Counter?

    /// A counter reported as `label` with `scope`'s dimensions to its backend, or kept in process only when
    /// `label` is `nil`.
    package init(_ label: String? = nil, in scope: MetricsScope = MetricsScope()) {
        self.reported = label.map { scope.counter($0) }
    }

    package func increment(by amount: Int = 1) {
        self.value.add(amount, ordering: .relaxed)
        self.reported?.increment(by: amount)
    }

    package var current: Int { self.value.load(ordering: .relaxed) }
}
