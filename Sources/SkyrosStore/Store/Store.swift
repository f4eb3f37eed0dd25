import Foundation
import SkyrosPostgres

/// The explicit opt-in that ``Store/destroy(confirm:)`` requires.
public enum DestroyConfirmation: Sendable {
    /// "I understand this deletes data."
    case iUnderstandThisDeletesData
}

/// Where entities live: PostgreSQL (``PostgresStore``) or memory (``InMemoryStore``), with the same semantics.
///
/// Reads return ``Versioned`` rows; writes are ``ChangeSet``s applied atomically, each written row reporting
/// its new version. Typed conveniences (`insert`, `update`, `delete`, `upsert`, `bulkInsert`) wrap a
/// one-operation change set.
///
/// ```swift
/// let store: any Store = .inMemory                 // or PostgresStore(pool: pool, schema: "tenant_a")
/// try await store.insert(User(id: 1, name: "Ada"))
/// let adults = try await store.fetch(FetchDescriptor<User>(predicate: #Predicate { $0.age >= 18 }))
/// try await store.update(adults[0].value, changedColumns: ["name"], expectedVersion: adults[0].version)
/// ```
///
/// ## Topics
/// - ``fetch(_:)``
/// - ``fetchPage(_:after:)``
/// - ``count(_:)``
/// - ``aggregate(_:_:)``
/// - ``aggregate(_:groupBy:_:)->[(K,(V))]``
/// - ``aggregate(_:groupBy:_:)->[((K1,K2),(V))]``
/// - ``fetch(_:as:propertiesToFetch:)``
/// - ``evaluate(_:)``
/// - ``object(_:id:)``
/// - ``findOrCreate(_:)``
/// - ``apply(_:)``
/// - ``destroy(confirm:)``
/// - ``generation``
public protocol Store: Sendable {
    /// Changes every time the store is destroyed; contexts created before compare it and refuse to work.
    var generation: Int { get }

    /// The rows matching a descriptor (predicate, sort, limit, offset), each with its version.
    func fetch<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> [Versioned<T>]

    /// The number of rows matching the descriptor's predicate (and window, when it has one).
    func count<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> Int

    /// Evaluates an aggregate or a projection (the typed `aggregate` and `fetch(_:as:)` methods build the
    /// request). The default implementation fetches the descriptor's rows and computes the result in memory;
    /// ``PostgresStore`` runs it as one SQL statement.
    /// - Throws: ``QueryError`` for an untranslatable descriptor or a key path that is not a column, `PGError`.
    func evaluate<T: Entity>(_ request: AggregateRequest<T>) async throws -> AggregateRows

    /// The row with a primary key, or `nil`.
    func object<T: Entity>(_ type: T.Type, id: T.ID) async throws -> Versioned<T>?

    /// Inserts `value` unless a row with its primary key exists; returns the stored row either way.
    /// Race-free across processes (`INSERT … ON CONFLICT (id) DO NOTHING RETURNING`, then a select).
    func findOrCreate<T: Entity>(_ value: T) async throws -> (value: Versioned<T>, created: Bool)

    /// Applies every operation in one transaction: all succeed or nothing is written.
    /// - Throws: ``StoreError`` (version conflicts, unknown columns, a destroyed store), `PGError`
    ///   (e.g. `.uniqueViolation` with its `PGError/constraint`), ``EntityMappingError``.
    func apply(_ changes: ChangeSet) async throws -> ChangeSetResult

    /// Deletes every row of the store (PostgreSQL: drops and recreates the sandbox schema; without one, empties
    /// the tables of the entities it validated and touches nothing else) and bumps ``generation``.
    /// Nothing else in Skyros ever drops data.
    func destroy(confirm: DestroyConfirmation) async throws
}

extension Store where Self == InMemoryStore {
    /// A new, empty in-memory store.
    public static var inMemory: InMemoryStore { InMemoryStore() }
}

extension Store where Self == PostgresStore {
    /// A store over a connection pool, optionally sandboxed in a schema.
    public static func postgres(pool: PGConnectionPool, schema: String? = nil) -> PostgresStore {
        PostgresStore(pool: pool, schema: schema)
    }
}

