/// What an upsert conflicts on: the primary key (the default), a set of columns with a unique index, or a
/// named unique constraint, as in PostgreSQL's `INSERT … ON CONFLICT (…) DO UPDATE`.
///
/// With any target, a conflict updates the stored row with every column the app sets (each column of
/// ``Entity/columns`` except the primary key and the columns the database sets, ``DatabaseGenerated``) and
/// raises its version; with a target other than the primary key, the stored row keeps **its** primary key, so
/// the row written may have another id than the value's. NULLs never conflict, as in a unique index: a value
/// with NULL in a conflict column is inserted as a new row.
///
/// ```swift
/// // users.email has a unique index: insert Ada, or update the row that already has her email.
/// let written = try await store.upsert(User(id: 9, email: "ada@example.com", name: "Ada"), onConflict: .columns(\.email))
/// print(written.id)    // the stored row's id: 9 when inserted, the existing row's id when updated
///
/// try await store.upsert(user, onConflict: .constraint("users_email_key"))
/// ```
///
/// The in-memory store matches ``columns(_:)`` targets by the columns' values (it does not model unique
/// indexes, so it cannot refuse columns PostgreSQL has no unique index on) and refuses ``constraint(_:)``
/// with ``UpsertConflictError/constraintNotSupportedInMemory(entity:constraint:)``.
public struct UpsertConflict<T: Entity>: Sendable, Hashable, CustomStringConvertible {
    enum Target: Sendable, Hashable {
        case primaryKey
        case columns([String])
        case constraint(String)
    }

    let target: Target

    /// The primary key: `ON CONFLICT (id)`, the default.
    public static var primaryKey: UpsertConflict { UpsertConflict(target: .primaryKey) }

    /// Columns, given by key path, covered together by a unique index: `ON CONFLICT ("email")`.
    /// - Parameter keyPaths: stored properties listed in ``Entity/columns``; one that is not fails the write with
    ///   ``StoreError/unknownColumn(entity:column:)``.
    public static func columns(_ keyPaths: PartialKeyPath<T>...) -> UpsertConflict {
        UpsertConflict(target: .columns(keyPaths.map { keyPath in
            T.columns.first(where: { $0.keyPath == keyPath })?.name ?? "\(keyPath)"
        }))
    }

    /// Columns, given by column name (as in ``Entity/columns``), covered together by a unique index.
    public static func columns(named names: [String]) -> UpsertConflict { UpsertConflict(target: .columns(names)) }

    /// A unique (or primary key) constraint of the entity's table, by name: `ON CONFLICT ON CONSTRAINT "name"`.
    /// PostgreSQL only.
    public static func constraint(_ name: String) -> UpsertConflict { UpsertConflict(target: .constraint(name)) }

    /// Throws ``StoreError/unknownColumn(entity:column:)`` for a conflict column the entity does not declare, and
    /// ``UpsertConflictError/noUniqueIndex(entity:columns:sqlState:)`` for an empty list of columns.
    package func checkColumns() throws {
        if case .columns(let names) = self.target { _ = try EntityChange<T>.conflictIndices(names, plan: EntityPlan<T>.shared) }
    }

    /// Whether the target is the primary key (the upsert then writes the value's own row).
    public var isPrimaryKey: Bool { self.target == .primaryKey }

    /// `primary key`, `columns (email)` or `constraint users_email_key`.
    public var description: String {
        switch self.target {
        case .primaryKey: "primary key"
        case .columns(let names): "columns (\(names.joined(separator: ", ")))"
        case .constraint(let name): "constraint \(name)"
        }
    }
}
