import SkyrosStore

/// A row found by its primary key, with the version it was read at (see `DataContext.lookup`).
///
/// Not generic on purpose. Code in this module is not specialised for the caller's entity type, so a
/// `(value: T, base: BaseVersion)?` built here makes the runtime look up the metadata of that tuple and its
/// optional on every call: on a cached read by id, that took longer than the lookup itself. Callers cast the
/// value where they need a `T`.
struct FoundRow: Sendable {
    let value: any Entity
    let base: BaseVersion

    init(value: any Entity, base: BaseVersion) {
        self.value = value
        self.base = base
    }

    /// `value` when it is a `T`: `nil` for a deletion, and for a row held as another entity type of the same
    /// table.
    init?<T: Entity>(_ value: (any Entity)?, as type: T.Type, base: BaseVersion) {
        guard let value, value is T else { return nil }
        self.init(value: value, base: base)
    }
}
