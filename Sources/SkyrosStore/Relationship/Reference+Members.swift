import Foundation

extension Reference {
    /// A column of the row referred to, for predicates across a to-one relationship: `$0.author.name` in a
    /// predicate on books is the name of each book's author.
    ///
    /// ```swift
    /// let byAda = FetchDescriptor<Book>(predicate: #Predicate { $0.author.name == "Ada" && $0.title != "" })
    /// let fromA = FetchDescriptor<Book>(predicate: #Predicate { $0.author.name?.starts(with: "A") == true })
    /// let beforeM = FetchDescriptor<Book>(predicate: #Predicate { ($0.author.name ?? "") < "M" })
    /// ```
    ///
    /// PostgreSQL reads the target row in the same statement (`EXISTS` or a subquery on its primary key); the
    /// in-memory store, and a context holding unsaved or queued changes of either table, read it from their
    /// own rows. Both read it the same way, so a predicate gives the same rows on either store.
    ///
    /// The value is optional: a reference holds only the target's id, so the target is known only while a
    /// store evaluates a predicate. Everywhere else (a book read in your own code) this is `nil`, never a
    /// crash; read the target with a prefetch or `context.object(Author.self, id: book.author.id)`. A missing
    /// target (a `nil` optional reference) reads as `nil`, as Swift compares it: `$0.author.name == "Ada"` is
    /// false for it, `$0.author.name != "Ada"` true. Being optional, the value compares with `<` after `??`,
    /// and calls methods through `?.`.
    ///
    /// - Parameter keyPath: a mapped column of the target (`\Author.name`); through an optional column that is
    ///   a reference, a second level (`$0.author.publisher?.name`).
    public subscript<Value>(dynamicMember keyPath: KeyPath<Target, Value>) -> Value? {
        ReferenceResolution.target(of: self)?[keyPath: keyPath]
    }

    /// An optional column of the row referred to, flattened: `$0.author.publisher` is a
    /// `Reference<Publisher>?`, `nil` when the author has no publisher or is unknown (see the subscript for
    /// non-optional columns).
    ///
    /// ```swift
    /// let published = FetchDescriptor<Book>(predicate: #Predicate { $0.author.publisher != nil })
    /// let byAce = FetchDescriptor<Book>(predicate: #Predicate { $0.author.publisher?.name == "Ace" })
    /// ```
    /// - Parameter keyPath: an optional mapped column of the target.
    public subscript<Value>(dynamicMember keyPath: KeyPath<Target, Value?>) -> Value? {
        ReferenceResolution.target(of: self)?[keyPath: keyPath] ?? nil
    }
}

/// Finds the row a reference refers to while a predicate is evaluated in memory.
package protocol ReferenceTargetSource: Sendable {
    /// The row of `type` with `id`, `nil` when there is none.
    /// - Throws: when the row cannot be read (it fails the evaluation, as a failed statement would).
    func target<T: Entity>(_ type: T.Type, id: T.ID) throws -> T?
}

/// The source of targets for the predicate being evaluated on this thread or task (a task local, so that
/// Foundation's `evaluate`, which knows nothing of stores, reads targets through ``Reference``'s subscripts).
package enum ReferenceResolution {
    @TaskLocal package static var source: (any ReferenceTargetSource)?

    /// The target of `reference`, `nil` outside an evaluation or for a missing row. A source that fails to
    /// read is recorded in ``failure`` and reads as missing; the evaluator rethrows it.
    static func target<T: Entity>(of reference: Reference<T>) -> T? {
        guard let source else { return nil }
        do {
            return try source.target(T.self, id: reference.id)
        } catch {
            failure?.record(error)
            return nil
        }
    }

    /// Where a failed read is recorded during one evaluation.
    @TaskLocal static var failure: ResolutionFailure?

    /// Runs `body` (an evaluation) with `source` resolving references, rethrowing the first read that failed.
    package static func evaluate<R>(with source: any ReferenceTargetSource, _ body: () throws -> R) throws -> R {
        let failure = ResolutionFailure()
        let result = try self.$source.withValue(source) {
            try self.$failure.withValue(failure) { try body() }
        }
        if let error = failure.error { throw error }
        return result
    }
}

/// The first error a ``ReferenceTargetSource`` threw during one evaluation.
final class ResolutionFailure: @unchecked Sendable {
    // @unchecked Sendable: used only on the thread that runs one synchronous evaluation, under `lock`.
    private let lock = NSLock()
    private var first: (any Error)?

    func record(_ error: any Error) { self.lock.withLock { if self.first == nil { self.first = error } } }
    var error: (any Error)? { self.lock.withLock { self.first } }
}

/// Targets held in memory, by type and id: what a context's overlay and tests resolve references from.
package struct ResolvedTargets: ReferenceTargetSource {
    /// Per entity type, a `[T.ID: T]`.
    private var rows: [ObjectIdentifier: any Sendable] = [:]

    package init() {}

    /// Adds `values` (a later value with the same id replaces an earlier one).
    package mutating func add<T: Entity>(_ values: some Sequence<T>) {
        var table = self.rows[ObjectIdentifier(T.self)] as? [T.ID: T] ?? [:]
        for value in values { table[value.id] = value }
        self.rows[ObjectIdentifier(T.self)] = table
    }

    package func target<T: Entity>(_ type: T.Type, id: T.ID) -> T? {
        (self.rows[ObjectIdentifier(T.self)] as? [T.ID: T])?[id]
    }
}
