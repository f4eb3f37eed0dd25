/// A fetch that cannot be run as asked: an unsupported predicate construct, an unsupported sort, a key path
/// that is not a mapped column, an invalid limit/offset, or a page cursor that does not fit the fetch.
///
/// Thrown both when a descriptor is translated to SQL and when it is evaluated in memory, so the PostgreSQL
/// and in-memory stores accept exactly the same queries. Captured values never appear in the message.
///
/// ```swift
/// do {
///     _ = try await context.fetch(FetchDescriptor<User>(predicate: #Predicate { $0.age! > 3 }))
/// } catch let error as QueryError where error.code == .unsupportedPredicate {
///     print(error.construct)  // "ForcedUnwrap"
/// }
/// ```
public struct QueryError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure. Extensible: more codes may be added.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case unsupportedPredicate, unsupportedSort, unmappedKeyPath, missingPrimaryKey, invalidDescriptor, invalidCursor
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A `PredicateExpressions` node (or a use of one) that has no faithful SQL translation.
        public static let unsupportedPredicate = Code(.unsupportedPredicate)
        /// A sort descriptor that cannot be expressed in SQL (custom comparator, localized string comparator).
        public static let unsupportedSort = Code(.unsupportedSort)
        /// A key path that is not listed in the entity's `columns`.
        public static let unmappedKeyPath = Code(.unmappedKeyPath)
        /// The entity's `columns` has no entry for `\.id`.
        public static let missingPrimaryKey = Code(.missingPrimaryKey)
        /// A negative `fetchLimit` or `fetchOffset`, or a page fetch without a positive `fetchLimit` or with an
        /// offset.
        public static let invalidDescriptor = Code(.invalidDescriptor)
        /// A ``PageCursor`` that does not fit the fetch: another entity, another sort, or values its columns
        /// cannot hold.
        public static let invalidCursor = Code(.invalidCursor)

        public var description: String { self.base.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// The entity type queried (e.g. `User`).
    public var entity: String
    /// The construct at fault: a node name (`ForcedUnwrap`), a key path (`\User.address`), or a field name.
    public var construct: String
    /// A human-readable explanation, naming the entity and the construct.
    public var message: String

    /// Creates an error.
    public init(code: Code, entity: String, construct: String, message: String) {
        self.code = code
        self.entity = entity
        self.construct = construct
        self.message = message
    }

    /// The code, the entity, the construct and the explanation: what to change in the query.
    public var description: String { "QueryError.\(self.code) (\(self.entity), \(self.construct)): \(self.message)" }

    static func unsupportedPredicate(_ entity: String, _ construct: String, _ detail: String) -> QueryError {
        QueryError(
            code: .unsupportedPredicate, entity: entity, construct: construct,
            message: "predicate on \(entity) uses \(construct), which cannot be translated to SQL: \(detail)"
        )
    }
}
