import Foundation
@_spi(Benchmarks) @testable import Skyros
@testable import SkyrosStore
import SkyrosPostgres
import SkyrosTestEntities
import Testing

/// An entity whose sort columns need quoting: a keyword, a quote, a `$`.
private struct HostileRow: Entity, Equatable {
    var id: Int
    var order: String
    var weird: Int?

    enum CodingKeys: String, CodingKey {
        case id, order, weird = "we\"ird$1"
    }

    static let tableName = "hostile"
    static let columns: [EntityColumn<HostileRow>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.order, "order"), EntityColumn(\.weird, "we\"ird$1"),
    ]
}

/// A store that is not Skyros's: it cannot see a page's cursor.
private struct ForeignStore: Store {
    struct Unused: Error {}
    var generation: Int { 0 }
    func fetch<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> [Versioned<T>] { [] }
    func count<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> Int { 0 }
    func object<T: Entity>(_ type: T.Type, id: T.ID) async throws -> Versioned<T>? { nil }
    func findOrCreate<T: Entity>(_ value: T) async throws -> (value: Versioned<T>, created: Bool) { throw Unused() }
    func apply(_ changes: ChangeSet) async throws -> ChangeSetResult { throw Unused() }
    func destroy(confirm: DestroyConfirmation) async throws {}
}

/// Keyset pages without a server: the cursor's token, its checks, the SQL it adds, and paging in memory.
@Suite("Query: keyset cursors and SQL")
struct KeysetTests {
    typealias Row = QueryTestRow

    static func row(_ id: Int, name: String = "Ann", nick: String? = nil, m: Int? = nil) -> Row {
        Row(id: id, name: name, nick: nick, n: id % 3, m: m, score: 0, flag: false)
    }

    /// The select for the page after `row` in the order of `sort`.
    static func select<T: Entity>(
        _ sort: [SortDescriptor<T>], after row: T, predicate: Predicate<T>? = nil
    ) throws -> PGQuery {
        let cursor = try PageCursor(after: row, sortBy: sort)
        let paged = try PagedFetch(FetchDescriptor(predicate: predicate, sortBy: sort, fetchLimit: 10), after: cursor)
        return try SQLQueryBuilder.select(paged.descriptor, schema: "s", includeVersion: false)
    }

    static func whereClause(_ query: PGQuery) -> String {
        let sql = query.sql
        let start = sql.range(of: " WHERE ")!.upperBound
        let end = sql.range(of: " ORDER BY ")!.lowerBound
        return String(sql[start..<end])
    }

