import Foundation
import SkyrosPostgres

// Predicates across to-one relationships: `$0.author.name` is `Reference<Author>`'s member subscript, which the
// `#Predicate` macro writes as a key path on the reference (`\Reference<Author>.name`, one component whose
// argument is `\Author.name`) applied to the reference's value (`$0.author`, a column). SQL reads the target's
// column where the target's primary key equals that value:
//
// - in general, a scalar subquery, `(SELECT a."name" FROM "s"."authors" AS a WHERE a."id" = "s"."books"."author_id")`,
//   whose NULL for a missing row (or a NULL reference) is the subscript's `nil`, so every other node composes
//   with it as with an optional column;
// - compared for equality with a captured value, `EXISTS (SELECT 1 FROM … WHERE a."id" = … AND a."name" = $1)`,
//   which the planner turns into a semi-join (an index on the target's column serves it), and `NOT EXISTS` (an
//   anti-join) for `!=`.
//
// The row's columns are then written qualified by the row's table (see `SQLWriter.writeCondition`) and each
// subquery's alias is `__skyros_ref<n>`, never the row's table name: a qualified name cannot be shadowed by a
// column, and an aliased table's own name is hidden inside its subquery, so a table referring to itself
// (`employees.manager_id`) reads the outer row's column.

/// A `Reference` type seen without its target: how the translator finds the target's table and columns.
package protocol SQLReferenceType {
    /// The column of the target that `keyPath` (a member key path of this reference type, such as
    /// `\Reference<Author>.name`) reads; `nil` when it reads no mapped column.
    /// - Throws: ``QueryError`` when the target's columns cannot be mapped.
    static func referencedColumn(_ keyPath: AnyKeyPath) throws -> ReferencedColumn?
    /// `\Reference<Target>.id`: the reference's own value.
    static var idKeyPath: AnyKeyPath { get }
    /// The target's entity type.
    static var targetEntityType: any Entity.Type { get }
}

/// A column of a referenced table, and that table's key.
package struct ReferencedColumn {
    /// The target's entity type.
    package let targetType: any Entity.Type
    /// The target's table name, unquoted.
    package let tableName: String
    /// The target's primary key (`nil` for a composite key, which a single reference column cannot hold).
    package let key: EntityQueryMetadata.Column?
    /// The column read.
    package let column: EntityQueryMetadata.Column
}

extension Reference: SQLReferenceType {
    package static func referencedColumn(_ keyPath: AnyKeyPath) throws -> ReferencedColumn? {
        let members = try ReferenceMembers.of(Target.self)
        guard let column = members.columns[keyPath] else { return nil }
        return ReferencedColumn(targetType: Target.self, tableName: Target.tableName, key: members.key, column: column)
    }

    package static var idKeyPath: AnyKeyPath { \Reference<Target>.id }
    package static var targetEntityType: any Entity.Type { Target.self }
}

/// For one target type, the member key paths of `Reference<Target>` (one per mapped column) and the columns
/// they read; computed once per type.
struct ReferenceMembers: @unchecked Sendable {
    // @unchecked Sendable: immutable key paths (values the standard library does not mark Sendable) and strings.
    let columns: [AnyKeyPath: EntityQueryMetadata.Column]
    let key: EntityQueryMetadata.Column?

    private static let cache = Locked<[ObjectIdentifier: ReferenceMembers]>([:])

    static func of<T: Entity>(_ type: T.Type) throws -> ReferenceMembers {
        let id = ObjectIdentifier(type)
        if let cached = cache.withLock({ $0[id] }) { return cached }
        let metadata = try EntityQueryMetadata.of(T.self)
        var columns: [AnyKeyPath: EntityQueryMetadata.Column] = [:]
        for entityColumn in T.columns {
            guard let typed = entityColumn.keyPath as? any ReferenceMemberPath,
                let member = typed.referenceMemberPath, let column = metadata.columnsByKeyPath[entityColumn.keyPath]
            else { continue }
            columns[member] = column
        }
        let members = ReferenceMembers(columns: columns, key: metadata.primaryKey.count == 1 ? metadata.primaryKey[0] : nil)
        cache.withLock { $0[id] = members }
        return members
    }
}

