import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestEntities
import SkyrosTestSupport
import SkyrosTesting
import Testing

/// Many-to-many relationships through a join table (books ↔ tags through `RelBookTag`, every name hostile):
/// prefetched with one query per relationship on PostgreSQL, with the same answers on both stores, nested through
/// and from it; a deleted book or tag takes its join rows along.
@Suite("Many-to-many relationships")
struct ManyToManyRelationshipTests {
    /// The tags of each book, as the sample pairs them: by label, then by key.
    static func expectedTags(_ tags: (tags: [RelTag], bookTags: [RelBookTag])) -> [Int64: [RelTag]] {
        let byID = Dictionary(uniqueKeysWithValues: tags.tags.map { ($0.id, $0) })
        var result: [Int64: [RelTag]] = [:]
        for pair in tags.bookTags { result[pair.book.id, default: []].append(byID[pair.tag.id]!) }
        return result.mapValues { $0.sorted { ($0.label, $0.id) < ($1.label, $1.id) } }
    }

    /// The books of each tag, by key.
    static func expectedBooks(_ tags: (tags: [RelTag], bookTags: [RelBookTag]), books: [RelBook]) -> [Int64: [RelBook]] {
        let byID = Dictionary(uniqueKeysWithValues: books.map { ($0.id, $0) })
        var result: [Int64: [RelBook]] = [:]
        for pair in tags.bookTags { result[pair.tag.id, default: []].append(byID[pair.book.id]!) }
        return result.mapValues { $0.sorted { $0.id < $1.id } }
    }

    @Test("Books with [\\.tags], and tags with [\\.books]: each side's rows in order, on both stores", arguments: StoreKind.allCases)
    func bothSides(kind: StoreKind) async throws {
        try await RelationshipHarness.with(kind) { harness in
            let sample = RelationshipSchema.sample()
            let tagSample = RelationshipSchema.tagSample()
            try await harness.seed(sample)
            try await harness.seed(tagSample)
            let expectedTags = Self.expectedTags(tagSample)
            let expectedBooks = Self.expectedBooks(tagSample, books: sample.books)

            let books = try await harness.store.fetchWithRelationships(
                FetchDescriptor<RelBook>(relationshipKeyPathsForPrefetching: [\.tags]))
            #expect(books.rows == sample.books)
            var paired = 0
            for book in books {
                let tags = try books.related(\.tags, of: book)
                #expect(tags == expectedTags[book.id] ?? [], "book \(book.id)")
                paired += tags.count
            }
            #expect(paired == tagSample.bookTags.count)
            // Some book has two tags whose order is the label's, not the key's.
            #expect(books.contains { book in
                let tags = (try? books.related(\.tags, of: book)) ?? []
                return tags.count == 2 && tags[0].id > tags[1].id
            })

