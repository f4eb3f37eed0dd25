import Foundation
import SkyrosPostgres
import SkyrosStore

// The query suites' entities and predicate combinators (SQL translation without a server, the differential
// suite against one).

/// The entity the query suites translate and evaluate.
package struct QueryTestRow: Entity, Equatable {
    package var id: Int
    package var name: String
    package var nick: String?
    package var n: Int
    package var m: Int?
    package var score: Double
    package var flag: Bool

    package init(id: Int, name: String, nick: String?, n: Int, m: Int?, score: Double, flag: Bool) {
        (self.id, self.name, self.nick, self.n, self.m, self.score, self.flag) = (id, name, nick, n, m, score, flag)
    }

    package static let tableName = "query_rows"
    package static let columns: [EntityColumn<QueryTestRow>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.nick, "nick"),
        EntityColumn(\.n, "n"), EntityColumn(\.m, "m"), EntityColumn(\.score, "score"), EntityColumn(\.flag, "flag"),
    ]

    /// DDL for the table, its text columns in `collation`. With `"C"` (code-point order, as Swift compares),
    /// every predicate and sort agrees with memory; with another (deterministic) collation, equality, membership
    /// and pattern matches still do, while PostgreSQL orders and range-compares a column by its collation.
    package static func createTable(schema: String, collation: String = "C") -> String {
        """
        CREATE TABLE \(quoteIdentifier(schema)).\(quoteIdentifier(tableName)) (
            "id" bigint PRIMARY KEY, "name" text COLLATE \(quoteIdentifier(collation)) NOT NULL,
            "nick" text COLLATE \(quoteIdentifier(collation)),
            "n" bigint NOT NULL, "m" bigint, "score" double precision NOT NULL, "flag" boolean NOT NULL)
        """
    }

    package var postgresValues: [PGValue] {
        get throws {
            [try PGValue(id), try PGValue(name), try PGValue(nick), try PGValue(n),
             try PGValue(m), try PGValue(score), try PGValue(flag)]
        }
    }
}

/// An entity with a property that is not mapped to a column.
package struct QueryTestUnmapped: Entity {
    package var id: UUID
    package var title: String
    package var note: String

    package init(id: UUID, title: String, note: String) {
        (self.id, self.title, self.note) = (id, title, note)
    }

    package static let tableName = "unmapped"
    package static let columns: [EntityColumn<QueryTestUnmapped>] = [EntityColumn(\.id, "id"), EntityColumn(\.title, "title")]
    package static let defaultSort = [SortDescriptor(\QueryTestUnmapped.title, order: .reverse)]
}

/// Embeds a whole predicate as a node of another, with its variable bound to the outer row — so generated
/// leaves (real `#Predicate` trees) can be combined with `&&`, `||` and `!` at run time. Evaluates exactly like
/// `predicate.evaluate(row)`; translates as the embedded predicate's own tree.
package struct EmbeddedPredicate: StandardPredicateExpression, SQLFragment {
    package typealias Output = Bool
    package let predicate: Predicate<QueryTestRow>
    package let input: PredicateExpressions.Variable<QueryTestRow>

    package init(_ predicate: Predicate<QueryTestRow>, _ input: PredicateExpressions.Variable<QueryTestRow>) {
        self.predicate = predicate
        self.input = input
    }

    package func evaluate(_ bindings: PredicateBindings) throws -> Bool {
        try self.predicate.evaluate(try self.input.evaluate(bindings))
    }

    package func writeSQL(into writer: inout SQLWriter) throws {
        try writer.writeCondition(self.predicate)
    }

    package init(from decoder: any Decoder) throws {
        throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "test-only node"))
    }

    package func encode(to encoder: any Encoder) throws {
        throw EncodingError.invalidValue(self, .init(codingPath: [], debugDescription: "test-only node"))
    }
}

package enum Combine {
    package static func and(_ a: Predicate<QueryTestRow>, _ b: Predicate<QueryTestRow>) -> Predicate<QueryTestRow> {
        Predicate { PredicateExpressions.build_Conjunction(lhs: EmbeddedPredicate(a, $0), rhs: EmbeddedPredicate(b, $0)) }
    }

    package static func or(_ a: Predicate<QueryTestRow>, _ b: Predicate<QueryTestRow>) -> Predicate<QueryTestRow> {
        Predicate { PredicateExpressions.build_Disjunction(lhs: EmbeddedPredicate(a, $0), rhs: EmbeddedPredicate(b, $0)) }
    }

    package static func not(_ a: Predicate<QueryTestRow>) -> Predicate<QueryTestRow> {
        Predicate { PredicateExpressions.build_Negation(EmbeddedPredicate(a, $0)) }
    }
}
