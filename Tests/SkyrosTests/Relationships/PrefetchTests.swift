import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestEntities
import SkyrosTestSupport
import Testing

/// `fetchWithRelationships`: one query for the rows and exactly one per relationship, at every level, with the
/// same results on both stores.
@Suite("Prefetching relationships")
struct PrefetchTests {
    @Test("100 books with [\\.author]: exactly 2 queries, and every author answered from memory", arguments: StoreKind.allCases)
    func booksWithAuthors(kind: StoreKind) async throws {
        try await RelationshipHarness.with(kind) { harness in
            let sample = RelationshipSchema.sample()
            try await harness.seed(sample)
            let (fetchesBefore, statementsBefore) = (harness.store.fetchCount, harness.statements.count)

            let books = try await harness.store.fetchWithRelationships(
                FetchDescriptor<RelBook>(relationshipKeyPathsForPrefetching: [\.author]))

            #expect(harness.store.fetchCount - fetchesBefore == 2)
            let authors = Dictionary(uniqueKeysWithValues: sample.authors.map { ($0.id, $0) })
            #expect(books.rows == sample.books)
            for book in books {
                #expect(try books.related(\.author, of: book) == authors[book.author.id])
            }
            if kind == .postgres {
                let statements = Array(harness.statements.dropFirst(statementsBefore))
                #expect(statements.count == 2, "\(statements)")
                #expect(statements.last?.contains("\"id\" = ANY($1)") == true, "\(statements)")
            }
            // Reading every author ran nothing more.
            #expect(harness.store.fetchCount - fetchesBefore == 2)
            if kind == .postgres { #expect(harness.statements.count - statementsBefore == 2) }
        }
    }

    @Test("Nested books → author → publisher: 3 queries; a nil reference answers nil", arguments: StoreKind.allCases)
    func nestedToOne(kind: StoreKind) async throws {
        try await RelationshipHarness.with(kind) { harness in
            let sample = RelationshipSchema.sample()
            try await harness.seed(sample)
            let (fetchesBefore, statementsBefore) = (harness.store.fetchCount, harness.statements.count)

            var descriptor = FetchDescriptor<RelBook>(sortBy: [SortDescriptor(\.title)], fetchLimit: 40)
            descriptor.prefetchPaths = [PrefetchPath(\.author, then: [PrefetchPath(\.publisher)])]
            let books = try await harness.store.fetchWithRelationships(descriptor)

            #expect(harness.store.fetchCount - fetchesBefore == 3)
            if kind == .postgres { #expect(harness.statements.count - statementsBefore == 3, "\(harness.statements.dropFirst(statementsBefore))") }
            let authors = Dictionary(uniqueKeysWithValues: sample.authors.map { ($0.id, $0) })
            let publishers = Dictionary(uniqueKeysWithValues: sample.publishers.map { ($0.id, $0) })
            #expect(books.count == 40)
            var sawNoPublisher = false
            for book in books {
                let author = try #require(try books.related(\.author, of: book))
                #expect(author == authors[book.author.id])
                let publisher = try books.related(\.publisher, of: author)
                #expect(publisher == author.publisher.flatMap { publishers[$0.id] })
                if author.publisher == nil { sawNoPublisher = true }
            }
            #expect(sawNoPublisher)
            // Not prefetched: refused, not loaded behind the app's back.
            let error = try #require(throws: RelationshipError.self) { try books.related(\.reviews, of: books[0]) }
            #expect(error.code == .notPrefetched)
        }
    }

    @Test("To-many: authors with their books and each book's reviews, in order, on both stores", arguments: StoreKind.allCases)
    func toMany(kind: StoreKind) async throws {
        try await RelationshipHarness.with(kind) { harness in
            let sample = RelationshipSchema.sample()
            try await harness.seed(sample)
            let fetchesBefore = harness.store.fetchCount

            var descriptor = FetchDescriptor<RelAuthor>(predicate: #Predicate { $0.id <= 6 })
            descriptor.prefetchPaths = [PrefetchPath(\.books, then: [PrefetchPath(\.reviews)]), PrefetchPath(\.publisher)]
            let authors = try await harness.store.fetchWithRelationships(descriptor)

            #expect(harness.store.fetchCount - fetchesBefore == 4)
            #expect(authors.map(\.id) == [1, 2, 3, 4, 5, 6])
            for author in authors {
                let books = try authors.related(\.books, of: author)
                #expect(books == sample.books.filter { $0.author.id == author.id })
                for book in books {
                    #expect(try authors.related(\.reviews, of: book) == sample.reviews.filter { $0.book.id == book.id })
                }
            }
            // The inverse of a publisher's authors, through an optional reference.
            let publishers = try await harness.store.fetchWithRelationships(
                FetchDescriptor<RelPublisher>(relationshipKeyPathsForPrefetching: [\.authors]))
            for publisher in publishers {
                #expect(try publishers.related(\.authors, of: publisher) == sample.authors.filter { $0.publisher?.id == publisher.id })
            }
        }
    }

    @Test("No rows, or no reference: no extra query", arguments: StoreKind.allCases)
    func nothingToLoad(kind: StoreKind) async throws {
        try await RelationshipHarness.with(kind) { harness in
            let before = harness.store.fetchCount
            let books = try await harness.store.fetchWithRelationships(
                FetchDescriptor<RelBook>(relationshipKeyPathsForPrefetching: [\.author]))
            #expect(books.isEmpty)
            #expect(harness.store.fetchCount - before == 1)
        }
    }

    @Test("A key path that is not a relationship is refused before any query", arguments: StoreKind.allCases)
    func notARelationship(kind: StoreKind) async throws {
        try await RelationshipHarness.with(kind) { harness in
            let before = harness.store.fetchCount
            let error = await #expect(throws: RelationshipError.self) {
                _ = try await harness.store.fetchWithRelationships(FetchDescriptor<RelBook>(relationshipKeyPathsForPrefetching: [\.title]))
            }
            #expect(error?.code == .notARelationship)
            #expect(harness.store.fetchCount == before)
        }
    }
}
