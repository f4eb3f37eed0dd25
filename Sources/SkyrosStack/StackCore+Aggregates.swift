import Foundation
import SkyrosStore

extension StackCore {
    /// An aggregate or projection over the stack's view: the store runs it while no queued change of this
    /// stack touches the table; otherwise it is computed in memory over the fetch with the queued changes
    /// overlaid (as ``count(_:)`` does), so readers see their queued writes.
    func evaluate<T: Entity>(_ request: AggregateRequest<T>) async throws -> AggregateRows {
        let tables = request.descriptor.readTables
        let pending = self.state.withLock { state in tables.contains { state.view.pendingCountByTable[$0] > 0 } }
        if !pending { return try await self.store.evaluate(request) }
        return try InMemoryAggregate.evaluate(request, over: try await self.fetch(request.descriptor).map(\.value))
    }
}
