import Foundation
@_spi(Benchmarks) @testable import Skyros
@testable import SkyrosObservation
@testable import SkyrosStack
@testable import SkyrosStore
@testable import SkyrosSync
import SkyrosPostgres
import SkyrosTestEntities
import Testing

/// The SQL text and bindings for every supported `PredicateExpressions` node. No server needed.
@Suite("Query: predicate → SQL")
struct SQLTranslationTests {
    typealias Row = QueryTestRow

    private func sql(_ predicate: Predicate<Row>) throws -> PGQuery {
        try #require(try SQLQueryBuilder.condition(predicate))
    }

    private func texts(_ query: PGQuery) -> [String?] { query.binds.map(\.text) }

    @Test func equalityAndNil() throws {
        let s = "x"
        let optional: String? = "y"
        var q = try sql(#Predicate { $0.name == s })
        #expect(q.sql == #"("name"::text = $1)"#)
        #expect(q.binds == [PGValue(type: .text, text: "x")])
        q = try sql(#Predicate { $0.name != s })
        #expect(q.sql == #"("name"::text <> $1)"#)
        // An optional column against a captured value: in a form the column's index serves.
        q = try sql(#Predicate { $0.nick == optional })
        #expect(q.sql == #"("nick"::text = $1 AND "nick"::text IS NOT NULL)"#)
        let none: String? = nil
        q = try sql(#Predicate { $0.nick == none })
        #expect(q.sql == #"("nick"::text IS NULL)"#)
        #expect(q.binds.isEmpty)
        q = try sql(#Predicate { $0.nick != optional })
        #expect(q.sql == #"("nick"::text IS DISTINCT FROM $1)"#)
        q = try sql(#Predicate { $0.nick == nil })
        #expect(q.sql == #"("nick"::text IS NULL)"#)
        #expect(q.binds.isEmpty)
        q = try sql(#Predicate { $0.m != nil })
        #expect(q.sql == #"("m" IS NOT NULL)"#)
        q = try sql(#Predicate { $0.nick == $0.nick })
        #expect(q.sql == #"("nick"::text IS NOT DISTINCT FROM "nick"::text)"#)
        q = try sql(#Predicate { $0.flag })
        #expect(q.sql == #""flag""#)
    }

    /// A column against a captured value compares in the column's collation (so its index serves it); any
    /// other string comparison in code-point order, as Swift compares.
    @Test func comparisonsUseTheColumnsCollationAgainstValuesAndCodePointsOtherwise() throws {
        let s = "é"
        let i = 3
        #expect(try sql(#Predicate { $0.name < s }).sql == #"("name"::text < $1)"#)
        #expect(try sql(#Predicate { s <= $0.name }).sql == #"($1 <= "name"::text)"#)
        #expect(try sql(#Predicate { $0.name >= s }).sql == #"("name"::text >= $1)"#)
        #expect(try sql(#Predicate { $0.name < ($0.nick ?? s) }).sql
            == #"("name"::text COLLATE "C" < COALESCE("nick"::text, $1) COLLATE "C")"#)
        #expect(try sql(#Predicate { $0.name.localizedUppercase < s }).sql
            == #"((upper("name"::text COLLATE "und-x-icu") COLLATE "C") COLLATE "C" < $1 COLLATE "C")"#)
        #expect(try sql(#Predicate { $0.n <= i }).sql == #"("n" <= $1)"#)
        #expect(try sql(#Predicate { $0.n > i }).sql == #"("n" > $1)"#)
        #expect(texts(try sql(#Predicate { $0.n > i })) == ["3"])
    }

    @Test func logic() throws {
        let a = 1, b = 2
        let q = try sql(#Predicate { ($0.n == a && !$0.flag) || $0.m == b })
        #expect(q.sql == #"((("n" = $1) AND (NOT "flag")) OR ("m" = $2 AND "m" IS NOT NULL))"#)
        #expect(texts(q) == ["1", "2"])
    }

    @Test func arithmetic() throws {
        let a = 2, b = 3, d = 1.5
        #expect(try sql(#Predicate { $0.n + a * b > a - b }).sql == #"(("n" + ($1 * $2)) > ($3 - $4))"#)
        #expect(try sql(#Predicate { $0.n / a == b % a }).sql == #"(("n" / $1) = ($2 % $3))"#)
        #expect(try sql(#Predicate { $0.n % a == -b }).sql == #"(("n" % $1) = (-$2))"#)
        #expect(try sql(#Predicate { -$0.n - a < b }).sql == #"(((-"n") - $1) < $2)"#)
        #expect(try sql(#Predicate { $0.score / d >= d }).sql == #"(("score" / $1) >= $2)"#)
        #expect(try sql(#Predicate { $0.score / d >= d }).binds.map(\.type) == [.float8, .float8])
    }

    @Test func optionalsNilCoalesceAndChaining() throws {
        let s = "a"
        let i = 4
        #expect(try sql(#Predicate { ($0.m ?? i) < i }).sql == #"(COALESCE("m", $1) < $2)"#)
        let chained = try sql(#Predicate { $0.nick?.contains(s) == true })
        #expect(
            chained.sql
                == #"((CASE WHEN "nick"::text IS NULL THEN NULL ELSE ("nick"::text LIKE $1 ESCAPE E'\\') END) IS NOT DISTINCT FROM $2)"#
        )
        #expect(texts(chained) == ["%a%", "t"])
        let coalesced = try sql(#Predicate { $0.nick?.isEmpty ?? true })
        #expect(coalesced.sql == #"COALESCE((CASE WHEN "nick"::text IS NULL THEN NULL ELSE ("nick"::text = '') END), $1)"#)
        let flatMapped = try sql(#Predicate { $0.m.flatMap { $0 > i } ?? false })
        #expect(flatMapped.sql == #"COALESCE((CASE WHEN "m" IS NULL THEN NULL ELSE ("m" > $1) END), $2)"#)
    }

    @Test func conditional() throws {
        let i = 1
        let s = "x"
        #expect(try sql(#Predicate { ($0.flag ? $0.n : -$0.n) > i }).sql
            == #"((CASE WHEN "flag" THEN "n" ELSE (-"n") END) > $1)"#)
        #expect(try sql(#Predicate { ($0.n > i ? $0.name : $0.nick ?? s) == s }).sql
            == #"((CASE WHEN ("n" > $1) THEN "name"::text ELSE COALESCE("nick"::text, $2) END) = $3)"#)
    }

    @Test func stringContainsAndPrefixEscapeLikeMetacharacters() throws {
        let s = #"50%_off\now"#
        let contains = try sql(#Predicate { $0.name.contains(s) })
        #expect(contains.sql == #"("name"::text LIKE $1 ESCAPE E'\\')"#)
        #expect(texts(contains) == [#"%50\%\_off\\now%"#])
        let prefix = try sql(#Predicate { $0.name.starts(with: s) })
        #expect(prefix.sql == #"("name"::text LIKE $1 ESCAPE E'\\')"#)
        #expect(texts(prefix) == [#"50\%\_off\\now%"#])
        // Non-constant operands need no pattern at all.
        #expect(try sql(#Predicate { $0.name.contains($0.nick ?? s) }).sql == #"(strpos("name"::text, COALESCE("nick"::text, $1)) > 0)"#)
        #expect(try sql(#Predicate { $0.name.starts(with: $0.nick ?? s) }).sql == #"starts_with("name"::text, COALESCE("nick"::text, $1))"#)
    }

    @Test func stringPropertiesAndCaseFolding() throws {
        let s = "straße"
        let k = 2
        #expect(try sql(#Predicate { $0.name.isEmpty }).sql == #"("name"::text = '')"#)
        #expect(try sql(#Predicate { $0.name.count > k }).sql == #"(char_length("name"::text) > $1)"#)
        #expect(try sql(#Predicate { $0.name.localizedLowercase == s }).sql
            == #"((lower("name"::text COLLATE "und-x-icu") COLLATE "C") = $1)"#)
        #expect(try sql(#Predicate { $0.name.localizedUppercase.starts(with: s) }).sql
            == #"((upper("name"::text COLLATE "und-x-icu") COLLATE "C") LIKE $1 ESCAPE E'\\')"#)
    }

    @Test func collectionAndRangeMembership() throws {
        let names = ["a", "b,c", #"d"e"#]
        let nicks: [String?] = [nil, "a"]
        let ids: Set<Int> = [3]
        let closed = 1...5
        let lo = 1, hi = 9
        let a = "a", z = "z"
        let inNames = try sql(#Predicate { names.contains($0.name) })
        #expect(inNames.sql == #"("name"::text = ANY($1))"#)
        #expect(inNames.binds.first?.type == .textArray)
        // Only the non-nil elements are bound; nil is asked with IS NULL.
        let inNicks = try sql(#Predicate { nicks.contains($0.nick) })
        #expect(inNicks.sql == #"(("nick"::text = ANY($1) AND "nick"::text IS NOT NULL) OR "nick"::text IS NULL)"#)
        #expect(inNicks.binds == [PGValue(type: .textArray, text: #"{"a"}"#)])
        let someNicks: [String?] = ["b"]
        #expect(try sql(#Predicate { someNicks.contains($0.nick) }).sql == #"("nick"::text = ANY($1) AND "nick"::text IS NOT NULL)"#)
        let inSet = try sql(#Predicate { ids.contains($0.n) })
        #expect(inSet.sql == #"("n" = ANY($1))"#)
        #expect(inSet.binds.map(\.type) == [.int8Array])
        #expect(inSet.binds.first?.text?.contains("3") == true)
        #expect(try sql(#Predicate { (lo..<hi).contains($0.n) }).sql == #"("n" >= $1 AND "n" < $2)"#)
        #expect(try sql(#Predicate { (lo...hi).contains($0.n) }).sql == #"("n" >= $1 AND "n" <= $2)"#)
        let captured = try sql(#Predicate { closed.contains($0.n) })
        #expect(captured.sql == #"("n" >= $1 AND "n" <= $2)"#)
        #expect(texts(captured) == ["1", "5"])
        #expect(try sql(#Predicate { (a...z).contains($0.name) }).sql == #"("name"::text >= $1 AND "name"::text <= $2)"#)
        #expect(try sql(#Predicate { (a...($0.nick ?? z)).contains($0.name) }).sql
            == #"("name"::text COLLATE "C" >= $1 COLLATE "C" AND "name"::text COLLATE "C" <= COALESCE("nick"::text, $2) COLLATE "C")"#)
    }

    @Test func sqlMetacharactersInEveryValuePositionAreBound() throws {
        let evil = "'; DROP TABLE query_rows; --"
        let dollar = "$1"
        let evils = [evil, dollar]
        let q = try sql(#Predicate {
            $0.name == evil || $0.nick != dollar || $0.name < evil || $0.name.contains(evil)
                || $0.name.starts(with: dollar) || evils.contains($0.name) || ($0.nick ?? evil) == dollar
        })
        #expect(!q.sql.contains("DROP"))
        #expect(!q.sql.contains("'; "))
        #expect(q.binds.count == 8)
        #expect(q.binds[0].text == evil)
        #expect(q.binds[1].text == dollar)
        #expect(q.binds[3].text == "%'; DROP TABLE query\\_rows; --%")
    }

    @Test func unsupportedConstructsAreNamed() throws {
        let i = 3
        let error = try #require(throws: QueryError.self) {
            try SQLQueryBuilder.condition(#Predicate<Row> { $0.m! > i })
        }
        #expect(error.code == .unsupportedPredicate)
        #expect(error.construct == "ForcedUnwrap")
        #expect(error.entity == "QueryTestRow")
        #expect(error.message.contains("ForcedUnwrap") && error.message.contains("QueryTestRow"))

        let utf8 = try #require(throws: QueryError.self) {
            try SQLQueryBuilder.condition(#Predicate<Row> { $0.name.utf8.count > i })
        }
        #expect(utf8.construct == "KeyPath")
        #expect(utf8.message.contains("UTF8View"))

        let unmapped = try #require(throws: QueryError.self) {
            try SQLQueryBuilder.condition(#Predicate<QueryTestUnmapped> { $0.note == "x" })
        }
        #expect(unmapped.code == .unmappedKeyPath)
        #expect(unmapped.construct.contains("note"))

        // The in-memory path rejects exactly the same predicates.
        let row = Row(id: 1, name: "a", nick: nil, n: 1, m: 1, score: 0, flag: true)
        #expect(throws: QueryError.self) { try InMemoryQuery.matches(#Predicate<Row> { $0.m! > i }, row) }
        #expect(throws: QueryError.self) { try InMemoryQuery.apply(FetchDescriptor(predicate: #Predicate<Row> { $0.m! > i }), to: [row]) }
    }

    @Test func errorMessagesDoNotContainCapturedValues() throws {
        let secret = "hunter2-password"
        let error = try #require(throws: QueryError.self) {
            try SQLQueryBuilder.condition(#Predicate<Row> { $0.name == secret && $0.m! > 1 })
        }
        #expect(!error.description.contains(secret))
    }

    @Test func orderByFallsBackToDefaultSortThenPrimaryKey() throws {
        #expect(try SQLQueryBuilder.orderBy([SortDescriptor<Row>]()) == #" ORDER BY "id" ASC"#)
        #expect(try SQLQueryBuilder.orderBy([SortDescriptor(\Row.name), SortDescriptor(\Row.m, order: .reverse)])
            == #" ORDER BY "name"::text ASC, "m" DESC NULLS LAST, "id" ASC"#)
        #expect(try SQLQueryBuilder.orderBy([SortDescriptor(\Row.nick, comparator: .lexical)])
            == #" ORDER BY "nick"::text ASC NULLS FIRST, "id" ASC"#)
        #expect(try SQLQueryBuilder.orderBy([SortDescriptor(\Row.id, order: .reverse), SortDescriptor(\Row.n)])
            == #" ORDER BY "id" DESC, "n" ASC"#)
        #expect(try SQLQueryBuilder.orderBy([SortDescriptor<QueryTestUnmapped>]())
            == #" ORDER BY "title"::text DESC, "id" ASC"#)
        let error = try #require(throws: QueryError.self) {
            try SQLQueryBuilder.orderBy([SortDescriptor(\QueryTestUnmapped.note)])
        }
        #expect(error.code == .unmappedKeyPath)
    }

    @Test func selectCountDelete() throws {
        let s = "a"
        let descriptor = FetchDescriptor<Row>(
            predicate: #Predicate { $0.name == s }, sortBy: [SortDescriptor(\.score)], fetchLimit: 10, fetchOffset: 5)
        let select = try SQLQueryBuilder.select(descriptor, schema: "my schema", includeVersion: true)
        #expect(select.sql == #"SELECT "id", "name", "nick", "n", "m", "score", "flag", xmin AS "__version" FROM "my schema"."query_rows" WHERE ("name"::text = $1) ORDER BY "score" ASC, "id" ASC LIMIT $2 OFFSET $3"#)
        #expect(texts(select) == ["a", "10", "5"])
        let plain = try SQLQueryBuilder.select(FetchDescriptor<Row>(), schema: nil, includeVersion: false)
        #expect(plain.sql == #"SELECT "id", "name", "nick", "n", "m", "score", "flag" FROM "query_rows" ORDER BY "id" ASC"#)
        #expect(try SQLQueryBuilder.count(FetchDescriptor<Row>(predicate: #Predicate { $0.name == s }), schema: "s").sql
            == #"SELECT count(*) FROM "s"."query_rows" WHERE ("name"::text = $1)"#)
        #expect(try SQLQueryBuilder.count(descriptor, schema: nil).sql
            == #"SELECT count(*) FROM (SELECT 1 FROM "query_rows" WHERE ("name"::text = $1) ORDER BY "score" ASC, "id" ASC LIMIT $2 OFFSET $3) AS "__skyros_window""#)
        #expect(try SQLQueryBuilder.delete(where: #Predicate<Row> { $0.name == s }, schema: "s").sql
            == #"DELETE FROM "s"."query_rows" WHERE ("name"::text = $1) RETURNING "id""#)
        #expect(try SQLQueryBuilder.delete(where: nil as Predicate<Row>?, schema: nil).sql == #"DELETE FROM "query_rows" RETURNING "id""#)
        let negative = try #require(throws: QueryError.self) {
            try SQLQueryBuilder.select(FetchDescriptor<Row>(fetchLimit: -1), schema: nil, includeVersion: false)
        }
        #expect(negative.code == .invalidDescriptor && negative.construct == "fetchLimit")
    }

    @Test func inMemoryApplyFiltersSortsAndWindows() throws {
        let rows = [
            Row(id: 3, name: "b", nick: nil, n: 1, m: nil, score: 1, flag: true),
            Row(id: 1, name: "a", nick: "x", n: 2, m: 5, score: 2, flag: false),
            Row(id: 2, name: "B", nick: "y", n: 3, m: 1, score: 1, flag: true),
            Row(id: 4, name: "é", nick: nil, n: 4, m: nil, score: 1, flag: true),
        ]
        #expect(InMemoryQuery.sorted(rows, by: []).map(\.id) == [1, 2, 3, 4])
        #expect(InMemoryQuery.sorted(rows, by: [SortDescriptor(\.name)]).map(\.id) == [2, 1, 3, 4])
        // nil first ascending, last descending; ties by primary key.
        #expect(InMemoryQuery.sorted(rows, by: [SortDescriptor(\.m)]).map(\.id) == [3, 4, 2, 1])
        #expect(InMemoryQuery.sorted(rows, by: [SortDescriptor(\.m, order: .reverse)]).map(\.id) == [1, 2, 3, 4])
        let page = try InMemoryQuery.apply(
            FetchDescriptor(predicate: #Predicate { $0.flag }, sortBy: [SortDescriptor(\.score)], fetchLimit: 2, fetchOffset: 1),
            to: rows)
        #expect(page.map(\.id) == [3, 4])
    }
}
