import Metrics
import Synchronization
import SkyrosStore

/// A counter kept in process (read by a stack's statistics) and, when it has a label, reported to
/// swift-metrics as well — one count for both.
package final class ReportedCounter: Sendable {
    private let value = Atomic<Int>(0)
    private let reported: Metrics.Counter?

    /// A counter reported as `label`, or kept in process only when `label` is `nil`.
    package init(_ label: String? = nil) { self.reported = label.map { Metrics.Counter(label: $0) } }

    package func increment(by amount: Int = 1) {
        self.value.add(amount, ordering: .relaxed)
        self.reported?.increment(by: amount)
    }

    package var current: Int { self.value.load(ordering: .relaxed) }
}
