import Foundation
import SkyrosPostgres

/// A many-to-many's join table, as its relationship keeps it.
struct JoinTable: @unchecked Sendable {
    // @unchecked Sendable: a metatype and a Sendable closure.

    /// The join entity (`BookTag`).
    let entity: any Entity.Type
    /// The join table's two foreign keys: to `Root`, then to the target.
    let foreignKeys: @Sendable () throws -> [ForeignKey]
}

extension Relationship {
    /// A many-to-many relationship through a join table: the rows of `Target` that a row of the join entity
    /// `Join` pairs with a row of `Root`. The join table is an ordinary entity with a reference to each side;
    /// declare the relationship on either side (or both), each naming the join entity's reference to its own
    /// type first.
    ///
    /// ```swift
    /// struct Tag: Entity {
    ///     var id: Int64
    ///     var label: String
    ///     var books: ToMany<Book> { ToMany() }
    ///
    ///     static let tableName = "tags"
    ///     static let columns: [EntityColumn<Tag>] = [EntityColumn(\.id, "id"), EntityColumn(\.label, "label")]
    ///     static let relationships: [Relationship<Tag>] = [.manyToMany(\.books, through: \BookTag.tag, \BookTag.book)]
    /// }
    ///
    /// /// The join table: PRIMARY KEY (book_id, tag_id), each column a foreign key ON DELETE CASCADE.
    /// struct BookTag: Entity {
    ///     var book: Reference<Book>
    ///     var tag: Reference<Tag>
    ///     var id: CompositeKey<Reference<Book>, Reference<Tag>> { CompositeKey(self.book, self.tag) }
    ///
    ///     enum CodingKeys: String, CodingKey { case book = "book_id", tag = "tag_id" }
    ///
    ///     static let tableName = "book_tags"
    ///     static let columns: [EntityColumn<BookTag>] = [EntityColumn(\.book, "book_id"), EntityColumn(\.tag, "tag_id")]
    ///     static let primaryKey = PrimaryKey<BookTag>(\.book, \.tag)
    ///     static let relationships: [Relationship<BookTag>] = [
    ///         .toOne(\.book, deleteRule: .cascade), .toOne(\.tag, deleteRule: .cascade),
    ///     ]
    /// }
    /// ```
    ///
    /// The join entity must be among the entities a stack (or ``EntitySchema/validate(_:on:schema:)``) checks:
    /// its two references are checked there as the foreign keys they are, and a many-to-many whose join entity
    /// is missing fails the check with a ``SchemaIssue`` naming both. Deleting a row of either side applies the
    /// join table's delete rules (on the in-memory store too, once the join entity has been written there).
    ///
    /// Prefetched, the relationship answers `PrefetchedResults.related(_:of:)` with the target rows in
    /// `Target`'s default order (then by primary key), one per join row. A PostgreSQL store or snapshot loads it
    /// with one query (the targets joined to the join table, `WHERE join.owner = ANY($1)`); a context with two
    /// (the join rows, then the targets), so that its unsaved changes to either apply.
    /// - Parameters:
    ///   - keyPath: the ``ToMany`` property naming the relationship.
    ///   - owner: the join entity's reference to `Root` (listed in `Join`'s ``Entity/columns``).
    ///   - target: the join entity's reference to `Target` (listed in `Join`'s ``Entity/columns``).
    public static func manyToMany<Join: Entity, Target: Entity>(
        _ keyPath: KeyPath<Root, ToMany<Target>>,
        through owner: KeyPath<Join, Reference<Root>>, _ target: KeyPath<Join, Reference<Target>>
    ) -> Relationship where Root.ID: Codable, Target.ID: Codable {
        let path = SendableKeyPath(keyPath: keyPath)
        let ownerPath = SendableKeyPath(keyPath: owner)
        let targetPath = SendableKeyPath(keyPath: target)
        let foreignKeys: @Sendable () throws -> [ForeignKey] = {
            [
                try RelationshipCatalog.relationship(ownerPath.keyPath, of: Join.self).foreignKey(),
                try RelationshipCatalog.relationship(targetPath.keyPath, of: Join.self).foreignKey(),
            ]
        }
        var relationship = Relationship(
            kind: .manyToMany, keyPath: keyPath, target: Target.self, declaredRule: .noAction,
            resolveForeignKey: { try foreignKeys()[0] },
            prefetch: { owners, nested, source, rows in
                let ids = Self.distinctIDs(of: owners)
                rows.markPrefetched(path.keyPath)
                var fetched: [Target] = []
                if !ids.isEmpty {
                    let pairs = try await source.fetchRelated(
                        ManyToManyFetch(owners: ids, ownerReference: ownerPath.keyPath, targetReference: targetPath.keyPath))
                    var grouped: [Root.ID: [Target]] = [:]
                    var unique = Set<Target.ID>()
                    for pair in pairs {
                        grouped[pair.owner, default: []].append(pair.target)
                        if unique.insert(pair.target.id).inserted { fetched.append(pair.target) }
                    }
                    rows.add(fetched)
                    rows.setChildren(grouped, owner: Root.self, for: path.keyPath)
                }
                try await PrefetchLoader.load(try PrefetchLoader.paths(nested, of: Target.self), owners: fetched, source: source, into: rows)
            })
        relationship.joinTable = JoinTable(entity: Join.self, foreignKeys: foreignKeys)
        return relationship
    }
}

