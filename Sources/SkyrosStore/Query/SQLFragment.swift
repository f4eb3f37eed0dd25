import Foundation
import SkyrosPostgres

/// A `PredicateExpressions` node that can write itself as SQL.
///
/// Each supported node conforms in `PredicateExpressions+SQL.swift`; the translator dispatches with
/// `expression as? any SQLFragment`, so a node without a conformance is rejected with an error naming it.
///
/// The invariant every conformance keeps: the SQL value is `NULL` exactly when the Swift value is `nil`. Boolean
/// nodes whose Swift output is a non-optional `Bool` therefore never produce `NULL`, and three-valued logic
/// never leaks into `NOT`, `AND` or `OR`.
package protocol SQLFragment {
    /// Appends this node's SQL (a parenthesized expression) to `writer`.
    func writeSQL(into writer: inout SQLWriter) throws
}

/// Accumulates SQL text and bound parameters while a predicate tree is translated.
package struct SQLWriter {
    /// What a predicate variable stands for.
    package enum Binding {
        /// The entity row: key paths on it are columns.
        case row
        /// An SQL expression (already rendered, may reference existing binds), e.g. an unwrapped optional.
        case expression(String)
    }

    /// The SQL text so far, with `$1…$n` placeholders.
    package var sql: String
    /// The bound values, in placeholder order.
    package var binds: [PGValue]
    /// The entity's columns.
    package let metadata: EntityQueryMetadata
    /// Variables in scope.
    package var variables: [PredicateExpressions.VariableID: Binding] = [:]
    /// The schema of the statement's tables; `nil` for the search path.
    package var schema: String?
    /// The row's table as the statement's `FROM` names it (quoted, schema-qualified when `schema` is set).
    package var table: String?
    /// Whether the row's columns are written qualified by ``table``: set when the condition holds a subquery
    /// on a referenced table, whose columns would otherwise shadow the row's.
    package var qualifiesColumns = false
    /// The entity types whose rows the condition reads through references (``Reference``'s members).
    package var referencedTypes: [any Entity.Type] = []
    /// The subquery aliases handed out so far.
    var aliasCount = 0
    /// The row's table name, unquoted (no alias may equal it).
    var tableName: String?

    /// Starts a writer that appends to `sql` (which may already hold binds).
    package init(metadata: EntityQueryMetadata, sql: String = "", binds: [PGValue] = []) {
        self.metadata = metadata
        self.sql = sql
        self.binds = binds
    }

    /// Starts a writer for a statement on `T`'s table in `schema`.
    package init<T: Entity>(_ type: T.Type, schema: String?) throws {
        self.init(metadata: try EntityQueryMetadata.of(T.self))
        self.schema = schema
        self.table = SQLQueryBuilder.table(T.self, schema)
        self.tableName = T.tableName
    }

    /// The entity's name, for messages.
    package var entity: String { self.metadata.entityName }

    /// Appends trusted SQL text.
    package mutating func append(_ text: String) { self.sql += text }

    /// Binds `value` as the next parameter and appends its placeholder.
    package mutating func bind(_ value: PGValue) {
        self.binds.append(value)
        self.sql += "$\(self.binds.count)"
    }

    /// Binds any `PGEncodable` value.
    package mutating func bind<V: PGEncodable>(encodable value: V) throws {
        self.bind(try PGValue(value))
    }

    /// Translates a child node.
    /// - Throws: ``QueryError`` naming the node when it has no SQL translation.
    package mutating func write(_ expression: some PredicateExpression) throws {
        guard let fragment = expression as? any SQLFragment else {
            throw unsupported(expression)
        }
        try fragment.writeSQL(into: &self)
    }

    /// Translates a child node into a separate string (its binds are still added to this writer).
    package mutating func render(_ expression: some PredicateExpression) throws -> String {
        let saved = self.sql
        self.sql = ""
        defer { self.sql = saved }
        try self.write(expression)
        return self.sql
    }

    /// Translates `expression` with `variable` standing for `binding`.
    package mutating func with(
        _ variable: PredicateExpressions.VariableID, boundTo binding: Binding, write expression: some PredicateExpression
    ) throws {
        let previous = self.variables[variable]
        self.variables[variable] = binding
        defer { self.variables[variable] = previous }
        try self.write(expression)
    }

    /// The error for a node that has no translation, named without its captured values.
    package func unsupported(_ expression: some PredicateExpression, _ detail: String? = nil) -> QueryError {
        let name = nodeName(type(of: expression))
        return QueryError.unsupportedPredicate(self.entity, name, detail ?? unsupportedHint(name))
    }

    /// The error for a supported node used with operand types that have no faithful translation.
    package func unsupported(_ construct: String, _ detail: String) -> QueryError {
        QueryError.unsupportedPredicate(self.entity, construct, detail)
    }
}

/// `ForcedUnwrap` for `PredicateExpressions.ForcedUnwrap<KeyPath<…>, Int>`.
package func nodeName(_ type: Any.Type) -> String {
    let full = String(describing: type)
    return String(full.prefix { $0 != "<" })
}

private func unsupportedHint(_ name: String) -> String {
    switch name {
    case "ForcedUnwrap":
        return "force unwrap (`!`) throws on nil in Swift and has no SQL equivalent; use `??` or `?.` with `== true`"
    case "SequenceContainsWhere", "SequenceAllSatisfy", "Filter":
        return "closures over sequences are not supported"
    case "TypeCheck", "ConditionalCast", "ForceCast":
        return "type casts are not supported"
    default:
        return "this node has no SQL translation in Skyros (see the Queries article for the supported constructs)"
    }
}
