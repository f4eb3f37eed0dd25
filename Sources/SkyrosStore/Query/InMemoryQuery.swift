import Foundation

/// Evaluates fetch descriptors on values in memory, with the same results as the SQL that
/// ``SQLQueryBuilder`` generates for PostgreSQL: same accepted predicates, same `nil` handling, same tie-break by
/// primary key. Strings compare in code-point order, which is PostgreSQL's on `COLLATE "C"` columns (on a
/// column of another collation, PostgreSQL orders and range-compares by that collation; equality agrees for
/// deterministic collations).
///
/// Predicates are evaluated with Foundation's `Predicate.evaluate` (Swift semantics are the reference; the SQL
/// is generated to match them), with captured dates rounded to microseconds as PostgreSQL rounds the bound
/// parameter (``PredicateDateRounding``). Every call first checks that the predicate and sort are translatable, so the
/// in-memory store rejects exactly what the PostgreSQL store rejects.
///
/// ```swift
/// let page = try InMemoryQuery.apply(
///     FetchDescriptor<User>(predicate: #Predicate { $0.age != nil }, sortBy: [SortDescriptor(\.name)],
///                           fetchLimit: 10, fetchOffset: 20),
///     to: allUsers)
/// ```
package enum InMemoryQuery {
    /// Whether `value` satisfies `predicate` (`true` for a `nil` predicate).
    /// - Parameter targets: where the rows read through references are found (see ``evaluator(_:targets:)``).
    /// - Throws: ``QueryError`` when the predicate has no SQL translation, or reads referenced rows without
    ///   `targets`; errors from `evaluate`.
    package static func matches<T: Entity>(
        _ predicate: Predicate<T>?, _ value: T, targets: (any ReferenceTargetSource)? = nil
    ) throws -> Bool {
        try self.evaluator(predicate, targets: targets)(value)
    }

    /// ``matches(_:_:targets:)`` for many values: the predicate is translated and its dates rounded once.
    ///
    /// A predicate across a relationship (`$0.author.name`) reads each referenced row from `targets`, as the SQL
    /// reads it in the same statement; a missing row reads as `nil`, as the SQL's `NULL`.
    /// - Throws: ``QueryError`` (`unsupportedPredicate`) when the predicate has no SQL translation, or reads
    ///   referenced rows and `targets` is `nil` (an evaluation would see every target as missing).
    package static func evaluator<T: Entity>(
        _ predicate: Predicate<T>?, targets: (any ReferenceTargetSource)? = nil
    ) throws -> @Sendable (T) throws -> Bool {
        guard let predicate, let translation = try SQLQueryBuilder.translation(predicate) else { return { _ in true } }
        let evaluate = PredicateDateRounding.evaluator(predicate, binds: translation.condition.binds)
        guard let first = translation.referencedTypes.first else { return evaluate }
        guard let targets else {
            throw QueryError(
                code: .unsupportedPredicate, entity: String(describing: T.self), construct: "Reference<\(first)>",
                message: "a predicate on \(T.self) that reads \(first) rows through a reference cannot be "
                    + "evaluated in memory here: no source of the referenced rows was given")
        }
        return { value in try ReferenceResolution.evaluate(with: targets) { try evaluate(value) } }
    }

    /// Whether `predicate` reads rows of other tables through references (`$0.author.name`).
    /// - Throws: ``QueryError`` when the predicate has no SQL translation.
    package static func readsReferences<T: Entity>(_ predicate: Predicate<T>?) throws -> Bool {
        !(try SQLQueryBuilder.translation(predicate)?.referencedTypes.isEmpty ?? true)
    }

    /// The values that satisfy `predicate`, in their original order (the predicate is checked once).
    /// - Throws: ``QueryError`` when the predicate has no SQL translation; errors from `evaluate`.
    package static func filter<T: Entity>(
        _ predicate: Predicate<T>?, _ values: [T], targets: (any ReferenceTargetSource)? = nil
    ) throws -> [T] {
        guard predicate != nil else { return values }
        let evaluate = try self.evaluator(predicate, targets: targets)
        return try values.filter { try evaluate($0) }
    }

    /// `values` sorted by `sort` (or `T.defaultSort` when empty), ties broken by the primary key ascending —
    /// the order `SQLQueryBuilder.orderBy` produces. Uses Foundation's `SortDescriptor.compare`, which on Linux
    /// orders strings by code point (`COLLATE "C"`) and `nil` first in ascending order.
    package static func sorted<T: Entity>(_ values: [T], by sort: [SortDescriptor<T>]) -> [T] {
        let descriptors = sort.isEmpty ? T.defaultSort : sort
        return values.enumerated().sorted { a, b in
            for descriptor in descriptors {
                switch descriptor.compare(a.element, b.element) {
                case .orderedAscending: return true
                case .orderedDescending: return false
                case .orderedSame: continue
                }
            }
            switch compareIdentifiers(a.element.id, b.element.id) {
            case .orderedAscending?: return true
            case .orderedDescending?: return false
            case .orderedSame?, nil: return a.offset < b.offset
            }
        }.map(\.element)
    }

    /// Filters (the predicate, and for a keyset page the rows after its cursor), sorts, skips `fetchOffset` and
    /// keeps `fetchLimit` values, like the SQL `SELECT`; `targets` resolves references (``evaluator(_:targets:)``).
    /// - Throws: ``QueryError`` for an untranslatable predicate or sort, or a negative limit or offset.
    package static func apply<T: Entity>(
        _ descriptor: FetchDescriptor<T>, to values: [T], targets: (any ReferenceTargetSource)? = nil
    ) throws -> [T] {
        _ = try SQLQueryBuilder.orderBy(descriptor.sortBy)
        try SQLQueryBuilder.validateWindow(descriptor, T.self)
        var matching = try self.filter(descriptor.predicate, values, targets: targets)
        if let cursor = descriptor.pageAfter {
            let isAfter = try Keyset.evaluator(after: cursor, sort: descriptor.sortBy)
            matching = try matching.filter(isAfter)
        }
        var result = self.sorted(matching, by: descriptor.sortBy)[...]
        if let offset = descriptor.fetchOffset { result = result.dropFirst(offset) }
        if let limit = descriptor.fetchLimit { result = result.prefix(limit) }
        return Array(result)
    }
}

/// Orders two primary keys when their type is `Comparable` (Int, String, UUID…); `nil` otherwise.
private func compareIdentifiers<ID>(_ a: ID, _ b: ID) -> ComparisonResult? {
    guard let a = a as? any Comparable else { return nil }
    return compareOpened(a, b)
}

private func compareOpened<C: Comparable>(_ a: C, _ b: Any) -> ComparisonResult? {
    guard let b = b as? C else { return nil }
    return a < b ? .orderedAscending : (b < a ? .orderedDescending : .orderedSame)
}