            let tags = try await harness.store.fetchWithRelationships(
                FetchDescriptor<RelTag>(relationshipKeyPathsForPrefetching: [\.books]))
            #expect(tags.map(\.id) == tagSample.tags.sorted { ($0.label, $0.id) < ($1.label, $1.id) }.map(\.id))
            for tag in tags {
                #expect(try tags.related(\.books, of: tag) == expectedBooks[tag.id] ?? [], "tag \(tag.id)")
            }
            #expect(try tags.related(\.books, of: RelTag(id: 7, label: "")).isEmpty)
            // Not prefetched: refused.
            let error = try #require(throws: RelationshipError.self) { try books.related(\.reviews, of: books[0]) }
            #expect(error.code == .notPrefetched)
        }
    }

    @Test("PostgreSQL: one statement per many-to-many, nested through it and from it")
    func statementCount() async throws {
        try await RelationshipHarness.with(.postgres) { harness in
            let postgres = try #require(harness.store.base as? PostgresStore)
            let sample = RelationshipSchema.sample()
            let tagSample = RelationshipSchema.tagSample()
            try await harness.seed(sample)
            try await harness.seed(tagSample)
            let expectedTags = Self.expectedTags(tagSample)
            let expectedBooks = Self.expectedBooks(tagSample, books: sample.books)

            var before = harness.statements.count
            let books = try await postgres.fetchWithRelationships(
                FetchDescriptor<RelBook>(relationshipKeyPathsForPrefetching: [\.tags]))
            var statements = Array(harness.statements.dropFirst(before))
            #expect(statements.count == 2, "\(statements)")
            #expect(statements.last?.contains(" JOIN ") == true, "\(statements)")
            #expect(statements.last?.contains("= ANY($1)") == true, "\(statements)")
            for book in books { #expect(try books.related(\.tags, of: book) == expectedTags[book.id] ?? []) }
            // Reading every book's tags ran nothing more.
            #expect(harness.statements.count - before == 2)

            // Through it: books → tags → books (3 statements).
            before = harness.statements.count
            var through = FetchDescriptor<RelBook>(predicate: #Predicate { $0.id <= 12 })
            through.prefetchPaths = [PrefetchPath(\.tags, then: [PrefetchPath(\.books)])]
            let few = try await postgres.fetchWithRelationships(through)
            statements = Array(harness.statements.dropFirst(before))
            #expect(statements.count == 3, "\(statements)")
            #expect(few.count == 12)
            for book in few {
                for tag in try few.related(\.tags, of: book) {
                    #expect(try few.related(\.books, of: tag) == expectedBooks[tag.id] ?? [])
                }
            }

            // From it: authors → books → tags (3 statements), beside a to-one (1 more).
            before = harness.statements.count
            var from = FetchDescriptor<RelAuthor>(predicate: #Predicate { $0.id <= 4 })
            from.prefetchPaths = [PrefetchPath(\.books, then: [PrefetchPath(\.tags)]), PrefetchPath(\.publisher)]
            let authors = try await postgres.fetchWithRelationships(from)
            #expect(harness.statements.count - before == 4, "\(harness.statements.dropFirst(before))")
            for author in authors {
                for book in try authors.related(\.books, of: author) {
                    #expect(try authors.related(\.tags, of: book) == expectedTags[book.id] ?? [])
                }
            }

            // Owners without any join row: the query runs and answers nothing.
            before = harness.statements.count
            let none = try await postgres.fetchWithRelationships(
                FetchDescriptor<RelTag>(predicate: #Predicate { $0.id == 7 }, relationshipKeyPathsForPrefetching: [\.books]))
            #expect(harness.statements.count - before == 2)
            #expect(try none.related(\.books, of: none[0]).isEmpty)
        }
    }

    @Test("Deleting a book or a tag cascades to the join rows on both stores; prefetch reflects it", arguments: StoreKind.allCases)
    func cascade(kind: StoreKind) async throws {
        try await RelationshipHarness.with(kind) { harness in
            let sample = RelationshipSchema.sample(books: 12)
            let tagSample = RelationshipSchema.tagSample(books: 12)
            try await harness.seed(sample)
            try await harness.seed(tagSample)
            // Book 10 (not reviewed: its delete is not restricted) has one tag; tag 1 pairs with books 6 and 12.
            let bookTags = try await harness.store.fetch(RelBookTag.self).map(\.value)
            #expect(bookTags.count == tagSample.bookTags.count)

            var changes = ChangeSet()
            changes.delete(RelBook.self, id: 10)
            changes.delete(RelTag.self, id: 1)
            _ = try await harness.store.apply(changes)

            let remaining = Set(try await harness.store.fetch(RelBookTag.self).map(\.value.id))
            let expected = Set(tagSample.bookTags.filter { $0.book.id != 10 && $0.tag.id != 1 }.map(\.id))
            #expect(remaining == expected)
            #expect(remaining.count < tagSample.bookTags.count - 1)

            let tags = try await harness.store.fetchWithRelationships(
                FetchDescriptor<RelTag>(relationshipKeyPathsForPrefetching: [\.books]))
            #expect(!tags.contains { $0.id == 1 })
            for tag in tags {
                let books = try tags.related(\.books, of: tag).map(\.id)
                #expect(!books.contains(10))
                #expect(books == tagSample.bookTags.filter { $0.tag.id == tag.id && $0.book.id != 10 }.map(\.book.id).sorted())
            }
            // A join row naming a missing book is refused on both stores (the join entity's foreign key).
            var orphan = ChangeSet()
            orphan.insert(RelBookTag(book: 10, tag: 2))
            let error = await #expect(throws: PGError.self) { _ = try await harness.store.apply(orphan) }
            #expect(error?.sqlState == .foreignKeyViolation)
        }
    }
}
