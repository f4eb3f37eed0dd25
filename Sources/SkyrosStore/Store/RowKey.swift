import SkyrosPostgres

/// The identity of a row in the identity map: its table and its primary key as it is bound.
///
/// Hashed once, when made: a write looks its key up in several maps (queued changes, the cache and its pins),
/// and hashing the table name and key text each time was a measurable part of a queued write. Its comparisons,
/// hashing and generic initialisers are inlinable: the stack's maps (another module) call them on every lookup.
package struct RowKey: Hashable, Sendable {
    package let table: String
    package let id: PGValue
    @usableFromInline let hash: Int

    @inlinable package init(table: String, id: PGValue) {
        self.table = table
        self.id = id
        var hasher = Hasher()
        hasher.combine(table)
        hasher.combine(id)
        self.hash = hasher.finalize()
    }

    @inlinable package static func == (lhs: RowKey, rhs: RowKey) -> Bool {
        lhs.hash == rhs.hash && lhs.table == rhs.table && lhs.id == rhs.id
    }

    @inlinable package func hash(into hasher: inout Hasher) {
        hasher.combine(self.hash)
    }

    /// What `Dictionary` and `Set` call: the stored hash mixed with the table's seed by a multiply-xorshift
    /// finaliser, instead of running a seeded `Hasher` over it on every lookup (a queued write looks its row up
    /// in several maps, and a `Hasher`'s setup and finalisation each time add up). The stored hash is already a
    /// `Hasher` result, and the mix spreads every bit of hash and seed over the bucket bits.
    @inlinable package func _rawHashValue(seed: Int) -> Int {
        var x = UInt64(truncatingIfNeeded: self.hash) ^ UInt64(truncatingIfNeeded: seed)
        x = (x ^ (x >> 33)) &* 0xff51_afd7_ed55_8ccd
        x = (x ^ (x >> 33)) &* 0xc4ce_b9fe_1a85_ec53
        return Int(truncatingIfNeeded: x ^ (x >> 33))
    }

    @inlinable package init<T: Entity>(_ value: T) throws {
        self.init(table: T.tableName, id: try PGValue(value.id))
    }

    @inlinable package init<T: Entity>(_ type: T.Type, id: T.ID) throws {
        self.init(table: T.tableName, id: try PGValue(id))
    }
}
