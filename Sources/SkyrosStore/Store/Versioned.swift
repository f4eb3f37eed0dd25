/// A fetched entity together with its row version, for optimistic locking.
///
/// Every read from a ``Store`` returns `Versioned` values; pass ``version`` back as the expected version of an
/// update or delete to detect concurrent changes.
///
/// ```swift
/// let user = try await store.object(User.self, id: id)!      // Versioned<User>
/// var changed = user.value
/// changed.name = "Ada"
/// try await store.update(changed, changedColumns: ["name"], expectedVersion: user.version)
/// ```
public struct Versioned<Value: Entity>: Sendable {
    /// The decoded row.
    public var value: Value
    /// The row version: the entity's ``Entity/versionColumn`` or PostgreSQL's `xmin` (in-memory: a counter).
    public var version: Int64

    /// Pairs a decoded entity with the version it was read at (a custom ``Store`` returns these).
    public init(value: Value, version: Int64) {
        self.value = value
        self.version = version
    }
}

extension Versioned: Equatable where Value: Equatable {}
extension Versioned: Hashable where Value: Hashable {}

/// The expected version of a write whose base is no longer known: no row has it, so the write conflicts
/// (or, under a store-wins policy, is dropped).
package let unknownRowVersion: Int64 = -1
