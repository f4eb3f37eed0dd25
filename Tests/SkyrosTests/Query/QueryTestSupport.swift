import Foundation
import Skyros
import SkyrosTestFixtures
import SkyrosPostgres

/// The entity the query suites translate and evaluate.
struct QueryTestRow: Entity, Equatable {
    var id: Int
    var name: String
    var nick: String?
    var n: Int
    var m: Int?
    var score: Double
    var flag: Bool

    static let tableName = "query_rows"
    static let columns: [EntityColumn<QueryTestRow>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.nick, "nick"),
        EntityColumn(\.n, "n"), EntityColumn(\.m, "m"), EntityColumn(\.score, "score"), EntityColumn(\.flag, "flag"),
    ]

    /// DDL for the table. Text columns use an ICU collation on purpose: the generated SQL must impose
    /// code-point order itself (`COLLATE "C"`) whatever the column's collation.
    static func createTable(schema: String) -> String {
        """
        CREATE TABLE \(quoteIdentifier(schema)).\(quoteIdentifier(tableName)) (
            "id" bigint PRIMARY KEY, "name" text COLLATE "und-x-icu" NOT NULL, "nick" text COLLATE "und-x-icu",
            "n" bigint NOT NULL, "m" bigint, "score" double precision NOT NULL, "flag" boolean NOT NULL)
        """
    }

    var postgresValues: [PostgresValue] {
        get throws {
            [try PostgresValue(id), try PostgresValue(name), try PostgresValue(nick), try PostgresValue(n),
             try PostgresValue(m), try PostgresValue(score), try PostgresValue(flag)]
        }
    }
}

/// An entity with a property that is not mapped to a column.
struct QueryTestUnmapped: Entity {
    var id: UUID
    var title: String
    var note: String

    static let tableName = "unmapped"
    static let columns: [EntityColumn<QueryTestUnmapped>] = [EntityColumn(\.id, "id"), EntityColumn(\.title, "title")]
    static let defaultSort = [SortDescriptor(\QueryTestUnmapped.title, order: .reverse)]
}

/// The server under test (`DATABASE_URL`, set by scripts/test).
enum QueryTestServer {
    static func connect() async throws -> Connection {
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"] else {
            fatalError("DATABASE_URL is not set: run the integration tests through scripts/test")
        }
        return try await Connection.connect(to: try PostgresConfiguration(url: url))
    }

    /// Creates a uniquely named schema on `connection` and returns its name.
    static func makeSchema(on connection: Connection, prefix: String) async throws -> String {
        let name = "\(prefix)_\(UUID().uuidString.prefix(8).lowercased())"
        try await connection.execute(script: "CREATE SCHEMA \(quoteIdentifier(name))")
        return name
    }

    static func dropSchema(_ name: String, on connection: Connection) async {
        _ = try? await connection.execute(script: "DROP SCHEMA IF EXISTS \(quoteIdentifier(name)) CASCADE")
    }
}


/// Embeds a whole predicate as a node of another, with its variable bound to the outer row — so generated
/// leaves (real `#Predicate` trees) can be combined with `&&`, `||` and `!` at run time. Evaluates exactly like
/// `predicate.evaluate(row)`; translates as the embedded predicate's own tree.
struct EmbeddedPredicate: StandardPredicateExpression, SQLFragment {
    typealias Output = Bool
    let predicate: Predicate<QueryTestRow>
    let input: PredicateExpressions.Variable<QueryTestRow>

    init(_ predicate: Predicate<QueryTestRow>, _ input: PredicateExpressions.Variable<QueryTestRow>) {
        self.predicate = predicate
        self.input = input
    }

    func evaluate(_ bindings: PredicateBindings) throws -> Bool {
        try self.predicate.evaluate(try self.input.evaluate(bindings))
    }

    func writeSQL(into writer: inout SQLWriter) throws {
        try writer.writeCondition(self.predicate)
    }

    init(from decoder: any Decoder) throws {
        throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "test-only node"))
    }

    func encode(to encoder: any Encoder) throws {
        throw EncodingError.invalidValue(self, .init(codingPath: [], debugDescription: "test-only node"))
    }
}

enum Combine {
    static func and(_ a: Predicate<QueryTestRow>, _ b: Predicate<QueryTestRow>) -> Predicate<QueryTestRow> {
        Predicate { PredicateExpressions.build_Conjunction(lhs: EmbeddedPredicate(a, $0), rhs: EmbeddedPredicate(b, $0)) }
    }

    static func or(_ a: Predicate<QueryTestRow>, _ b: Predicate<QueryTestRow>) -> Predicate<QueryTestRow> {
        Predicate { PredicateExpressions.build_Disjunction(lhs: EmbeddedPredicate(a, $0), rhs: EmbeddedPredicate(b, $0)) }
    }

    static func not(_ a: Predicate<QueryTestRow>) -> Predicate<QueryTestRow> {
        Predicate { PredicateExpressions.build_Negation(EmbeddedPredicate(a, $0)) }
    }
}
