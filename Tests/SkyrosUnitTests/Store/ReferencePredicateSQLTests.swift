import Foundation
@_spi(Benchmarks) @testable import SkyrosStore
import SkyrosPostgres
import SkyrosTestEntities
import Testing

/// The SQL of predicates across to-one relationships (`$0.author.name`), and their evaluation in memory. No
/// server needed.
@Suite("Query: predicates across references → SQL")
struct ReferencePredicateSQLTests {
    private func whereClause<T: Entity>(_ predicate: Predicate<T>, schema: String? = "s") throws -> (sql: String, binds: [String?]) {
        let query = try SQLQueryBuilder.select(FetchDescriptor(predicate: predicate), schema: schema, includeVersion: false)
        let sql = query.sql
        let start = try #require(sql.range(of: " WHERE "))
        let end = try #require(sql.range(of: " ORDER BY ", options: .backwards))
        return (String(sql[start.upperBound..<end.lowerBound]), query.binds.map(\.text))
    }

    /// Equality with a captured value is an `EXISTS` on the target's key (a semi-join), the row's column
    /// qualified by its table.
    @Test func equalityIsAnExistsOnTheTargetsKey() throws {
        let s = "Ada"
        let q = try whereClause(#Predicate<PredBook> { $0.author.name == s })
        #expect(q.sql == #"(EXISTS (SELECT 1 FROM "s"."pred_authors" AS "__skyros_ref1" WHERE "__skyros_ref1"."id" = "s"."pred_books"."author_id" AND "__skyros_ref1"."name"::text = $1))"#)
        #expect(q.binds == ["Ada"])
        let reversed = try whereClause(#Predicate<PredBook> { s == $0.author.name })
        #expect(reversed.sql == q.sql)
    }

    /// Every other use reads the column through a scalar subquery, NULL for a missing row, so that it behaves
    /// as an optional column.
    @Test func otherUsesReadAScalarSubquery() throws {
        let s = "Ada"
        let none: String? = nil
        // `!=` a value is NOT EXISTS (an anti-join): true for a missing author, as Swift's `nil != "Ada"`.
        var q = try whereClause(#Predicate<PredBook> { $0.author.name != s })
        #expect(q.sql == #"(NOT EXISTS (SELECT 1 FROM "s"."pred_authors" AS "__skyros_ref1" WHERE "__skyros_ref1"."id" = "s"."pred_books"."author_id" AND "__skyros_ref1"."name"::text = $1))"#)
        let name = Optional("Ada")
        q = try whereClause(#Predicate<PredBook> { $0.author.nick != name })
        #expect(q.sql.hasPrefix("(NOT EXISTS"))
        // `== nil` is not an EXISTS: a missing author's nick is nil too.
        q = try whereClause(#Predicate<PredBook> { $0.author.nick == none })
        #expect(q.sql == #"((SELECT "__skyros_ref1"."nick"::text FROM "s"."pred_authors" AS "__skyros_ref1" WHERE "__skyros_ref1"."id" = "s"."pred_books"."author_id") IS NOT DISTINCT FROM $1)"#)
        q = try whereClause(#Predicate<PredBook> { ($0.author.born ?? 0) > 3 || $0.title == s })
        #expect(q.sql == #"((COALESCE((SELECT "__skyros_ref1"."born" FROM "s"."pred_authors" AS "__skyros_ref1" WHERE "__skyros_ref1"."id" = "s"."pred_books"."author_id"), $1) > $2) OR ("s"."pred_books"."title"::text = $3))"#)
        q = try whereClause(#Predicate<PredBook> { $0.author.name?.starts(with: s) == true })
        #expect(q.sql.contains(#"(SELECT "__skyros_ref1"."name"::text FROM "s"."pred_authors" AS "__skyros_ref1" WHERE "__skyros_ref1"."id" = "s"."pred_books"."author_id")"#))
        #expect(q.sql.contains("LIKE"))
    }

    /// Without references the SQL is as before: columns unqualified. `.id` of a reference is its own column.
    @Test func aPredicateWithoutReferencesIsUnchanged() throws {
        let s = "x"
        #expect(try whereClause(#Predicate<PredBook> { $0.title == s && $0.author.id == 3 }).sql
            == #"(("title"::text = $1) AND ("author_id" = $2))"#)
    }

    /// An optional reference, two levels, and a table referring to itself: nested EXISTS, each alias new.
    @Test func optionalAndNestedReferences() throws {
        let s = "P"
        var q = try whereClause(#Predicate<PredBook> { $0.coAuthor?.name == s && $0.pages > 3 })
        #expect(q.sql == #"((EXISTS (SELECT 1 FROM "s"."pred_authors" AS "__skyros_ref1" WHERE "__skyros_ref1"."id" = "s"."pred_books"."co_author_id" AND "__skyros_ref1"."name"::text = $1)) AND ("s"."pred_books"."pages" > $2))"#)
        q = try whereClause(#Predicate<PredBook> { $0.author.publisher?.name == s })
        #expect(q.sql == #"(EXISTS (SELECT 1 FROM "s"."pred_authors" AS "__skyros_ref1" WHERE "__skyros_ref1"."id" = "s"."pred_books"."author_id" AND EXISTS (SELECT 1 FROM "s"."pred_publishers" AS "__skyros_ref2" WHERE "__skyros_ref2"."id" = "__skyros_ref1"."publisher_id" AND "__skyros_ref2"."name"::text = $1)))"#)
        q = try whereClause(#Predicate<PredAuthor> { $0.mentor?.mentor?.name == s })
        #expect(q.sql == #"(EXISTS (SELECT 1 FROM "s"."pred_authors" AS "__skyros_ref1" WHERE "__skyros_ref1"."id" = "s"."pred_authors"."mentor_id" AND EXISTS (SELECT 1 FROM "s"."pred_authors" AS "__skyros_ref2" WHERE "__skyros_ref2"."id" = "__skyros_ref1"."mentor_id" AND "__skyros_ref2"."name"::text = $1)))"#)
    }

    /// Hostile names: a target table `o` keyed by `n`, referred to from a table `n` by a column `o`, columns of
    /// both tables named alike (`prefix`), a keyword, a quote with `$1`, a 63-byte name, and a column named as the
    /// first alias.
    @Test func hostileNamesAreQuotedAndQualified() throws {
        let s = "t"
        var q = try whereClause(#Predicate<HostileSource> { ($0.target.title ?? "") == $0.title && $0.parent?.target?.quoted == s })
        #expect(q.sql == #"((COALESCE((SELECT "__skyros_ref1"."prefix"::text FROM "s"."o" AS "__skyros_ref1" WHERE "__skyros_ref1"."n" = "s"."n"."o"), $1) = "s"."n"."prefix"::text) AND (EXISTS (SELECT 1 FROM "s"."n" AS "__skyros_ref2" WHERE "__skyros_ref2"."n" = "s"."n"."__skyros_ref1" AND EXISTS (SELECT 1 FROM "s"."o" AS "__skyros_ref3" WHERE "__skyros_ref3"."n" = "__skyros_ref2"."o" AND "__skyros_ref3"."we""ird$1"::text = $2))))"#)
        // On the search path the row's table is named alone; inside the subquery its alias hides the inner one.
        q = try whereClause(#Predicate<HostileSource> { ($0.parent?.rank ?? 0) > 1 }, schema: nil)
        #expect(q.sql == #"(COALESCE((CASE WHEN "n"."__skyros_ref1" IS NULL THEN NULL ELSE (SELECT "__skyros_ref1"."rank_üüüüüüüüüüüüüüüüüüüüüüüüüüüüü" FROM "n" AS "__skyros_ref1" WHERE "__skyros_ref1"."n" = "n"."__skyros_ref1") END), $1) > $2)"#)
    }

    /// Set-based writes, counts and aggregates qualify the row's columns by the table they name.
    @Test func deleteUpdateCountAndAggregateQualifyTheirTable() throws {
        let s = "Ada"
        let predicate = #Predicate<PredBook> { $0.author.name == s || $0.pages > 1 }
        let delete = try SQLQueryBuilder.delete(where: predicate, schema: "s").sql
        #expect(delete.hasPrefix(#"DELETE FROM "s"."pred_books" WHERE ((EXISTS (SELECT 1 FROM "s"."pred_authors" AS "__skyros_ref1" WHERE "__skyros_ref1"."id" = "s"."pred_books"."author_id""#))
        let update = try SQLQueryBuilder.update(where: predicate, set: [.set(\.pages, to: 2)], schema: "s").sql
        #expect(update.contains(#"WHERE ((EXISTS (SELECT 1 FROM "s"."pred_authors" AS "__skyros_ref1" WHERE "__skyros_ref1"."id" = "s"."pred_books"."author_id""#))
        #expect(update.contains(#"OR ("s"."pred_books"."pages" > $"#))
        let count = try SQLQueryBuilder.count(FetchDescriptor(predicate: predicate, fetchLimit: 3), schema: "s").sql
        #expect(count.contains(#"FROM "s"."pred_books" WHERE ((EXISTS"#))
    }

    /// The error for a member that is not a mapped column of the target names it.
    @Test func anUnmappedTargetPropertyIsRefused() throws {
        let error = try #require(throws: QueryError.self) { try whereClause(#Predicate<PredBook> { $0.author.initials == "A" }) }
        #expect(error.code == .unsupportedPredicate)
        #expect(error.message.contains("is not a column of PredAuthor"))
    }

    /// The member key paths the `#Predicate` macro writes are found again from the target's columns: plain and
    /// flattened (optional) members.
    @Test func memberKeyPathsMatchTheColumns() throws {
        let plain: AnyKeyPath = \Reference<PredAuthor>.name
        let optional: AnyKeyPath = \Reference<PredAuthor>.nick
        let reference: AnyKeyPath = \Reference<PredAuthor>.publisher
        #expect(try Reference<PredAuthor>.referencedColumn(plain)?.column.name == "name")
        #expect(try Reference<PredAuthor>.referencedColumn(optional)?.column.name == "nick")
        #expect(try Reference<PredAuthor>.referencedColumn(reference)?.column.name == "publisher_id")
    }

    /// In memory, a predicate across a reference reads the target from the given rows; a missing target reads
    /// as nil; without a source of targets the evaluation is refused, never silently false.
    @Test func inMemoryEvaluationResolvesTargets() throws {
        var targets = ResolvedTargets()
        targets.add([PredAuthor(id: 1, name: "Ada", nick: nil, born: 1815, rank: nil, publisher: 7, mentor: nil)])
        targets.add([PredPublisher(id: 7, name: "Ace", country: nil)])
        let books = [
            PredBook(id: 1, title: "a", pages: 1, author: 1, coAuthor: nil),
            PredBook(id: 2, title: "b", pages: 2, author: 2, coAuthor: 1),
        ]
        let s = "Ada"
        #expect(try InMemoryQuery.filter(#Predicate<PredBook> { $0.author.name == s }, books, targets: targets).map(\.id) == [1])
        #expect(try InMemoryQuery.filter(#Predicate<PredBook> { $0.author.name != s }, books, targets: targets).map(\.id) == [2])
        #expect(try InMemoryQuery.filter(#Predicate<PredBook> { $0.coAuthor?.name == s }, books, targets: targets).map(\.id) == [2])
        #expect(try InMemoryQuery.filter(#Predicate<PredBook> { $0.author.publisher?.name == "Ace" }, books, targets: targets).map(\.id) == [1])
        #expect(try InMemoryQuery.filter(#Predicate<PredBook> { ($0.author.born ?? 0) > 1800 }, books, targets: targets).map(\.id) == [1])
        #expect(throws: QueryError.self) { try InMemoryQuery.filter(#Predicate<PredBook> { $0.author.name == s }, books) }
        // Outside an evaluation a reference knows no target.
        #expect(books[0].author.name == nil)
    }

    /// The in-memory store evaluates against its own rows, as of one moment, for fetch, count, delete and
    /// update.
    @Test func inMemoryStoreFetchesCountsDeletesAndUpdates() async throws {
        let store = InMemoryStore()
        var changes = ChangeSet()
        changes.bulkInsert([PredPublisher(id: 7, name: "Ace", country: "FR")])
        changes.bulkInsert([
            PredAuthor(id: 1, name: "Ada", nick: "A", born: 1815, rank: 1, publisher: 7, mentor: nil),
            PredAuthor(id: 2, name: "Bob", nick: nil, born: 1900, rank: nil, publisher: nil, mentor: 1),
        ])
        changes.bulkInsert((1...6).map { PredBook(id: $0, title: "b\($0)", pages: $0, author: $0 % 2 + 1, coAuthor: $0 == 1 ? 1 : nil) })
        _ = try await store.apply(changes)
        let ada = #Predicate<PredBook> { $0.author.name == "Ada" }
        #expect(try await store.fetch(FetchDescriptor(predicate: ada)).map(\.value.id) == [2, 4, 6])
        #expect(try await store.count(FetchDescriptor(predicate: #Predicate<PredBook> { $0.author.mentor?.name == "Ada" })) == 3)
        #expect(try await store.fetch(FetchDescriptor(predicate: #Predicate<PredBook> { $0.author.publisher?.country == "FR" && $0.pages > 2 })).map(\.value.id) == [4, 6])
        var update = ChangeSet()
        update.update(where: #Predicate<PredBook> { $0.author.nick == nil }, set: [.set(\.pages, to: 0)])
        _ = try await store.apply(update)
        #expect(try await store.fetch(FetchDescriptor(predicate: #Predicate<PredBook> { $0.pages == 0 })).map(\.value.id) == [1, 3, 5])
        var delete = ChangeSet()
        delete.delete(where: ada)
        _ = try await store.apply(delete)
        #expect(try await store.fetch(FetchDescriptor<PredBook>()).map(\.value.id) == [1, 3, 5])
    }
}
