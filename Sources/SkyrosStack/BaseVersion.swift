import SkyrosStore

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
    static let unknownVersion: Int64 = unknownRowVersion
}
