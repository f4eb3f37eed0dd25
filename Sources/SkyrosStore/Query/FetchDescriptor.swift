import Foundation

/// What to fetch: a predicate, a sort order, and an optional window (offset and limit) — SwiftData's shape.
///
/// ```swift
/// let adults = FetchDescriptor<User>(
///     predicate: #Predicate { ($0.age ?? 0) >= 18 && $0.name.starts(with: "A") },
///     sortBy: [SortDescriptor(\.name), SortDescriptor(\.age, order: .reverse)],
///     fetchLimit: 20
/// )
/// ```
///
/// The same descriptor runs as parameterized SQL on PostgreSQL and in memory (`InMemoryQuery`), with the
/// same results; the Skyros documentation's "Queries" article lists the supported predicate constructs and their
/// semantics.
public struct FetchDescriptor<T: Entity>: Sendable {
    /// The rows to return; `nil` returns every row.
    public var predicate: Predicate<T>?
    /// The order of the results. Empty uses `T.defaultSort`; ties are always broken by the primary key.
    public var sortBy: [SortDescriptor<T>]
    /// The maximum number of rows to return; `nil` for no limit. Must not be negative.
    public var fetchLimit: Int?
    /// The number of leading rows to skip; `nil` or 0 skips none. Must not be negative.
    public var fetchOffset: Int?
    /// Only the rows after this cursor's key in the descriptor's order (a keyset page; set by `fetchPage`).
    package var pageAfter: PageCursor?
    /// The relationships to load with the rows, to any depth (see ``PrefetchPath``).
    public var prefetchPaths: [PrefetchPath<T>] = []

    /// Creates a fetch descriptor.
    /// - Parameters:
    ///   - predicate: the rows to return; `nil` for all.
    ///   - sortBy: the order; empty for `T.defaultSort`, then the primary key.
    ///   - fetchLimit: the maximum number of rows; `nil` for no limit.
    ///   - fetchOffset: the number of rows to skip; `nil` for none.
    public init(
        predicate: Predicate<T>? = nil,
        sortBy: [SortDescriptor<T>] = [],
        fetchLimit: Int? = nil,
        fetchOffset: Int? = nil
    ) {
        self.predicate = predicate
        self.sortBy = sortBy
        self.fetchLimit = fetchLimit
        self.fetchOffset = fetchOffset
    }
}
