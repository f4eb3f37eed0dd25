import SkyrosPostgres

/// The identity of a row in the identity map: its table and its primary key as it is bound.
///
/// Hashed once, when made: a write looks its key up in several maps (queued changes, the cache and its pins),
/// and hashing the table name and key text each time was a measurable part of a queued write.
struct RowKey: Hashable, Sendable {
    let table: String
    let id: PostgresValue
    private let hash: Int

    init(table: String, id: PostgresValue) {
        self.table = table
        self.id = id
        var hasher = Hasher()
        hasher.combine(table)
        hasher.combine(id)
        self.hash = hasher.finalize()
    }

    static func == (lhs: RowKey, rhs: RowKey) -> Bool {
        lhs.hash == rhs.hash && lhs.table == rhs.table && lhs.id == rhs.id
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(self.hash)
    }

    /// What `Dictionary` and `Set` call: the stored hash mixed with the table's seed by a multiply-xorshift
    /// finaliser, instead of running a seeded `Hasher` over it on every lookup (`Hasher` setup and finalisation
    /// were 4% of a queued write's CPU, which looks its row up in several maps). The stored hash is already a
    /// `Hasher` result, and the mix spreads every bit of hash and seed over the bucket bits.
    func _rawHashValue(seed: Int) -> Int {
        var x = UInt64(truncatingIfNeeded: self.hash) ^ UInt64(truncatingIfNeeded: seed)
        x = (x ^ (x >> 33)) &* 0xff51_afd7_ed55_8ccd
        x = (x ^ (x >> 33)) &* 0xc4ce_b9fe_1a85_ec53
        return Int(truncatingIfNeeded: x ^ (x >> 33))
    }

    init<T: Entity>(_ value: T) throws {
        self.init(table: T.tableName, id: try PostgresValue(value.id))
    }

    init<T: Entity>(_ type: T.Type, id: T.ID) throws {
        self.init(table: T.tableName, id: try PostgresValue(id))
    }
}

/// One context's unsaved changes between two of its saves (see ``BaseVersion/parentChange(_:)``).
struct ContextChange: Sendable, Hashable {
    /// The context (``DataContext/id``).
    let context: UInt64
    /// How many times it had saved (or reset) when the change was read.
    let generation: UInt64
}

/// The version a change was based on, sent as the expected version of an update or delete.
enum BaseVersion: Sendable, Hashable {
    /// Read from the store or the cache: the version the row had.
    case known(Int64)
    /// Read from a change still queued for commit (the stack's commit `commit`): resolved, when the change set
    /// is built (in commit order), to the version that commit produced. When that is not known — the commit
    /// failed or wrote nothing (the store won), or a later commit of the stack wrote the row — to
    /// ``unknownVersion``, so that the write conflicts instead of going out unguarded.
    case pending(commit: UInt64)
    /// Read from an ancestor context's own unsaved change of the row: that context's, as it was before its
    /// save number `generation`. When this context's change reaches that context, it is merged with that
    /// change (whose base stands), or — when that context has saved it since — takes the base the save gave
    /// it: ``pending(commit:)`` for a save into the commit queue, this case again (naming its own parent) for a
    /// save into its parent, ``unknownVersion`` when it discarded the change. Contexts in between pass it on.
    case parentChange(ContextChange)
    /// No optimistic check (the row was not read, or was created in the same change).
    case none

    /// The expected version of a write whose base is no longer known: no row has it, so the write conflicts
    /// (or, under ``MergePolicy/storeWins``, is dropped).
    static let unknownVersion: Int64 = -1
}