/// A key path on an entity, which can name the matching member of a reference to that entity.
protocol ReferenceMemberPath {
    /// `\Reference<Root>[dynamicMember: self]` (the flattening subscript for an optional value), as the
    /// `#Predicate` macro writes it; equal key paths compare equal by their argument.
    var referenceMemberPath: AnyKeyPath? { get }
}

extension KeyPath: ReferenceMemberPath where Root: Entity {
    var referenceMemberPath: AnyKeyPath? {
        if let optional = Value.self as? any OptionalReferenceMember.Type { return optional.flattenedMember(of: self, Root.self) }
        return \Reference<Root>[dynamicMember: self]
    }
}

/// `Optional`, which picks the flattening member subscript for a key path to an optional value.
protocol OptionalReferenceMember {
    /// `\Reference<R>[dynamicMember: keyPath]` through the subscript for optional values.
    static func flattenedMember<R: Entity>(of keyPath: AnyKeyPath, _ root: R.Type) -> AnyKeyPath?
}

extension Optional: OptionalReferenceMember {
    static func flattenedMember<R: Entity>(of keyPath: AnyKeyPath, _ root: R.Type) -> AnyKeyPath? {
        guard let typed = keyPath as? KeyPath<R, Wrapped?> else { return nil }
        return \Reference<R>[dynamicMember: typed]
    }
}

// MARK: - Writing

extension SQLWriter {
    /// The referenced column `keyPath` reads, recorded as read by this condition.
    /// - Throws: ``QueryError`` for a key path that reads no mapped column, or a target with a composite key.
    mutating func referencedColumn(
        _ reference: any SQLReferenceType.Type, _ keyPath: AnyKeyPath
    ) throws -> (column: ReferencedColumn, key: EntityQueryMetadata.Column) {
        let target = reference.targetEntityType
        guard let column = try reference.referencedColumn(keyPath) else {
            throw self.unsupported(
                "KeyPath", "\(keyPath) is not a column of \(target): a predicate reads a referenced row's mapped "
                    + "columns (add it to \(target).columns)")
        }
        guard let key = column.key else {
            throw self.unsupported("KeyPath", "\(target) has a composite primary key, which a reference cannot hold")
        }
        self.referencedTypes.append(target)
        return (column, key)
    }

    /// `"schema"."table"` for a table in the statement's schema.
    func qualifiedTable(_ name: String) -> String {
        (self.schema.map { quoteIdentifier($0) + "." } ?? "") + quoteIdentifier(name)
    }

    /// A new subquery alias, quoted: `"__skyros_ref<n>"`, never the row's table name.
    mutating func nextAlias() -> String {
        while true {
            self.aliasCount += 1
            let name = "__skyros_ref\(self.aliasCount)"
            if name != self.tableName { return quoteIdentifier(name) }
        }
    }

    /// `alias."column"`, as text for a String property (as the row's own columns are compared).
    func aliased(_ alias: String, _ column: EntityQueryMetadata.Column) -> String {
        column.isString ? "\(alias).\(column.quoted)::text" : "\(alias).\(column.quoted)"
    }

    /// The value of the referenced column `keyPath` reads, for the reference `root`: a scalar subquery on the
    /// target's primary key (NULL for a NULL reference or a missing row); the reference itself for `.id`.
    mutating func writeReferenceMember(
        _ reference: any SQLReferenceType.Type, of root: some PredicateExpression, keyPath: AnyKeyPath
    ) throws {
        if keyPath == reference.idKeyPath {
            try self.write(root)
            return
        }
        let (column, key) = try self.referencedColumn(reference, keyPath)
        let id = try self.render(root)
        let alias = self.nextAlias()
        self.append(
            "(SELECT \(self.aliased(alias, column.column)) FROM \(self.qualifiedTable(column.tableName)) AS \(alias) "
                + "WHERE \(alias).\(key.quoted) = \(id))")
    }

    /// Writes `lhs == rhs` as `EXISTS`, and `lhs != rhs` as `NOT EXISTS`, when one side is read from a
    /// referenced row (through any number of references) and the other is a captured value that is not `nil`;
    /// `false` (nothing written) otherwise. A missing row (or a `NULL` column) is unequal to the value, as Swift's
    /// `nil` is: `NOT EXISTS` holds for it.
    mutating func writeReferencedEquality(
        _ lhs: some PredicateExpression, _ rhs: some PredicateExpression, negated: Bool
    ) throws -> Bool {
        if let chain = lhs as? any SQLReferencedValueNode, chain.isReferencedValue, let value = rhs as? any SQLValueNode,
            !isNilValue(value.anyValue)
        {
            try self.writeExists(chain, equalTo: rhs, negated: negated)
            return true
        }
        if let chain = rhs as? any SQLReferencedValueNode, chain.isReferencedValue, let value = lhs as? any SQLValueNode,
            !isNilValue(value.anyValue)
        {
            try self.writeExists(chain, equalTo: lhs, negated: negated)
            return true
        }
        return false
    }