/// What a many-to-many's prefetch reads: the `Target` rows paired with each owner by a `Join` row.
package struct ManyToManyFetch<Owner: Entity, Join: Entity, Target: Entity>: @unchecked Sendable
where Owner.ID: Codable, Target.ID: Codable {
    // @unchecked Sendable: ids (Sendable) and immutable key paths to stored properties.

    /// The owners' ids, each once.
    package let owners: [Owner.ID]
    /// The join entity's reference to the owner.
    package let ownerReference: KeyPath<Join, Reference<Owner>>
    /// The join entity's reference to the target.
    package let targetReference: KeyPath<Join, Reference<Target>>

    /// The join table's column referring to the owner, and its column referring to the target.
    /// - Throws: ``RelationshipError`` (`.notAColumn`) when a reference is not in `Join`'s columns.
    package func joinColumns() throws -> (owner: String, target: String) {
        func column(_ keyPath: AnyKeyPath) throws -> String {
            guard let column = Join.columns.first(where: { $0.keyPath == keyPath }) else {
                throw RelationshipError(
                    code: .notAColumn, entity: String(describing: Join.self), keyPath: "\(keyPath)",
                    message: "the reference is not in \(Join.self).columns: map it to its foreign-key column")
            }
            return column.name
        }
        return (try column(self.ownerReference), try column(self.targetReference))
    }

    /// Pairs the targets with their owners through `joins`: each target in the order of `targets`, once per
    /// join row naming it. What a store's join query returns, computed from the two fetches a context makes.
    package func pair(_ joins: [Join], targets: [Target]) -> [(owner: Owner.ID, target: Target)] {
        var owners: [Target.ID: [Owner.ID]] = [:]
        for join in joins { owners[join[keyPath: self.targetReference].id, default: []].append(join[keyPath: self.ownerReference].id) }
        return targets.flatMap { target in (owners[target.id] ?? []).map { (owner: $0, target: target) } }
    }
}

extension RelatedRowSource {
    /// The default: the join rows of the owners, then their targets, each through the source's descriptor fetch
    /// (so a context's unsaved join rows and targets apply, and the rows enter its cache).
    package func fetchRelated<Owner: Entity, Join: Entity, Target: Entity>(
        _ request: ManyToManyFetch<Owner, Join, Target>
    ) async throws -> [(owner: Owner.ID, target: Target)] where Owner.ID: Codable, Target.ID: Codable {
        try await self.fetchInTwoSteps(request)
    }

