import Foundation
@_spi(Benchmarks) @testable import Skyros
@testable import SkyrosObservation
@testable import SkyrosStack
@testable import SkyrosStore
@testable import SkyrosSync
import SkyrosTestFixtures
import SkyrosPostgres
import SkyrosTestSupport
import SkyrosTestEntities
import Testing

/// Generated predicates, sorts and windows run both in memory and on PostgreSQL must return the same ordered ids.
@Suite("Query: differential (in-memory vs PostgreSQL)")
struct PredicateDifferentialTests {
    typealias Row = QueryTestRow
    static let seed: UInt64 = 0x5C_1205
    static let predicateCount = 1_500

    /// Pieces of generated strings: empty, ASCII case pairs, LIKE meta-characters, SQL quoting, and NFC non-ASCII
    /// text whose case mappings agree between Swift and ICU (ß→SS, final sigma, ligatures, titlecase digraphs).
    static let atoms = [
        "", "a", "A", "b", "B", "z", "Z", "abc", "ABC", "%", "_", "\\", "a%", "_b", "\\%", "%_\\", "'", "\"", "é", "É",
        "ß", "SS", "ss", "Σ", "σ", "ς", "ΌΣΟΣ", "όσος", "ü", "Ü", "日本", "😀", "ǅ", "ﬁ", " ", "1", "10", "2", "$1", "--",
        "naïve",
    ]

    struct Generator {
        var rng: SeededGenerator

        mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self.rng) }
        mutating func bool() -> Bool { Bool.random(using: &self.rng) }
        mutating func string() -> String {
            (0..<self.int(0...3)).map { _ in PredicateDifferentialTests.atoms.randomElement(using: &self.rng)! }.joined()
        }
        mutating func optionalString() -> String? { self.int(0...3) == 0 ? nil : self.string() }
        mutating func optionalInt() -> Int? { self.int(0...3) == 0 ? nil : self.int(-50...50) }
        mutating func nonZero() -> Int { let k = self.int(1...7); return self.bool() ? k : -k }
        mutating func double() -> Double {
            let special: [Double] = [-2.5, -1, -0.0, 0, 0.1, 0.2, 0.30000000000000004, 1, 1.5, 3.25, 1e10, -1e-5]
            return self.bool() ? special.randomElement(using: &self.rng)! : Double(self.int(-1000...1000)) / 8
        }

        mutating func row(id: Int) -> Row {
            Row(id: id, name: self.string(), nick: self.optionalString(), n: self.int(-50...50), m: self.optionalInt(),
                score: self.double(), flag: self.bool())
        }
    }

    /// One `#Predicate` per template, with freshly generated captured values.
    static let templates: [@Sendable (inout Generator) -> Predicate<Row>] = [
        { g in let s = g.string(); return #Predicate { $0.name == s } },
        { g in let s = g.string(); return #Predicate { $0.name != s } },
        { g in let s = g.string(); return #Predicate { $0.name < s } },
        { g in let s = g.string(); return #Predicate { $0.name <= s } },
        { g in let s = g.string(); return #Predicate { $0.name > s } },
        { g in let s = g.string(); return #Predicate { $0.name >= s } },
        { g in let s = g.optionalString(); return #Predicate { $0.nick == s } },
        { g in let s = g.optionalString(); return #Predicate { $0.nick != s } },
        { _ in #Predicate { $0.nick == nil } },
        { _ in #Predicate { $0.m != nil } },
        { g in let i = g.int(-50...50); return #Predicate { $0.n < i } },
        { g in let i = g.int(-50...50); return #Predicate { $0.n == i } },
        { g in let i = g.optionalInt(); return #Predicate { $0.m == i } },
        { g in let i = g.optionalInt(); return #Predicate { $0.m != i } },
        { g in let i = g.int(-50...50), j = g.int(-50...50); return #Predicate { ($0.m ?? i) >= j } },
        { g in let s = g.string(); return #Predicate { $0.name.contains(s) } },
        { g in let s = g.string(); return #Predicate { $0.name.starts(with: s) } },
        { g in let s = g.string(); return #Predicate { $0.nick?.contains(s) == true } },
        { g in let s = g.string(); return #Predicate { $0.nick?.starts(with: s) == false } },
        { g in let s = g.string(); return #Predicate { $0.nick?.contains(s) ?? false } },
        { g in let s = g.string(); return #Predicate { !($0.nick?.contains(s) == true) } },
        { g in let a = (0..<g.int(0...4)).map { _ in g.string() }; return #Predicate { a.contains($0.name) } },
        { g in let a = (0..<g.int(0...4)).map { _ in g.optionalString() }; return #Predicate { a.contains($0.nick) } },
        { g in let a = Set((0..<g.int(0...6)).map { _ in g.int(-50...50) }); return #Predicate { a.contains($0.n) } },
        { g in let s = g.string().localizedLowercase; return #Predicate { $0.name.localizedLowercase == s } },
        { g in let s = g.string().localizedLowercase; return #Predicate { $0.name.localizedLowercase.contains(s) } },
        { g in let s = g.string().localizedUppercase; return #Predicate { $0.name.localizedUppercase.starts(with: s) } },
        { g in let s = g.string(); return #Predicate { $0.nick?.localizedLowercase.contains(s) == true } },
        { g in let s = g.string(); return #Predicate { $0.name.localizedUppercase < s } },
        { _ in #Predicate { $0.name.isEmpty } },
        { g in let k = g.int(0...6); return #Predicate { $0.name.count > k } },
        { _ in #Predicate { $0.nick?.isEmpty == true } },
        { g in let k = g.int(-1...6); return #Predicate { ($0.nick?.count ?? -1) >= k } },
        { g in let k = g.int(0...12); return #Predicate { $0.name.localizedUppercase.count == k } },
        { g in let i = g.int(-50...50), j = g.int(-60...60); return #Predicate { $0.n + i > j } },
        { g in let i = g.int(-9...9), j = g.int(-9...9), k = g.int(-90...90); return #Predicate { $0.n - i * j < k } },
        { g in let k = g.nonZero(), r = g.int(-6...6); return #Predicate { $0.n % k == r } },
        { g in let k = g.nonZero(), r = g.int(-10...10); return #Predicate { $0.n / k == r } },
        { g in let i = g.int(-50...50); return #Predicate { -$0.n > i } },
        { g in let i = g.int(-100...100); return #Predicate { ($0.m ?? 0) * 2 == i } },
        { g in let k = g.nonZero(), r = g.int(-6...6); return #Predicate { ($0.m ?? 0) % k == r } },
        { g in let d = g.double(); return #Predicate { $0.score < d } },
        { g in let d = g.double(); return #Predicate { $0.score == d } },
        { g in let d = Double(g.nonZero()) / 4, e = g.double(); return #Predicate { $0.score / d > e } },
        { g in let d = g.double(), e = g.double(); return #Predicate { $0.score + d >= e } },
        { g in let i = g.int(-50...50), s = g.string(); return #Predicate { ($0.n > i ? $0.name : $0.nick ?? "") == s } },
        { g in let i = g.int(-50...50); return #Predicate { ($0.flag ? $0.n : -$0.n) > i } },
        { g in let a = g.int(-50...50), b = g.int(-50...50); let lo = min(a, b), hi = max(a, b)
            return #Predicate { (lo...hi).contains($0.n) } },
        { g in let a = g.int(-50...50), b = g.int(-50...50); let lo = min(a, b), hi = max(a, b)
            return #Predicate { (lo..<hi).contains($0.n) } },
        { g in let a = g.string(), b = g.string(); let lo = min(a, b), hi = max(a, b)
            return #Predicate { (lo...hi).contains($0.name) } },
        { g in let a = g.int(-50...50), b = g.int(-50...50); let r = min(a, b)...max(a, b)
            return #Predicate { r.contains($0.n) } },
        { _ in #Predicate { $0.flag } },
        { g in let b = g.bool(); return #Predicate { $0.flag == b } },
        { g in let s = g.string(); return #Predicate { $0.name < ($0.nick ?? s) } },
        { _ in #Predicate { $0.nick == $0.nick && $0.name == $0.name } },
        { g in let s = g.string(); return #Predicate { $0.name.contains($0.nick ?? s) } },
        { g in let s = g.string(); return #Predicate { $0.name.starts(with: $0.nick ?? s) } },
        { g in let i = g.int(-50...50); return #Predicate { $0.m.flatMap { $0 > i } ?? false } },
        { g in let i = g.int(-50...50), s = g.string(); return #Predicate { $0.n > i && !$0.flag || $0.name >= s } },
    ]

    /// Every node kind the translator supports; the generated set must exercise each.
    static let supportedNodes: Set<String> = [
        "Conjunction", "Disjunction", "Negation", "Equal", "NotEqual", "Comparison", "Arithmetic", "IntDivision",
        "IntRemainder", "FloatDivision", "UnaryMinus", "Conditional", "NilCoalesce", "OptionalFlatMap",
        "SequenceContains", "SequenceStartsWith", "CollectionContainsCollection", "RangeExpressionContains", "Range",
        "ClosedRange", "KeyPath", "Value", "Variable", "NilLiteral",
    ]

    static func nodeNames(in predicate: Predicate<Row>) -> Set<String> {
        let text = String(describing: type(of: predicate.expression))
        var names: Set<String> = []
        var word = ""
        for character in text {
            if character.isLetter || character.isNumber || character == "_" { word.append(character); continue }
            if !word.isEmpty { names.insert(word) }
            word = ""
        }
        if !word.isEmpty { names.insert(word) }
        return names
    }

    mutating func predicate(_ g: inout Generator, depth: Int) -> Predicate<Row> {
        switch depth > 0 ? g.int(0...5) : 0 {
        case 0, 1, 2: return Self.templates.randomElement(using: &g.rng)!(&g)
        case 3: return Combine.not(self.predicate(&g, depth: depth - 1))
        case 4: return Combine.and(self.predicate(&g, depth: depth - 1), self.predicate(&g, depth: depth - 1))
        default: return Combine.or(self.predicate(&g, depth: depth - 1), self.predicate(&g, depth: depth - 1))
        }
    }

    static func sort(_ g: inout Generator) -> [SortDescriptor<Row>] {
        let choices: [(SortOrder) -> SortDescriptor<Row>] = [
            { SortDescriptor(\.name, order: $0) }, { SortDescriptor(\.nick, order: $0) },
            { SortDescriptor(\.n, order: $0) }, { SortDescriptor(\.m, order: $0) },
            { SortDescriptor(\.score, order: $0) }, { SortDescriptor(\.name, comparator: .lexical, order: $0) },
        ]
        return (0..<g.int(0...2)).map { _ in choices.randomElement(using: &g.rng)!(g.bool() ? .forward : .reverse) }
    }

    @Test mutating func generatedPredicatesAgree() async throws {
        var g = Generator(rng: SeededGenerator(seed: Self.seed))
        var rows = (1...400).map { g.row(id: $0) }
        // Edge rows: every LIKE meta-character, empty strings, NULLs.
        rows.append(Row(id: 401, name: #"%_\"#, nick: "", n: 0, m: nil, score: -0.0, flag: false))
        rows.append(Row(id: 402, name: "", nick: nil, n: -50, m: 0, score: 0, flag: true))

        let schema = try await TestServer.makeSchema("query_diff")
        let connection = try await TestServer.connect()
        do {
            try await connection.execute(script: Row.createTable(schema: schema))
            try await connection.copyFrom(
                table: [schema, Row.tableName], columns: Row.columns.map(\.name), rows: try rows.map { try $0.postgresValues })

            var covered: Set<String> = []
            var nonTrivial = 0
            var mismatches = 0
            for index in 0..<Self.predicateCount {
                let predicate = self.predicate(&g, depth: 2)
                covered.formUnion(Self.nodeNames(in: predicate))
                let limit = g.int(0...3) == 0 ? g.int(0...25) : nil
                let offset = g.int(0...3) == 0 ? g.int(0...30) : nil
                let descriptor = FetchDescriptor(predicate: predicate, sortBy: Self.sort(&g), fetchLimit: limit, fetchOffset: offset)

                let expected = try InMemoryQuery.apply(descriptor, to: rows).map(\.id)
                let query = try SQLQueryBuilder.select(descriptor, schema: schema, includeVersion: false)
                let actual = try await connection.query(query).map { try $0.decode(Int.self, column: "id") }
                let unfiltered = try InMemoryQuery.filter(predicate, rows).count
                if unfiltered > 0 && unfiltered < rows.count { nonTrivial += 1 }
                if expected != actual {
                    mismatches += 1
                    if mismatches <= 5 {
                        Issue.record("""
                            predicate #\(index) (seed \(Self.seed)) differs:
                              predicate: \(predicate.expression)
                              sort: \(descriptor.sortBy.map { "\($0.keyPath.map { "\($0)" } ?? "?") \($0.order)" }) limit: \(limit.map(String.init) ?? "nil") offset: \(offset.map(String.init) ?? "nil")
                              sql: \(query.sql)
                              in memory: \(expected)
                              postgres:  \(actual)
                            """)
                    }
                }
            }
            #expect(mismatches == 0)
            #expect(Self.supportedNodes.subtracting(covered).isEmpty, "not generated: \(Self.supportedNodes.subtracting(covered))")
            #expect(nonTrivial > Self.predicateCount / 2, "only \(nonTrivial) predicates selected a proper subset")
        } catch {
            await TestServer.dropSchema(schema)
            await connection.close()
            throw error
        }
        await TestServer.dropSchema(schema)
        await connection.close()
    }

    /// Templates whose result does not depend on string order: equality, membership, pattern matches, case
    /// folding, lengths, and everything on numbers.
    static let orderFreeTemplates: [@Sendable (inout Generator) -> Predicate<Row>] = [
        { g in let s = g.string(); return #Predicate { $0.name == s } },
        { g in let s = g.string(); return #Predicate { $0.name != s } },
        { g in let s = g.optionalString(); return #Predicate { $0.nick == s } },
        { g in let s = g.optionalString(); return #Predicate { $0.nick != s } },
        { _ in #Predicate { $0.nick == nil } },
        { g in let a = (0..<g.int(0...4)).map { _ in g.string() }; return #Predicate { a.contains($0.name) } },
        { g in let a = (0..<g.int(0...4)).map { _ in g.optionalString() }; return #Predicate { a.contains($0.nick) } },
        { g in let s = g.string(); return #Predicate { $0.name.contains(s) } },
        { g in let s = g.string(); return #Predicate { $0.name.starts(with: s) } },
        { g in let s = g.string(); return #Predicate { $0.nick?.contains(s) == true } },
        { g in let s = g.string().localizedLowercase; return #Predicate { $0.name.localizedLowercase == s } },
        { g in let s = g.string(); return #Predicate { $0.name.localizedUppercase < s } },
        { g in let k = g.int(0...6); return #Predicate { $0.name.count > k } },
        { g in let i = g.int(-50...50), s = g.string(); return #Predicate { ($0.n > i ? $0.name : $0.nick ?? "") == s } },
        { g in let s = g.string(); return #Predicate { $0.name < ($0.nick ?? s) } },
        { g in let i = g.optionalInt(); return #Predicate { $0.m == i } },
        { g in let i = g.int(-50...50); return #Predicate { $0.n < i } },
    ]

    /// On a column of a non-C (deterministic, ICU) collation, PostgreSQL compares a column with a value in the
    /// column's collation (so its index serves it): predicates that do not depend on string order, and sorts
    /// by other columns, still agree with memory.
    @Test func orderFreePredicatesAgreeOnANonCCollation() async throws {
        var g = Generator(rng: SeededGenerator(seed: Self.seed ^ 0xC0))
        let rows = (1...300).map { g.row(id: $0) }
        let schema = try await TestServer.makeSchema("query_diff_icu")
        let connection = try await TestServer.connect()
        try await withCleanup {
            try await connection.execute(script: Row.createTable(schema: schema, collation: "en-US-x-icu"))
            try await connection.copyFrom(
                table: [schema, Row.tableName], columns: Row.columns.map(\.name), rows: try rows.map { try $0.postgresValues })
            var mismatches = 0
            var nonTrivial = 0
            for index in 0..<400 {
                var predicate = Self.orderFreeTemplates.randomElement(using: &g.rng)!(&g)
                if g.int(0...2) == 0 { predicate = Combine.and(predicate, Self.orderFreeTemplates.randomElement(using: &g.rng)!(&g)) }
                let sort: [SortDescriptor<Row>] = [[], [SortDescriptor(\.n)], [SortDescriptor(\.m, order: .reverse)], [SortDescriptor(\.score)]]
                    .randomElement(using: &g.rng)!
                let descriptor = FetchDescriptor(predicate: predicate, sortBy: sort, fetchLimit: g.int(0...3) == 0 ? 10 : nil)
                let expected = try InMemoryQuery.apply(descriptor, to: rows).map(\.id)
                let query = try SQLQueryBuilder.select(descriptor, schema: schema, includeVersion: false)
                let actual = try await connection.query(query).map { try $0.decode(Int.self, column: "id") }
                if !expected.isEmpty && expected.count < rows.count { nonTrivial += 1 }
                if expected != actual {
                    mismatches += 1
                    if mismatches <= 5 {
                        Issue.record("predicate #\(index) differs: \(predicate.expression)\n sql: \(query.sql)\n in memory: \(expected)\n postgres: \(actual)")
                    }
                }
            }
            #expect(mismatches == 0)
            #expect(nonTrivial > 150, "only \(nonTrivial) predicates selected a proper subset")
        } cleanup: {
            await TestServer.dropSchema(schema)
            await connection.close()
        }
    }

    /// A row of dates (with sub-microsecond digits before they are stored), UUIDs and decimals.
    struct DatedRow: Entity {
        var id: Int
        var t: Date
        var ot: Date?
        var u: UUID
        var d: Decimal

        static let tableName = "diff_dated"
        static let columns: [EntityColumn<DatedRow>] = [
            EntityColumn(\.id, "id"), EntityColumn(\.t, "t"), EntityColumn(\.ot, "ot"), EntityColumn(\.u, "u"),
            EntityColumn(\.d, "d"),
        ]
    }

    struct DatedGenerator {
        var rng: SeededGenerator
        static let uuids = (0..<8).map { UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", $0 * 7919))! }

        mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self.rng) }
        /// Dates a few microseconds apart with tenths of microseconds (as far as a Double near 1.8e9 holds them):
        /// many round to the same stored value, and captured dates fall between stored ones.
        mutating func date() -> Date {
            Date(timeIntervalSince1970: 1_800_000_000 + Double(self.int(0...12)) / 1_000_000 + Double(self.int(0...9)) / 10_000_000)
        }
        mutating func uuid() -> UUID { Self.uuids.randomElement(using: &self.rng)! }
        mutating func decimal() -> Decimal { Decimal(self.int(-300...300)) / 100 }

        mutating func row(id: Int) -> DatedRow {
            DatedRow(id: id, t: self.date(), ot: self.int(0...3) == 0 ? nil : self.date(), u: self.uuid(), d: self.decimal())
        }
    }

    static let datedTemplates: [@Sendable (inout DatedGenerator) -> Predicate<DatedRow>] = [
        { g in let x = g.date(); return #Predicate { $0.t == x } },
        { g in let x = g.date(); return #Predicate { $0.t != x } },
        { g in let x = g.date(); return #Predicate { $0.t > x } },
        { g in let x = g.date(); return #Predicate { $0.t <= x } },
        { g in let x: Date? = g.int(0...3) == 0 ? nil : g.date(); return #Predicate { $0.ot == x } },
        { g in let x = g.date(), y = g.date(); return #Predicate { ($0.ot ?? y) >= x } },
        { g in let a = g.date(), b = g.date(); let lo = min(a, b), hi = max(a, b); return #Predicate { (lo...hi).contains($0.t) } },
        { g in let a = g.date(), b = g.date(); let lo = min(a, b), hi = max(a, b); return #Predicate { (lo..<hi).contains($0.t) } },
        { g in let a = [g.date(), g.date()]; return #Predicate { a.contains($0.t) } },
        { g in let x = g.uuid(); return #Predicate { $0.u == x } },
        { g in let x = g.uuid(); return #Predicate { $0.u != x } },
        { g in let a = [g.uuid(), g.uuid()]; return #Predicate { a.contains($0.u) } },
        { g in let x = g.decimal(); return #Predicate { $0.d < x } },
        { g in let x = g.decimal(); return #Predicate { $0.d == x } },
        { g in let x = g.decimal(), y = g.date(); return #Predicate { $0.d >= x && $0.t < y } },
        { g in let x = g.uuid(), y = g.date(); return #Predicate { $0.u == x || $0.t == y } },
    ]

    @Test func datesUUIDsAndDecimalsAgree() async throws {
        var g = DatedGenerator(rng: SeededGenerator(seed: Self.seed))
        let rows = (1...300).map { g.row(id: $0) }
        let memory = InMemoryStore()
        var changes = ChangeSet()
        _ = changes.bulkInsert(rows)
        _ = try await memory.apply(changes)

        let schema = try await TestServer.makeSchema("query_diff_dated")
        let connection = try await TestServer.connect()
        try await withCleanup {
            try await connection.execute(script: """
                CREATE TABLE \(quoteIdentifier(schema)).diff_dated (
                    id bigint PRIMARY KEY, t timestamptz NOT NULL, ot timestamptz, u uuid NOT NULL, d numeric NOT NULL)
                """)
            let encoder = try RowEncoder<DatedRow>()
            try await connection.copyFrom(
                table: [schema, DatedRow.tableName], columns: DatedRow.columns.map(\.name), rows: try rows.map { try encoder.encode($0) })
            var mismatches = 0
            var nonTrivial = 0
            for index in 0..<400 {
                let predicate = Self.datedTemplates.randomElement(using: &g.rng)!(&g)
                let sort: [SortDescriptor<DatedRow>] = g.int(0...1) == 0 ? [SortDescriptor(\.t)] : [SortDescriptor(\.d, order: .reverse)]
                let descriptor = FetchDescriptor(predicate: predicate, sortBy: sort)
                let expected = try await memory.fetch(descriptor).map(\.value.id)
                let query = try SQLQueryBuilder.select(descriptor, schema: schema, includeVersion: false)
                let actual = try await connection.query(query).map { try $0.decode(Int.self, column: "id") }
                if !expected.isEmpty && expected.count < rows.count { nonTrivial += 1 }
                if expected != actual {
                    mismatches += 1
                    if mismatches <= 5 {
                        Issue.record("predicate #\(index) differs: \(predicate.expression)\n in memory: \(expected)\n postgres: \(actual)")
                    }
                }
            }
            #expect(mismatches == 0)
            #expect(nonTrivial > 200, "only \(nonTrivial) predicates selected a proper subset")
        } cleanup: {
            await TestServer.dropSchema(schema)
            await connection.close()
        }
    }

    /// Case mappings where Swift (ICU via Foundation) and PostgreSQL's ICU root collation agree, checked on the
    /// server: the generated data relies on them.
    @Test func caseMappingAgreesOnNonASCII() async throws {
        let samples = ["straße", "ΌΣΟΣ", "ΣΑΣ Σ", "ǅ", "ﬁé", "ÉCOLE", "naïve", "Ü😀", "日本"]
        let connection = try await TestServer.connect()
        try await withCleanup {
            for sample in samples {
                let rows = try await connection.query(
                    "SELECT lower(\(sample) COLLATE \"und-x-icu\"), upper(\(sample) COLLATE \"und-x-icu\")")
                #expect(try rows[0].decode(String.self, at: 0) == sample.localizedLowercase, "lower(\(sample))")
                #expect(try rows[0].decode(String.self, at: 1) == sample.localizedUppercase, "upper(\(sample))")
            }
        } cleanup: {
            await connection.close()
        }
    }
}