extension Store {
    /// Every row of `T` in its default order.
    public func fetch<T: Entity>(_ type: T.Type) async throws -> [Versioned<T>] {
        try await self.fetch(FetchDescriptor<T>())
    }

    /// Inserts a row and returns its version.
    @discardableResult
    public func insert<T: Entity>(_ value: T) async throws -> Int64 {
        var changes = ChangeSet()
        changes.insert(value)
        return try await self.apply(changes).operations[0].first?.version ?? 0
    }

    /// Writes only `changedColumns` of the row with `value.id`; returns the new version, or `nil` when
    /// `changedColumns` is empty (nothing is written).
    /// - Throws: ``StoreError/versionConflict(entity:id:expected:actual:)`` when `expectedVersion` is stale,
    ///   ``StoreError/notFound(entity:id:)`` when the row does not exist, ``StoreError/unknownColumn(entity:column:)``.
    @discardableResult
    public func update<T: Entity>(
        _ value: T, changedColumns: [String], expectedVersion: Int64? = nil
    ) async throws -> Int64? {
        var changes = ChangeSet()
        changes.update(value, changedColumns: changedColumns, expectedVersion: expectedVersion)
        return try await self.apply(changes).operations[0].first?.version
    }

    /// Writes only the columns of the given key paths (as listed in ``Entity/columns``).
    @discardableResult
    public func update<T: Entity>(
        _ value: T, changedKeyPaths: [PartialKeyPath<T>], expectedVersion: Int64? = nil
    ) async throws -> Int64? {
        let columns = try changedKeyPaths.map { keyPath in
            guard let column = T.columns.first(where: { $0.keyPath == keyPath }) else {
                throw StoreError.unknownColumn(entity: String(describing: T.self), column: "\(keyPath)")
            }
            return column.name
        }
        return try await self.update(value, changedColumns: columns, expectedVersion: expectedVersion)
    }

    /// Deletes the row with `id`; returns whether a row was deleted.
    @discardableResult
    public func delete<T: Entity>(_ type: T.Type, id: T.ID, expectedVersion: Int64? = nil) async throws -> Bool {
        var changes = ChangeSet()
        changes.delete(type, id: id, expectedVersion: expectedVersion)
        return try await !self.apply(changes).operations[0].isEmpty
    }

    /// Deletes the rows matching `predicate` and returns their primary keys.
    @discardableResult
    public func delete<T: Entity>(where predicate: Predicate<T>?) async throws -> [T.ID] {
        var changes = ChangeSet()
        changes.delete(where: predicate)
        return try await self.apply(changes).operations[0].map { change in
            guard let text = change.id.text else { throw PGError(kind: .decoding, message: "NULL primary key") }
            return try T.ID(postgresText: ArraySlice(text.utf8), type: change.id.type)
        }
    }

    /// Sets columns of every row matching `predicate` in one statement (see
    /// ``ChangeSet/update(where:set:)``) and returns the primary keys of the rows it updated.
    ///
    /// ```swift
    /// try await store.update(where: #Predicate<Post> { $0.id == 7 }, set: [.set(\.views, to: \.views + 1)])
    /// ```
    @discardableResult
    public func update<T: Entity>(where predicate: Predicate<T>?, set assignments: [ColumnAssignment<T>]) async throws -> [T.ID] {
        var changes = ChangeSet()
        changes.update(where: predicate, set: assignments)
        return try await self.apply(changes).operations[0].map { change in
            guard let text = change.id.text else { throw PGError(kind: .decoding, message: "NULL primary key") }
            return try T.ID(postgresText: ArraySlice(text.utf8), type: change.id.type)
        }
    }

    /// Inserts or overwrites the row; returns its new version.
    @discardableResult
    public func upsert<T: Entity>(_ value: T) async throws -> Int64 {
        var changes = ChangeSet()
        changes.upsert(value)
        return try await self.apply(changes).operations[0].first?.version ?? 0
    }

    /// Inserts many rows; returns their versions in order.
    @discardableResult
    public func bulkInsert<T: Entity>(_ values: [T]) async throws -> [Int64] {
        var changes = ChangeSet()
        changes.bulkInsert(values)
        return try await self.apply(changes).operations[0].map { $0.version ?? 0 }
    }
}
