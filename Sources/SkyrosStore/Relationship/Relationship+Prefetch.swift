import Foundation
import SkyrosPostgres

/// A key path kept by a `@Sendable` closure: key paths to stored properties are immutable values, which the
/// standard library does not mark Sendable.
struct SendableKeyPath<Root, Value>: @unchecked Sendable {
    let keyPath: KeyPath<Root, Value>
}

extension Relationship {
    /// A to-one through the reference at `keyPath` (`Value` is `Reference<Target>` or its optional; `id` reads
    /// the referenced id from it).
    static func makeToOne<Target: Entity, Value>(
        _ keyPath: KeyPath<Root, Value>, to target: Target.Type, deleteRule: DeleteRule, id: @escaping @Sendable (Value) -> Target.ID?
    ) -> Relationship where Target.ID: Codable {
        let path = SendableKeyPath(keyPath: keyPath)
        let resolve: @Sendable () throws -> ForeignKey = {
            guard let column = Root.columns.first(where: { $0.keyPath == path.keyPath }) else {
                throw RelationshipError(
                    code: .notAColumn, entity: String(describing: Root.self), keyPath: "\(path.keyPath)",
                    message: "the reference is not in \(Root.self).columns: map it to its foreign-key column")
            }
            return ForeignKey(
                table: Root.tableName, column: column.name, referencedTable: Target.tableName,
                referencedColumn: try RelationshipQuery.primaryKeyColumn(Target.self), deleteRule: deleteRule)
        }
        return Relationship(
            kind: .toOne, keyPath: keyPath, target: Target.self, declaredRule: deleteRule, resolveForeignKey: resolve,
            prefetch: { owners, nested, source, rows in
                var seen = Set<Target.ID>()
                var ids: [Target.ID] = []
                for owner in owners {
                    if let target = id(owner[keyPath: path.keyPath]), seen.insert(target).inserted { ids.append(target) }
                }
                rows.markPrefetched(path.keyPath)
                var fetched: [Target] = []
                if !ids.isEmpty {
                    let descriptor = FetchDescriptor<Target>(predicate: try RelationshipQuery.membership(ids, try RelationshipQuery.primaryKeyPath(Target.self)))
                    fetched = try await source.fetchRelated(descriptor)
                    rows.add(fetched)
                }
                try await PrefetchLoader.load(try PrefetchLoader.paths(nested, of: Target.self), owners: fetched, source: source, into: rows)
            })
    }

    /// A to-many: the rows of `Target` whose reference at `inverse` (`Value`: `Reference<Root>` or its
    /// optional) refers to an owner. `wrap` makes the reference value of an owner's id.
    static func makeToMany<Target: Entity, Value: Equatable & Codable & Sendable>(
        _ keyPath: KeyPath<Root, ToMany<Target>>, inverse: KeyPath<Target, Value>, wrap: @escaping @Sendable (Root.ID) -> Value,
        ownerID: @escaping @Sendable (Value) -> Root.ID?
    ) -> Relationship where Root.ID: Codable {
        let path = SendableKeyPath(keyPath: keyPath)
        let inversePath = SendableKeyPath(keyPath: inverse)
        let resolve: @Sendable () throws -> ForeignKey = {
            try RelationshipCatalog.relationship(inversePath.keyPath, of: Target.self).foreignKey()
        }
        return Relationship(
            kind: .toMany, keyPath: keyPath, target: Target.self, declaredRule: .noAction, resolveForeignKey: resolve,
            prefetch: { owners, nested, source, rows in
                let ids = Self.distinctIDs(of: owners)
                rows.markPrefetched(path.keyPath)
                var fetched: [Target] = []
                if !ids.isEmpty {
                    let descriptor = FetchDescriptor<Target>(predicate: try RelationshipQuery.membership(ids.map(wrap), inversePath.keyPath))
                    fetched = try await source.fetchRelated(descriptor)
                    rows.add(fetched)
                    var grouped: [Root.ID: [Target]] = [:]
                    for child in fetched {
                        guard let owner = ownerID(child[keyPath: inversePath.keyPath]) else { continue }
                        grouped[owner, default: []].append(child)
                    }
                    rows.setChildren(grouped, owner: Root.self, for: path.keyPath)
                }
                try await PrefetchLoader.load(try PrefetchLoader.paths(nested, of: Target.self), owners: fetched, source: source, into: rows)
            })
    }

