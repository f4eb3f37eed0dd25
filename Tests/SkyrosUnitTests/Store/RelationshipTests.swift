import Foundation
import SkyrosPostgres
@_spi(Benchmarks) @testable import SkyrosStore
import SkyrosTestEntities
import Testing

/// Relationship declarations, the foreign-key check's verdicts and the prefetch queries' SQL. No server needed.
@Suite("Relationships: declarations, checks and SQL")
struct RelationshipUnitTests {
    @Test("Declared relationships come first; an undeclared reference column is a NO ACTION to-one")
    func catalog() throws {
        let book = RelationshipCatalog.relationships(of: RelBook.self)
        #expect(book.map(\.kind) == [.toOne, .toMany, .manyToMany])
        #expect(try book[0].foreignKey() == ForeignKey(
            table: "rel_books", column: "author_id", referencedTable: "rel_authors", referencedColumn: "id", deleteRule: .cascade))
        // The to-many's foreign key is its inverse's: the review's undeclared reference, in a column named `select`.
        #expect(try book[1].foreignKey().description == "rel_reviews.select → rel_books.id")
        #expect(try book[1].foreignKey().deleteRule == .noAction)
        let review = RelationshipCatalog.relationships(of: RelReview.self)
        #expect(review.count == 1 && review[0].kind == .toOne && review[0].keyPath == \RelReview.book)
        #expect(try RelationshipCatalog.foreignKeys(of: RelAuthor.self).map(\.description) == ["rel_authors.publisher_id → rel_publishers.id"])
        #expect(RelationshipCatalog.relationships(of: StoreCounter.self).isEmpty)
        #expect(throws: RelationshipError.self) { try RelationshipCatalog.relationship(\RelBook.title, of: RelBook.self) }
    }

    @Test("Prefetch queries: key = ANY($1), every id in one array parameter, names quoted")
    func membershipSQL() throws {
        let toMany = try RelationshipQuery.membership([Reference<RelBook>(1), Reference(2)], \RelReview.book)
        let condition = try #require(try SQLQueryBuilder.condition(toMany))
        #expect(condition.sql == "(\"select\" = ANY($1))")
        #expect(condition.binds.map(\.text) == [#"{"1","2"}"#])
        #expect(condition.binds.map(\.type) == [PGType.int8Array])

        let optional = try RelationshipQuery.membership([Reference<RelPublisher>(3)] as [Reference<RelPublisher>?], \RelAuthor.publisher)
        #expect(try SQLQueryBuilder.condition(optional)?.sql == "(\"publisher_id\" = ANY($1) AND \"publisher_id\" IS NOT NULL)")

        let ids = try RelationshipQuery.membership([Int64(4), 5], try RelationshipQuery.primaryKeyPath(RelAuthor.self))
        #expect(try SQLQueryBuilder.condition(ids)?.sql == "(\"id\" = ANY($1))")
        // The same predicate in memory.
        #expect(try InMemoryQuery.filter(ids, RelationshipSchema.sample().authors).map(\.id) == [4, 5])
    }

    @Test("Many-to-many prefetch SQL: one join, every name qualified and quoted, the owners as one array")
    func manyToManySQL() throws {
        let request = ManyToManyFetch(owners: [Int64(1), 2], ownerReference: \RelBookTag.book, targetReference: \RelBookTag.tag)
        let query = try SQLQueryBuilder.selectThrough(request, schema: "s\"x")
        let tags = #""s""x"."rel_tag""s""#
        let join = #""s""x"."o""#
        let tag = quoteIdentifier(RelBookTag.tagColumn)
        #expect(query.sql == "SELECT \(tags).\"n\", \(tags).\"prefix\", \(tags).xmin AS \"__version\", \(join).\"n\" AS \"__skyros_owner\""
            + " FROM \(tags) JOIN \(join) ON \(join).\(tag) = \(tags).\"n\" WHERE \(join).\"n\" = ANY($1)"
            + " ORDER BY \(tags).\"prefix\"::text ASC, \(tags).\"n\" ASC")
        #expect(query.binds.map(\.text) == [#"{"1","2"}"#])
        #expect(query.binds.map(\.type) == [PGType.int8Array])
        // The other side, without a schema: the books' order is their key's.
        let books = try SQLQueryBuilder.selectThrough(
            ManyToManyFetch(owners: [Int64(3)], ownerReference: \RelBookTag.tag, targetReference: \RelBookTag.book), schema: nil)
        #expect(books.sql.hasSuffix(#" FROM "rel_books" JOIN "o" ON "o"."n" = "rel_books"."id" WHERE "o"."\#(RelBookTag.tagColumn)" = ANY($1) ORDER BY "rel_books"."id" ASC"#))
    }

    @Test("Many-to-many: declared with its join table; the two-fetch pairing follows the targets' order, once per join row")
    func manyToManyDeclaration() throws {
        let tags = try RelationshipCatalog.relationship(\RelBook.tags, of: RelBook.self)
        #expect(tags.kind == .manyToMany)
        #expect(tags.joinTable.map { ObjectIdentifier($0.entity) } == ObjectIdentifier(RelBookTag.self))
        #expect(try tags.joinTable?.foreignKeys().map(\.description) == ["o.n → rel_books.id", "o.\(RelBookTag.tagColumn) → rel_tag\"s.n"])
        #expect(try tags.foreignKey().deleteRule == .cascade)
        #expect(tags.description.contains("many-to-many through RelBookTag"))
        var descriptor = FetchDescriptor<RelBook>()
        descriptor.prefetchPaths = [PrefetchPath(\.tags)]
        #expect(Set(descriptor.prefetchedTypes.map { $0.tableName }) == ["rel_tag\"s", "o"])

        let request = ManyToManyFetch(owners: [Int64(1), 2], ownerReference: \RelBookTag.book, targetReference: \RelBookTag.tag)
        let joins = [RelBookTag(book: 1, tag: 5), RelBookTag(book: 2, tag: 5), RelBookTag(book: 1, tag: 4)]
        let pairs = request.pair(joins, targets: [RelTag(id: 5, label: "a"), RelTag(id: 4, label: "b")])
        #expect(pairs.map { "\($0.owner)-\($0.target.id)" } == ["1-5", "2-5", "1-4"])

        let issues = ForeignKeyCheck.joinEntityIssues([RelBook.self, RelTag.self])
        #expect(issues.map(\.entity) == ["RelBook", "RelTag"])
        #expect(ForeignKeyCheck.joinEntityIssues([RelBook.self, RelTag.self, RelBookTag.self]).isEmpty)
    }

    @Test("A reference is stored as its target's id, and a nil one as NULL")
    func referenceCodec() throws {
        let book = RelBook(id: 1, title: "t", author: 7)
        let values = try RowEncoder(plan: EntityPlan<RelBook>.shared).encode(book)
        #expect(values[2] == PGValue(type: .int8, text: "7"))
        #expect(try RowDecoder(plan: EntityPlan<RelBook>.shared).decode(values: values) == book)
        let author = RelAuthor(id: 1, name: "a", publisher: nil)
        let authorValues = try RowEncoder(plan: EntityPlan<RelAuthor>.shared).encode(author)
        #expect(authorValues[2].text == nil)
        #expect(try RowDecoder(plan: EntityPlan<RelAuthor>.shared).decode(values: authorValues) == author)
        #expect(ColumnTypeRule.naturalType(Reference<RelAuthor>?.self) == ("int8", nil, true))
        #expect(ColumnTypeRule.accepts(Reference<RelAuthor>.self, LiveColumn(name: "author_id", typeName: "int8", notNull: true)))
        #expect(!ColumnTypeRule.accepts(Reference<RelAuthor>.self, LiveColumn(name: "author_id", typeName: "text", notNull: true)))
    }

    static let declared = ForeignKey(table: "books", column: "author_id", referencedTable: "authors", referencedColumn: "id", deleteRule: .cascade)
    static func live(_ table: String = "authors", rule: DeleteRule? = .cascade, columns: [String] = ["author_id"], schema: String = "app") -> LiveForeignKey {
        LiveForeignKey(name: "books_author_id_fkey", columns: columns, referencedSchema: schema, referencedTable: table, referencedColumns: ["id"], deleteRule: rule)
    }

    @Test("The foreign-key check's verdicts")
    func verdicts() {
        func messages(_ live: [LiveForeignKey], _ declared: ForeignKey = Self.declared, optional: Bool = false) -> [String] {
            ForeignKeyCheck.issues(declared, entity: "Book", optional: optional, live: live, schema: "app").map(\.message)
        }
        #expect(messages([Self.live()]).isEmpty)
        #expect(messages([]) == [#"the relationship books.author_id → authors.id has no foreign key in the database (add FOREIGN KEY ("author_id") REFERENCES "authors" ("id") ON DELETE CASCADE)"#])
        #expect(messages([Self.live(rule: .noAction)]) == [#"the relationship books.author_id → authors.id is declared ON DELETE CASCADE but the database's foreign key "books_author_id_fkey" is ON DELETE NO ACTION"#])
        #expect(messages([Self.live(rule: nil)]).first?.hasSuffix("ON DELETE SET DEFAULT (not supported)") == true)
        #expect(messages([Self.live("publishers")]).first?.hasSuffix("references publishers.id") == true)
        #expect(messages([Self.live(schema: "other")]).first?.hasSuffix("references other.authors.id") == true)
        // A composite foreign key covering the column is not this relationship's.
        #expect(messages([Self.live(columns: ["author_id", "edition"])]).first?.contains("has no foreign key") == true)
        var setNull = Self.declared
        setNull.deleteRule = .setNull
        #expect(messages([Self.live(rule: .setNull)], setNull, optional: false).count == 1)
        #expect(messages([Self.live(rule: .setNull)], setNull, optional: true).isEmpty)
        let issue = ForeignKeyCheck.issues(Self.declared, entity: "Book", optional: false, live: [], schema: "app")[0]
        #expect(issue.foreignKey == Self.declared && issue.column == "author_id")
    }

    @Test("Delete rules read from the catalog's codes")
    func catalogCodes() {
        #expect(["a", "r", "c", "n", "d"].map { DeleteRule(catalogCode: $0) } == [.noAction, .restrict, .cascade, .setNull, nil])
        #expect(DeleteRule.allCases.map(\.description) == ["CASCADE", "SET NULL", "RESTRICT", "NO ACTION"])
    }

    @Test("relationshipKeyPathsForPrefetching sets one level of prefetchPaths")
    func descriptor() {
        var descriptor = FetchDescriptor<RelBook>(relationshipKeyPathsForPrefetching: [\.author, \.reviews])
        #expect(descriptor.relationshipKeyPathsForPrefetching == [\RelBook.author, \RelBook.reviews])
        descriptor.prefetchPaths = [PrefetchPath(\.author, then: [PrefetchPath(\.publisher)])]
        #expect(descriptor.relationshipKeyPathsForPrefetching == [\RelBook.author])
    }
}