    private mutating func writeExists(
        _ chain: any SQLReferencedValueNode, equalTo value: some PredicateExpression, negated: Bool
    ) throws {
        let sql = try chain.existsSQL(&self) { writer, column in "\(column) = \(try writer.render(value))" }
        self.append(negated ? "(NOT \(sql))" : "(\(sql))")
    }

    /// Runs `body` with `variable` standing for `binding`.
    mutating func binding<R>(
        _ variable: PredicateExpressions.VariableID, to binding: Binding, _ body: (inout SQLWriter) throws -> R
    ) rethrows -> R {
        let previous = self.variables[variable]
        self.variables[variable] = binding
        defer { self.variables[variable] = previous }
        return try body(&self)
    }
}

/// Whether `value` is an optional holding `nil`.
private func isNilValue(_ value: Any) -> Bool {
    (value as? any AnyOptional).map { $0.wrappedAny == nil } ?? false
}

/// A node whose value is read from a referenced row: `$0.author.name`, and through an optional reference or a
/// second reference, `$0.coAuthor?.name`, `$0.author.publisher?.name`.
protocol SQLReferencedValueNode {
    /// Whether this node is of that shape (checked before anything is written).
    var isReferencedValue: Bool { get }
    /// SQL that is true exactly when the node's value is not `nil` and `condition` holds of it (given the value's
    /// SQL, an aliased column): nested `EXISTS` on each referenced table's primary key.
    func existsSQL(_ writer: inout SQLWriter, _ condition: (inout SQLWriter, String) throws -> String) throws -> String
}

extension PredicateExpressions.KeyPath: SQLReferencedValueNode {
    var isReferencedValue: Bool {
        guard let reference = Root.Output.self as? any SQLReferenceType.Type else { return false }
        return self.keyPath != reference.idKeyPath
    }

    func existsSQL(_ writer: inout SQLWriter, _ condition: (inout SQLWriter, String) throws -> String) throws -> String {
        guard let reference = Root.Output.self as? any SQLReferenceType.Type else {
            throw writer.unsupported("KeyPath", "\(self.keyPath) is not read from a referenced row")
        }
        let (column, key) = try writer.referencedColumn(reference, self.keyPath)
        let id = try writer.render(self.root)
        let alias = writer.nextAlias()
        let test = try condition(&writer, writer.aliased(alias, column.column))
        return "EXISTS (SELECT 1 FROM \(writer.qualifiedTable(column.tableName)) AS \(alias) WHERE \(alias).\(key.quoted) = "
            + "\(id) AND \(test))"
    }
}

extension PredicateExpressions.OptionalFlatMap: SQLReferencedValueNode {
    var isReferencedValue: Bool { (self.transform as? any SQLReferencedValueNode)?.isReferencedValue ?? false }

    func existsSQL(_ writer: inout SQLWriter, _ condition: (inout SQLWriter, String) throws -> String) throws -> String {
        guard let transform = self.transform as? any SQLReferencedValueNode, transform.isReferencedValue else {
            throw writer.unsupported("OptionalFlatMap", "its transform is not read from a referenced row")
        }
        let variable = self.variable.key
        if let wrapped = self.wrapped as? any SQLReferencedValueNode, wrapped.isReferencedValue {
            // `$0.author.publisher?.name`: the publisher's key is read inside the author's EXISTS.
            return try wrapped.existsSQL(&writer) { writer, reference in
                try writer.binding(variable, to: .expression(reference)) { writer in try transform.existsSQL(&writer, condition) }
            }
        }
        // `$0.coAuthor?.name`: a NULL reference matches no row.
        let reference = try writer.render(self.wrapped)
        return try writer.binding(variable, to: .expression(reference)) { writer in try transform.existsSQL(&writer, condition) }
    }
}