    @Test func oneDirectionWithoutOptionalsIsARowComparison() throws {
        let ann = Self.row(7)
        var query = try Self.select([SortDescriptor(\Row.name)], after: ann)
        #expect(Self.whereClause(query) == #"(("name"::text, "id") > ($1, $2))"#)
        #expect(query.binds.prefix(2) == [PGValue(type: .unspecified, text: "Ann"), PGValue(type: .unspecified, text: "7")])
        #expect(query.sql.hasSuffix(#" ORDER BY "name"::text ASC, "id" ASC LIMIT $3"#))
        #expect(query.binds[2].text == "11")
        query = try Self.select([SortDescriptor(\Row.n, order: .reverse), SortDescriptor(\Row.id, order: .reverse)], after: ann)
        #expect(Self.whereClause(query) == #"(("n", "id") < ($1, $2))"#)
        query = try Self.select([SortDescriptor<Row>](), after: ann)
        #expect(Self.whereClause(query) == #"("id" > $1)"#)
        let k = 2
        query = try Self.select([SortDescriptor(\Row.name)], after: ann, predicate: #Predicate { $0.n == k })
        #expect(Self.whereClause(query) == #"("n" = $1) AND (("name"::text, "id") > ($2, $3))"#)
        #expect(query.binds.map(\.text) == ["2", "Ann", "7", "11"])
    }

    @Test func mixedDirectionsAndOptionalsAreExpandedWithALeadingBound() throws {
        var query = try Self.select([SortDescriptor(\Row.m)], after: Self.row(7, m: 5))
        #expect(Self.whereClause(query) == #"("m" >= $1 AND (("m" > $1) OR (("m" = $1) AND ("id" > $2))))"#)
        query = try Self.select([SortDescriptor(\Row.m)], after: Self.row(7, m: nil))
        #expect(Self.whereClause(query) == #"(("m" IS NOT NULL) OR (("m" IS NULL) AND ("id" > $1)))"#)
        #expect(query.binds.map(\.text) == ["7", "11"])
        query = try Self.select([SortDescriptor(\Row.m, order: .reverse)], after: Self.row(7, m: 5))
        #expect(Self.whereClause(query) == #"(("m" < $1 OR "m" IS NULL) OR (("m" = $1) AND ("id" > $2)))"#)
        query = try Self.select([SortDescriptor(\Row.m, order: .reverse)], after: Self.row(7, m: nil))
        #expect(Self.whereClause(query) == #"("m" IS NULL AND (("m" IS NULL) AND ("id" > $1)))"#)
        query = try Self.select([SortDescriptor(\Row.score, order: .reverse)], after: Self.row(7))
        #expect(Self.whereClause(query) == #"("score" <= $1 AND (("score" < $1) OR (("score" = $1) AND ("id" > $2))))"#)
        query = try Self.select([SortDescriptor(\Row.name), SortDescriptor(\Row.nick, order: .reverse)], after: Self.row(7, nick: "x"))
        #expect(Self.whereClause(query)
            == #"("name"::text >= $1 AND (("name"::text > $1) OR (("name"::text = $1) AND (("nick"::text < $2 OR "nick"::text IS NULL) OR (("nick"::text = $2) AND ("id" > $3))))))"#)
    }

    @Test func columnNamesAreQuotedAndValuesBound() throws {
        let row = HostileRow(id: 1, order: "'; DROP TABLE x; --", weird: 3)
        let query = try Self.select([SortDescriptor(\HostileRow.order), SortDescriptor(\HostileRow.weird)], after: row)
        #expect(Self.whereClause(query)
            == #"("order"::text >= $1 AND (("order"::text > $1) OR (("order"::text = $1) AND (("we""ird$1" > $2) OR (("we""ird$1" = $2) AND ("id" > $3))))))"#)
        #expect(query.binds.map(\.text) == ["'; DROP TABLE x; --", "3", "1", "11"])
    }

    @Test func theTokenRoundTripsAsTextAndAsJSON() throws {
        let cursor = try PageCursor(after: Self.row(7, name: "é/+=?", nick: nil), sortBy: [SortDescriptor(\Row.name), SortDescriptor(\Row.nick)])
        let token = cursor.description
        #expect(token.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        #expect(PageCursor(token) == cursor)
        let json = try JSONEncoder().encode(["after": cursor])
        #expect(String(decoding: json, as: UTF8.self) == #"{"after":"\#(token)"}"#)
        #expect(try JSONDecoder().decode([String: PageCursor].self, from: json)["after"] == cursor)
        for garbage in ["", "not a cursor", "e30", String(token.dropLast(3))] {
            #expect(PageCursor(garbage) == nil, "\(garbage)")
        }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([String: PageCursor].self, from: Data(#"{"after":"x"}"#.utf8)) }
    }

    @Test func aCursorOfAnotherSortOrEntityIsRefused() throws {
        let cursor = try PageCursor(after: Self.row(7), sortBy: [SortDescriptor(\Row.name)])
        for sort in [[SortDescriptor(\Row.name, order: .reverse)], [SortDescriptor(\Row.n)], [], [SortDescriptor(\Row.name), SortDescriptor(\Row.n)]] {
            let error = try #require(throws: QueryError.self) { try PagedFetch(FetchDescriptor(sortBy: sort, fetchLimit: 5), after: cursor) }
            #expect(error.code == .invalidCursor)
        }
        let other = try #require(throws: QueryError.self) {
            try PagedFetch(FetchDescriptor<HostileRow>(sortBy: [SortDescriptor(\.order)], fetchLimit: 5), after: cursor)
        }
        #expect(other.code == .invalidCursor)
        // A nil for a column that cannot be nil (a forged token).
        var key = cursor.key
        key.values[0] = nil
        let forged = try #require(throws: QueryError.self) {
            try PagedFetch(FetchDescriptor(sortBy: [SortDescriptor(\Row.name)], fetchLimit: 5), after: PageCursor(key: key))
        }
        #expect(forged.code == .invalidCursor)
        // A value that is not of the column's type.
        key = cursor.key
        key.values[1] = "seven"
        var descriptor = FetchDescriptor<Row>(sortBy: [SortDescriptor(\Row.name)])
        descriptor.pageAfter = PageCursor(key: key)
        let mistyped = try #require(throws: QueryError.self) { try InMemoryQuery.apply(descriptor, to: [Self.row(1)]) }
        #expect(mistyped.code == .invalidCursor)
    }

    @Test func aPageNeedsAPositiveLimitAndNoOffset() async throws {
        for descriptor in [FetchDescriptor<Row>(), FetchDescriptor<Row>(fetchLimit: 0), FetchDescriptor<Row>(fetchLimit: 5, fetchOffset: 5)] {
            let error = try #require(throws: QueryError.self) { try PagedFetch(descriptor, after: nil) }
            #expect(error.code == .invalidDescriptor)
        }
        #expect(try PagedFetch(FetchDescriptor<Row>(fetchLimit: 5, fetchOffset: 0), after: nil).descriptor.fetchLimit == 6)
        let foreign = await #expect(throws: QueryError.self) { try await ForeignStore().fetchPage(FetchDescriptor<Row>(fetchLimit: 5)) }
        #expect(foreign?.code == .invalidDescriptor)
    }

    /// The in-memory store pages by Swift's order: strings by code point (`"B" < "a" < "é"`), `nil` first.
    @Test func theInMemoryStorePagesEveryRowOnce() async throws {
        let names = ["a", "B", "é", "", "ab", "a"]
        let rows = (1...60).map { Self.row($0, name: names[$0 % names.count], nick: $0 % 4 == 0 ? nil : names[$0 % 5], m: $0 % 3 == 0 ? nil : $0 % 4) }
        let store = InMemoryStore()
        try await store.bulkInsert(rows)
        let sorts: [[SortDescriptor<Row>]] = [
            [SortDescriptor(\.name)], [SortDescriptor(\.nick, order: .reverse)], [SortDescriptor(\.m), SortDescriptor(\.name, order: .reverse)],
            [SortDescriptor(\.nick), SortDescriptor(\.m, order: .reverse)],
        ]
        for sort in sorts {
            let full = try await store.fetch(FetchDescriptor(sortBy: sort)).map(\.value.id)
            var cursor: PageCursor?
            var seen: [Int] = []
            repeat {
                let page = try await store.fetchPage(FetchDescriptor(sortBy: sort, fetchLimit: 7), after: cursor)
                seen += page.items.map(\.value.id)
                cursor = page.nextCursor
            } while cursor != nil && seen.count <= full.count
            #expect(seen == full)
        }
    }
}
