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

    init<T: Entity>(_ value: T) throws {
        self.init(table: T.tableName, id: try PostgresValue(value.id))
    }

    init<T: Entity>(_ type: T.Type, id: T.ID) throws {
        self.init(table: T.tableName, id: try PostgresValue(id))
    }
}

/// The version a change was based on, sent as the expected version of an update or delete.
enum BaseVersion: Sendable, Hashable {
    /// Read from the store or the cache: the version the row had.
    case known(Int64)
    /// Read from a change still queued for commit: resolved to the version that commit produced, when the
    /// change set is built (in commit order).
    case pending
    /// No optimistic check (the row was not read, or was created in the same change).
    case none
}
