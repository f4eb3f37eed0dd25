import Foundation
import SkyrosStore

/// Read-your-writes: a layer's changes applied over the rows its parent returned, with the same in-memory
/// evaluator the in-memory store uses (``InMemoryQuery``), so the result is what the store would return once
/// the changes are committed.
enum Overlay {
    /// The descriptor to ask the parent with when `changes` rows of this layer may displace rows: without
    /// offset, and with the limit grown by the offset and the number of changed rows (each can remove at most
    /// one row from the parent's window).
    static func widened<T: Entity>(_ descriptor: FetchDescriptor<T>, by changes: Int) -> FetchDescriptor<T> {
        guard changes > 0 else { return descriptor }
        var widened = descriptor
        widened.fetchOffset = nil
        widened.fetchLimit = descriptor.fetchLimit.map { $0 + (descriptor.fetchOffset ?? 0) + changes }
        return widened
    }

    /// Removes rows the changes touch, adds the changed rows that match, sorts and windows again.
    /// - Parameters:
    ///   - base: the parent's rows for ``widened(_:by:)`` (when `changes` is not empty), or, with `targets`,
    ///     for `descriptor.unfiltered`.
    ///   - changeBase: the version base reported for a changed row.
    ///   - targets: the rows a predicate across references reads, as this layer sees them; when given, `base`
    ///     is filtered too (the parent filtered nothing).
    static func apply<T: Entity>(
        _ descriptor: FetchDescriptor<T>, base: [(T, BaseVersion)], changes: [RowKey: PendingRow],
        changeBase: (RowKey) -> BaseVersion, targets: ResolvedTargets? = nil
    ) throws -> [(value: T, base: BaseVersion)] {
        if changes.isEmpty, case .none = targets { return base.map { (value: $0.0, base: $0.1) } }
        var values: [T] = []
        values.reserveCapacity(base.count + changes.count)
        var bases: [RowKey: BaseVersion] = [:]
        for (value, version) in base {
            let key = try RowKey(value)
            if changes[key] != nil { continue }
            values.append(value)
            bases[key] = version
        }
        for (key, row) in changes {
            guard let value = row.value as? T else { continue }
            values.append(value)
            bases[key] = changeBase(key)
        }
        return try InMemoryQuery.apply(descriptor, to: values, targets: targets).map { value in
            let key = try RowKey(value)
            return (value: value, base: bases[key] ?? changeBase(key))
        }
    }
}