    /// The owners' ids, each once, in the owners' order (what a to-many's query looks up).
    static func distinctIDs(of owners: [Root]) -> [Root.ID] {
        var seen = Set<Root.ID>()
        var ids: [Root.ID] = []
        for owner in owners where seen.insert(owner.id).inserted { ids.append(owner.id) }
        return ids
    }

    static func makeToMany<Target: Entity>(
        _ keyPath: KeyPath<Root, ToMany<Target>>, inverse: KeyPath<Target, Reference<Root>>
    ) -> Relationship where Root.ID: Codable {
        self.makeToMany(keyPath, inverse: inverse, wrap: { Reference($0) }, ownerID: { $0.id })
    }

    static func makeToMany<Target: Entity>(
        _ keyPath: KeyPath<Root, ToMany<Target>>, inverse: KeyPath<Target, Reference<Root>?>
    ) -> Relationship where Root.ID: Codable {
        self.makeToMany(keyPath, inverse: inverse, wrap: { Reference($0) }, ownerID: { $0?.id })
    }

    static func makeToOne<Target: Entity>(
        _ keyPath: KeyPath<Root, Reference<Target>>, deleteRule: DeleteRule
    ) -> Relationship where Target.ID: Codable {
        self.makeToOne(keyPath, to: Target.self, deleteRule: deleteRule, id: { $0.id })
    }

    static func makeToOne<Target: Entity>(
        _ keyPath: KeyPath<Root, Reference<Target>?>, deleteRule: DeleteRule
    ) -> Relationship where Target.ID: Codable {
        self.makeToOne(keyPath, to: Target.self, deleteRule: deleteRule, id: { $0?.id })
    }
}

/// The queries relationships run.
enum RelationshipQuery {
    /// `values.contains($0[keyPath: keyPath])`: on PostgreSQL `column = ANY($1)`, every value bound as one
    /// array parameter.
    static func membership<T: Entity, V: Equatable & Codable & Sendable>(_ values: [V], _ keyPath: KeyPath<T, V>) throws -> Predicate<T> {
        // A key path to a stored property is an immutable value: the same reference, seen as Sendable (a
        // marker protocol adds nothing to the existential's layout).
        let sendable = unsafeBitCast(keyPath, to: (any KeyPath<T, V> & Sendable).self)
        return Predicate<T>({ row in
            PredicateExpressions.build_contains(
                PredicateExpressions.build_Arg(values),
                PredicateExpressions.build_KeyPath(root: PredicateExpressions.build_Arg(row), keyPath: sendable))
        })
    }

    /// The column of `T`'s primary key.
    /// - Throws: ``RelationshipError`` when the key has several columns (a ``CompositeKey``): a reference holds
    ///   one id.
    static func primaryKeyColumn<T: Entity>(_ type: T.Type) throws -> String {
        let key = try EntityQueryMetadata.of(T.self).primaryKey
        guard key.count == 1 else {
            throw RelationshipError(
                code: .unsupportedTarget, entity: String(describing: T.self), keyPath: "\\\(T.self).id",
                message: "\(T.self)'s primary key has \(key.count) columns: a Reference refers to an entity by a key of one column")
        }
        return key[0].name
    }

    /// The stored property of `T`'s primary key, as listed in its columns (the `\T.id` written generically
    /// is the protocol requirement's key path, which the column list does not hold).
    static func primaryKeyPath<T: Entity>(_ type: T.Type) throws -> KeyPath<T, T.ID> {
        let name = try self.primaryKeyColumn(T.self)
        guard let keyPath = T.columns.first(where: { $0.name == name })?.keyPath as? KeyPath<T, T.ID> else {
            throw RelationshipError(
                code: .notAColumn, entity: String(describing: T.self), keyPath: "\\\(T.self).id",
                message: "the primary key column \"\(name)\" is not a property of type \(T.ID.self)")
        }
        return keyPath
    }
}
