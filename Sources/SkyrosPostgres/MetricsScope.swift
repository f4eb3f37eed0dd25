import Metrics

/// Where a component's swift-metrics go: the backend, and the dimensions every metric it creates carries (a
/// stack's `stack` label, a pool's `pool` role), so that two stacks or pools in one process are told apart.
///
/// The backend is the one bootstrapped when the scope is made (`MetricsSystem.factory`) unless one is given:
/// tests pass their own `TestMetrics` instead of bootstrapping the process-wide system.
package struct MetricsScope: Sendable {
    /// Dimensions added to every metric, in order.
    package let dimensions: [(String, String)]
    package let factory: any MetricsFactory

    package init(dimensions: [(String, String)] = [], factory: (any MetricsFactory)? = nil) {
        self.dimensions = dimensions
        self.factory = factory ?? MetricsSystem.factory
    }

    /// This scope with one more dimension (replacing one of the same name).
    package func adding(_ name: String, _ value: String) -> MetricsScope {
        MetricsScope(dimensions: self.dimensions.filter { $0.0 != name } + [(name, value)], factory: self.factory)
    }

    package func counter(_ label: String) -> Counter {
        Counter(label: label, dimensions: self.dimensions, factory: self.factory)
    }

    package func gauge(_ label: String) -> Gauge {
        Gauge(label: label, dimensions: self.dimensions, factory: self.factory)
    }

    package func recorder(_ label: String) -> Recorder {
        Recorder(label: label, dimensions: self.dimensions, aggregate: true, factory: self.factory)
    }

    package func timer(_ label: String, _ extra: [(String, String)] = []) -> Metrics.Timer {
        Metrics.Timer(label: label, dimensions: self.dimensions + extra, factory: self.factory)
    }
}