    /// The join rows of the owners, then the targets they name: two fetches.
    package func fetchInTwoSteps<Owner: Entity, Join: Entity, Target: Entity>(
        _ request: ManyToManyFetch<Owner, Join, Target>
    ) async throws -> [(owner: Owner.ID, target: Target)] where Owner.ID: Codable, Target.ID: Codable {
        let joins: [Join] = try await self.fetchRelated(
            FetchDescriptor<Join>(predicate: try RelationshipQuery.membership(request.owners.map { Reference($0) }, request.ownerReference)))
        var seen = Set<Target.ID>()
        var ids: [Target.ID] = []
        for join in joins where seen.insert(join[keyPath: request.targetReference].id).inserted {
            ids.append(join[keyPath: request.targetReference].id)
        }
        guard !ids.isEmpty else { return [] }
        let targets: [Target] = try await self.fetchRelated(
            FetchDescriptor<Target>(predicate: try RelationshipQuery.membership(ids, try RelationshipQuery.primaryKeyPath(Target.self))))
        return request.pair(joins, targets: targets)
    }
}

extension ConnectionRowSource {
    /// One query on the leased connection: the targets joined to the join table.
    func fetchRelated<Owner: Entity, Join: Entity, Target: Entity>(
        _ request: ManyToManyFetch<Owner, Join, Target>
    ) async throws -> [(owner: Owner.ID, target: Target)] where Owner.ID: Codable, Target.ID: Codable {
        try await self.store.fetchRelated(request, on: self.connection)
    }
}

extension PostgresStore {
    /// The targets of a many-to-many with their owners, in one query (``SQLQueryBuilder/selectThrough(_:schema:)``).
    /// - Throws: ``RelationshipError``, ``QueryError``, `PGError`.
    package func fetchRelated<Owner: Entity, Join: Entity, Target: Entity>(
        _ request: ManyToManyFetch<Owner, Join, Target>, on connection: PGConnection
    ) async throws -> [(owner: Owner.ID, target: Target)] where Owner.ID: Codable, Target.ID: Codable {
        try await request.run(schema: self.schema, on: connection)
    }
}

extension ManyToManyFetch {
    /// The pairs in one query on `connection` (a store's, or a snapshot's inside its transaction), the tables in
    /// `schema`.
    /// - Throws: ``RelationshipError``, ``QueryError``, `PGError`.
    package func run(schema: String?, on connection: PGConnection) async throws -> [(owner: Owner.ID, target: Target)] {
        let query = try SQLQueryBuilder.selectThrough(self, schema: schema)
        let rows = try await connection.query(query)
        guard !rows.isEmpty else { return [] }
        let targets = try RowDecoder(plan: try EntityPlan<Target>.shared).decode(rows)
        guard let ownerIndex = rows.index(ofColumn: SQLQueryBuilder.ownerAlias) else {
            throw EntityMappingError(entity: String(describing: Join.self), message: "the result has no \(SQLQueryBuilder.ownerAlias) column")
        }
        var pairs: [(owner: Owner.ID, target: Target)] = []
        pairs.reserveCapacity(targets.count)
        for (row, target) in targets.enumerated() {
            pairs.append((try rows[row].decode(Owner.ID.self, at: ownerIndex), target.value))
        }
        return pairs
    }
}

extension ForeignKeyCheck {
    /// One issue per many-to-many of `types` whose join entity is not among `types` (its table and foreign keys
    /// would go unchecked).
    package static func joinEntityIssues(_ types: [any Entity.Type]) -> [SchemaIssue] {
        let listed = Set(types.map { ObjectIdentifier($0) })
        func issues<T: Entity>(_ type: T.Type) -> [SchemaIssue] {
            RelationshipCatalog.relationships(of: T.self).compactMap { relationship in
                guard let join = relationship.joinTable, !listed.contains(ObjectIdentifier(join.entity)) else { return nil }
                var issue = SchemaIssue(
                    entity: String(describing: T.self), column: nil,
                    message: "the many-to-many \(relationship.keyPath) goes through \(join.entity) (table \(join.entity.tableName)), which is not among the entities checked: add \(join.entity).self to them, so that its table and its foreign keys to \(T.tableName) and \(relationship.target.tableName) are checked")
                issue.foreignKey = try? relationship.foreignKey()
                return issue
            }
        }
        return types.flatMap { issues($0) }
    }

    /// ``joinEntityIssues(_:)`` as an error, or `nil` when there is none (an in-memory stack's start check).
    package static func joinEntityMismatch(_ types: [any Entity.Type]) -> SchemaMismatchError? {
        let issues = self.joinEntityIssues(types)
        return issues.isEmpty ? nil : SchemaMismatchError(issues: issues)
    }
}
