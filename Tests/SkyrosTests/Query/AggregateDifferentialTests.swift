import Foundation
@_spi(Benchmarks) @testable import SkyrosStore
import SkyrosTestFixtures
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// A row whose columns carry names that would break unquoted or aliased SQL: `n`, `o`, `count`, `"quoted"`,
/// `sum`, `min`, `$1`, `select`, `group`, `max`.
struct AggRow: Entity, Equatable {
    var id: Int
    var grp: Int?           // "n"
    var cat: String         // "o"
    var tag: String?        // "count"
    var label: String?      // "\"quoted\""
    var amount: Int?        // "sum"
    var qty: Int            // "max"
    var score: Double?      // "min"
    var price: Decimal?     // "$1"
    var at: Date?           // "select"
    var flag: Bool          // "group"

    enum CodingKeys: String, CodingKey {
        case id, grp = "n", cat = "o", tag = "count", label = "\"quoted\"", amount = "sum", qty = "max", score = "min"
        case price = "$1", at = "select", flag = "group"
    }

    static let tableName = "agg rows"
    static let columns: [EntityColumn<AggRow>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.grp, "n"), EntityColumn(\.cat, "o"), EntityColumn(\.tag, "count"),
        EntityColumn(\.label, "\"quoted\""), EntityColumn(\.amount, "sum"), EntityColumn(\.qty, "max"),
        EntityColumn(\.score, "min"), EntityColumn(\.price, "$1"), EntityColumn(\.at, "select"),
        EntityColumn(\.flag, "group"),
    ]

    static let createSQL = """
        CREATE TABLE %@ (id bigint PRIMARY KEY, "n" integer, "o" text NOT NULL, "count" text, \"\"\"quoted\"\"\" text,
            "sum" bigint, "max" bigint NOT NULL, "min" double precision, "$1" numeric, "select" timestamptz,
            "group" boolean NOT NULL)
        """
}

/// A projection of ``AggRow`` onto some of its columns (keys name the columns, as the entity's do).
struct AggProjection: Decodable, Equatable, Sendable {
    var id: Int
    var grp: Int?
    var label: String?
    var price: Decimal?
    var at: Date?

    enum CodingKeys: String, CodingKey {
        case id, grp = "n", label = "\"quoted\"", price = "$1", at = "select"
    }
}

/// Generated aggregates and projections, run on the in-memory store and on PostgreSQL, must give the same typed
/// results exactly.
///
/// Doubles are compared exactly: generated doubles are multiples of 1/8 below 2^7 in magnitude, so every sum
/// of a few hundred of them is exact in any order (a `Double` sum of inexact values depends on the order of
/// addition, which SQL leaves undefined), and an average is that exact sum divided by the count in `Double` on
/// both sides. Averages of integers and decimals are `Decimal` values compared exactly: the in-memory store
/// reproduces PostgreSQL's `numeric` division scale and rounding.
@Suite("Query: aggregate differential (in-memory vs PostgreSQL)")
struct AggregateDifferentialTests {
    static let seed: UInt64 = 0xA66_2E6A
    static let atoms = ["", "a", "A", "b", "Z", "é", "É", "日本", "😀", "ß", "%", "'", "\"", " ", "1", "10", "2"]

    struct Generator {
        var rng: SeededGenerator

        mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self.rng) }
        mutating func maybe<V>(_ make: (inout Generator) -> V) -> V? { self.int(0...3) == 0 ? nil : make(&self) }
        mutating func string() -> String {
            (0..<self.int(0...2)).map { _ in AggregateDifferentialTests.atoms.randomElement(using: &self.rng)! }.joined()
        }
        mutating func double() -> Double { Double(self.int(-1000...1000)) / 8 }
        mutating func decimal() -> Decimal { Decimal(self.int(-3000...3000)) / 100 }
        /// Whole quarters of a second: exact in microseconds.
        mutating func date() -> Date { Date(timeIntervalSince1970: 1_800_000_000 + Double(self.int(0...400)) / 4) }

        mutating func row(id: Int) -> AggRow {
            AggRow(
                id: id, grp: self.maybe { $0.int(0...4) }, cat: self.string(), tag: self.maybe { $0.string() },
                label: self.maybe { ["x", "y", "\"q\"", "$1"].randomElement(using: &$0.rng)! },
                amount: self.maybe { $0.int(-50...50) }, qty: self.int(0...1000), score: self.maybe { $0.double() },
                price: self.maybe { $0.decimal() }, at: self.maybe { $0.date() }, flag: self.int(0...1) == 0)
        }
    }

    static let predicates: [@Sendable (inout Generator) -> Predicate<AggRow>?] = [
        { _ in nil },
        { _ in nil },
        { g in let i = g.int(-50...50); return #Predicate { ($0.amount ?? 0) > i } },
        { g in let s = g.string(); return #Predicate { $0.cat >= s } },
        { _ in #Predicate { $0.tag == nil } },
        { _ in #Predicate { $0.grp != nil } },
        { g in let d = g.double(); return #Predicate { ($0.score ?? 0) < d } },
        { _ in #Predicate { $0.flag } },
        { g in let x = g.decimal(); return #Predicate { ($0.price ?? 0) >= x } },
        { g in let x = g.date(); return #Predicate { ($0.at ?? x) <= x } },
        { g in let k = g.int(2...5), r = g.int(0...1); return #Predicate { $0.qty % k == r } },
        { _ in #Predicate { $0.qty < 0 } },   // no rows: empty groups and an empty ungrouped aggregate
    ]

    /// Every function over int, double, decimal, string and date columns (nullable and not).
    static func evaluate(
        _ store: some Store, _ descriptor: FetchDescriptor<AggRow>, groupBy: Int
    ) async throws -> [String] {
        func all<K: Decodable & Sendable & Equatable>(_ keyPath: KeyPath<AggRow, K>) async throws -> [String] {
            let groups = try await store.aggregate(
                descriptor, groupBy: keyPath, .count, .count(\.tag), .sum(\.amount), .avg(\.amount), .min(\.amount),
                .max(\.amount), .sum(\.qty), .avg(\.qty), .sum(\.score), .avg(\.score), .min(\.score), .max(\.score),
                .sum(\.price), .avg(\.price), .min(\.price), .max(\.price), .min(\.cat), .max(\.cat), .min(\.tag),
                .max(\.tag), .min(\.at), .max(\.at), .count(\.at))
            return groups.map { "\(canonical($0.key)) → \(describe($0.values))" }
        }
        func pairs<K1: Decodable & Sendable, K2: Decodable & Sendable>(
            _ first: KeyPath<AggRow, K1>, _ second: KeyPath<AggRow, K2>
        ) async throws -> [String] {
            let groups = try await store.aggregate(
                descriptor, groupBy: (first, second), .count, .sum(\.amount), .avg(\.qty), .min(\.score), .max(\.price),
                .min(\.tag), .max(\.at))
            return groups.map { "\(canonical($0.key.0)) | \(canonical($0.key.1)) → \(describe($0.values))" }
        }
        switch groupBy {
        case 8: return try await pairs(\.grp, \.flag)
        case 9: return try await pairs(\.tag, \.label)
        case 10: return try await pairs(\.at, \.cat)
        case 0:
            let values = try await store.aggregate(
                descriptor, .count, .count(\.tag), .sum(\.amount), .avg(\.amount), .min(\.amount), .max(\.amount),
                .sum(\.qty), .avg(\.qty), .sum(\.score), .avg(\.score), .min(\.score), .max(\.score), .sum(\.price),
                .avg(\.price), .min(\.price), .max(\.price), .min(\.cat), .max(\.cat), .min(\.tag), .max(\.tag),
                .min(\.at), .max(\.at), .count(\.at))
            return [describe(values)]
        case 1: return try await all(\.grp)
        case 2: return try await all(\.cat)
        case 3: return try await all(\.tag)
        case 4: return try await all(\.label)
        case 5: return try await all(\.flag)
        case 6: return try await all(\.at)
        case 7: return try await all(\.price)
        default: preconditionFailure("no group-by case \(groupBy)")
        }
    }

    @Test func generatedAggregatesAndProjectionsAgree() async throws {
        var g = Generator(rng: SeededGenerator(seed: Self.seed))
        let schema = try await TestServer.makeSchema("agg_diff")
        let pool = PGConnectionPool(configuration: .init(maximumConnections: 2), postgres: try TestServer.configuration)
        let postgres = PostgresStore(pool: pool, schema: schema)
        let table = quoteIdentifier(schema) + "." + quoteIdentifier(AggRow.tableName)
        try await withCleanup {
            try await pool.withConnection { _ = try await $0.execute(script: String(format: AggRow.createSQL, table)) }
            var cases = 0
            var mismatches = 0
            var emptyGroups = 0
            var nonEmptyGroups = 0
            var nullGroupKeys = 0
            var projections = 0
            var pairCases = 0
            var id = 0
            for size in [0, 1, 3, 12, 40, 150] {
                try await pool.withConnection { _ = try await $0.execute(script: "DELETE FROM \(table)") }
                let memory = InMemoryStore()
                let rows = (0..<size).map { _ in id += 1; return g.row(id: id) }
                if !rows.isEmpty {
                    try await memory.bulkInsert(rows)
                    try await postgres.bulkInsert(rows)
                }
                for _ in 0..<45 {
                    let predicate = Self.predicates.randomElement(using: &g.rng)!(&g)
                    var descriptor = FetchDescriptor<AggRow>(predicate: predicate)
                    if g.int(0...4) == 0 {
                        descriptor.sortBy = [SortDescriptor(\.qty, order: .reverse)]
                        descriptor.fetchLimit = g.int(0...10)
                        descriptor.fetchOffset = g.int(0...3)
                    }
                    let groupBy = g.int(0...10)
                    let expected = try await Self.evaluate(memory, descriptor, groupBy: groupBy)
                    let actual = try await Self.evaluate(postgres, descriptor, groupBy: groupBy)
                    cases += 1
                    if groupBy >= 8 { pairCases += 1 }
                    if groupBy != 0 { if expected.isEmpty { emptyGroups += 1 } else { nonEmptyGroups += 1 } }
                    if expected.contains(where: { $0.hasPrefix("nil ") }) { nullGroupKeys += 1 }
                    if expected != actual {
                        mismatches += 1
                        if mismatches <= 5 {
                            Issue.record("case \(cases) (size \(size), group \(groupBy)) differs: \(descriptor.predicate.map { "\($0.expression)" } ?? "all")\n in memory: \(expected)\n postgres:  \(actual)")
                        }
                    }

                    // A projection of the same rows, ordered and windowed as a fetch.
                    var window = FetchDescriptor<AggRow>(predicate: predicate, sortBy: [SortDescriptor(\.cat)])
                    if g.int(0...1) == 0 { window.fetchLimit = g.int(0...20) }
                    let properties: [PartialKeyPath<AggRow>] = g.int(0...1) == 0 ? [] : [\.id, \.grp, \.label, \.price, \.at]
                    let inMemory = try await memory.fetch(window, as: AggProjection.self, propertiesToFetch: properties)
                    let onServer = try await postgres.fetch(window, as: AggProjection.self, propertiesToFetch: properties)
                    projections += 1
                    if inMemory != onServer {
                        mismatches += 1
                        Issue.record("projection differs (size \(size)):\n in memory: \(inMemory)\n postgres:  \(onServer)")
                    }
                }
            }
            #expect(mismatches == 0)
            #expect(cases >= 200)
            #expect(projections >= 200)
            #expect(pairCases >= 40, "only \(pairCases) cases grouped by two columns")
            #expect(emptyGroups >= 10, "only \(emptyGroups) grouped cases had no groups")
            #expect(nonEmptyGroups >= 100, "only \(nonEmptyGroups) grouped cases had groups")
            #expect(nullGroupKeys >= 20, "only \(nullGroupKeys) cases had a NULL group")
            print("aggregate differential: \(cases) aggregate cases (\(pairCases) grouped by two columns, \(nonEmptyGroups) grouped with groups, \(emptyGroups) grouped without, \(nullGroupKeys) with a NULL group), \(projections) projections, \(mismatches) mismatches")
        } cleanup: {
            await pool.shutdown()
            await TestServer.dropSchema(schema)
        }
    }

    /// The in-memory average's division (`NumericDivision`) against PostgreSQL's `numeric` division, on sums of
    /// every magnitude and scale (the weights and leading base-10000 digits `select_div_scale` reads).
    @Test func numericDivisionMatchesPostgres() async throws {
        var g = Generator(rng: SeededGenerator(seed: Self.seed ^ 0xD1))
        let connection = try await TestServer.connect()
        try await withCleanup {
            var mismatches = 0
            for index in 0..<1_500 {
                let digits = g.int(1...18)
                var text = String(g.int(1...9)) + (1..<digits).map { _ in String(g.int(0...9)) }.joined()
                let decimals = g.int(0...4) == 0 ? g.int(1...8) : 0
                if decimals > 0 {
                    while text.count <= decimals { text = "0" + text }
                    text.insert(".", at: text.index(text.endIndex, offsetBy: -decimals))
                }
                if g.int(0...2) == 0 { text = "-" + text }
                let dividend = try #require(Decimal(string: text))
                let count = [1, 2, 3, 7, 9_999, 10_000, 10_001, 123_456][g.int(0...7)] * (g.int(0...3) == 0 ? 1 : g.int(1...9))
                let expected = NumericDivision.quotient(dividend, scale: NumericDivision.displayScale(dividend), dividedBy: count)
                let bound = try #require(try dividend.postgresText())
                let rows = try await connection.query("SELECT (\(bound)::numeric / \(count)::numeric)::text")
                let actual = try #require(Decimal(string: try rows[0].decode(String.self, at: 0)))
                if expected != actual {
                    mismatches += 1
                    if mismatches <= 5 { Issue.record("#\(index): \(text) / \(count): memory \(expected), postgres \(actual)") }
                }
            }
            #expect(mismatches == 0)
        } cleanup: {
            await connection.close()
        }
    }

    /// The generated SQL quotes every identifier, binds every value and aliases nothing.
    @Test func sqlQuotesHostileNames() throws {
        let i = 3
        let request = AggregateDecoding.request(
            FetchDescriptor<AggRow>(predicate: #Predicate { $0.qty > i }), groupBy: [AggregateGroupColumn(\AggRow.label)],
            AggregateFunction<AggRow, Int>.count, .sum(\.amount), .min(\.cat))
        let query = try SQLQueryBuilder.aggregate(request, schema: "s\"x")
        #expect(query.sql == """
            SELECT "\"\"quoted\"\"", count(*), sum("sum")::int8, min("o"::text COLLATE "C") FROM "s""x"."agg rows" \
            WHERE ("max" > $1) GROUP BY "\"\"quoted\"\"" ORDER BY "\"\"quoted\"\""::text COLLATE "C" ASC NULLS FIRST
            """)
        #expect(query.binds.count == 1)
    }
}

/// The values of a tuple of aggregate results, so that two results compare as strings only when every value
/// is equal: decimals by value (not by their text's trailing zeros), dates to the microsecond.
func describe<each V>(_ values: (repeat each V)) -> String {
    var parts: [String] = []
    func add<X>(_ value: X) { parts.append(canonical(value)) }
    repeat add(each values)
    return parts.joined(separator: ", ")
}

func canonical<X>(_ value: X) -> String {
    if let optional = value as? any OptionalMarker, optional.isNil { return "nil" }
    if let decimal = value as? Decimal ?? (value as? Decimal?) ?? nil {
        var text = decimal.description
        if text.contains(".") {
            while text.hasSuffix("0") { text.removeLast() }
            if text.hasSuffix(".") { text.removeLast() }
        }
        return text == "-0" ? "0" : text
    }
    if let date = value as? Date ?? (value as? Date?) ?? nil {
        return "@" + String(Int64((date.timeIntervalSince1970 * 1_000_000).rounded()))
    }
    return "\(value)"
}
