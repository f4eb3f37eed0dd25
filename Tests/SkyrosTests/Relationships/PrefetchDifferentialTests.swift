import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestEntities
import SkyrosTestFixtures
import SkyrosTestSupport
import Testing

/// To-one, to-many and many-to-many prefetching over generated data: the in-memory store and PostgreSQL give the
/// same rows and the same related rows, case after case.
@Suite("Prefetching: in memory vs PostgreSQL")
struct PrefetchDifferentialTests {
    /// Everything a prefetching fetch of authors answers, flattened so that two stores' answers compare.
    struct Answer: Equatable {
        var authors: [Int64] = []
        var publisher: [Int64?] = []
        var books: [[Int64]] = []
        var reviews: [[[Int64]]] = []
        var publishersAuthors: [[Int64]] = []
        /// Each book's tags (many-to-many), by author.
        var tags: [[[Int64]]] = []
        /// A random query of tags: each tag's books, and each of those books' tags (many-to-many from many-to-many).
        var tagRows: [Int64] = []
        var tagBooks: [[Int64]] = []
        var tagBookTags: [[[Int64]]] = []
    }

    typealias Data = (
        publishers: [RelPublisher], authors: [RelAuthor], books: [RelBook], reviews: [RelReview], tags: [RelTag], bookTags: [RelBookTag]
    )

    static func data(_ random: inout SeededGenerator) -> Data {
        let publishers = (1...Int.random(in: 1...5, using: &random)).map { RelPublisher(id: Int64($0), name: "p\($0)") }
        let authors = (1...Int.random(in: 1...30, using: &random)).map { index in
            RelAuthor(
                id: Int64(index), name: "a\(Int.random(in: 0...5, using: &random))",
                publisher: Bool.random(using: &random) ? nil : Int64.random(in: 1...Int64(publishers.count), using: &random))
        }
        let books = (0..<Int.random(in: 0...80, using: &random)).map { index in
            RelBook(id: Int64(index + 1), title: "b\(Int.random(in: 0...9, using: &random))",
                    author: Int64.random(in: 1...Int64(authors.count), using: &random))
        }
        let reviews = books.isEmpty ? [] : (0..<Int.random(in: 0...60, using: &random)).map { index in
            RelReview(id: Int64(index + 1), book: Int64.random(in: 1...Int64(books.count), using: &random),
                      stars: Int.random(in: 1...5, using: &random))
        }
        let tags = (1...Int.random(in: 1...8, using: &random)).map { RelTag(id: Int64($0), label: "t\(Int.random(in: 0...3, using: &random))") }
        var pairs = Set<[Int64]>()
        if !books.isEmpty {
            for _ in 0..<Int.random(in: 0...120, using: &random) {
                pairs.insert([Int64.random(in: 1...Int64(books.count), using: &random), Int64.random(in: 1...Int64(tags.count), using: &random)])
            }
        }
        let bookTags = pairs.sorted { $0.lexicographicallyPrecedes($1) }.map { RelBookTag(book: $0[0], tag: $0[1]) }
        return (publishers, authors, books, reviews, tags, bookTags)
    }

    static func tagDescriptor(_ random: inout SeededGenerator) -> FetchDescriptor<RelTag> {
        let label = "t\(Int.random(in: 0...3, using: &random))"
        let low = Int64.random(in: 0...6, using: &random)
        var descriptor: FetchDescriptor<RelTag>
        switch Int.random(in: 0...2, using: &random) {
        case 0: descriptor = FetchDescriptor(predicate: #Predicate { $0.label == label })
        case 1: descriptor = FetchDescriptor(predicate: #Predicate { $0.id >= low }, sortBy: [SortDescriptor(\.label, order: .reverse)])
        default: descriptor = FetchDescriptor(fetchLimit: Int.random(in: 0...5, using: &random))
        }
        descriptor.prefetchPaths = [PrefetchPath(\.books, then: [PrefetchPath(\.tags)])]
        return descriptor
    }

    static func descriptor(_ random: inout SeededGenerator) -> FetchDescriptor<RelAuthor> {
        let low = Int64.random(in: 0...20, using: &random)
        let name = "a\(Int.random(in: 0...5, using: &random))"
        var descriptor: FetchDescriptor<RelAuthor>
        switch Int.random(in: 0...3, using: &random) {
        case 0: descriptor = FetchDescriptor(predicate: #Predicate { $0.id >= low })
        case 1: descriptor = FetchDescriptor(predicate: #Predicate { $0.name == name }, sortBy: [SortDescriptor(\.name, order: .reverse)])
        case 2: descriptor = FetchDescriptor(predicate: #Predicate { $0.publisher == nil })
        default: descriptor = FetchDescriptor(sortBy: [SortDescriptor(\.name)], fetchLimit: Int.random(in: 0...10, using: &random))
        }
        descriptor.prefetchPaths = [
            PrefetchPath(\.books, then: [PrefetchPath(\.reviews), PrefetchPath(\.tags)]), PrefetchPath(\.publisher),
        ]
        return descriptor
    }

    static func answer(
        _ store: any Store, _ descriptor: FetchDescriptor<RelAuthor>, _ tagDescriptor: FetchDescriptor<RelTag>
    ) async throws -> Answer {
        let authors = try await store.fetchWithRelationships(descriptor)
        var answer = Answer()
        for author in authors {
            answer.authors.append(author.id)
            answer.publisher.append(try authors.related(\.publisher, of: author)?.id)
            let books = try authors.related(\.books, of: author)
            answer.books.append(books.map(\.id))
            answer.reviews.append(try books.map { try authors.related(\.reviews, of: $0).map(\.id) })
            answer.tags.append(try books.map { try authors.related(\.tags, of: $0).map(\.id) })
        }
        let tags = try await store.fetchWithRelationships(tagDescriptor)
        for tag in tags {
            answer.tagRows.append(tag.id)
            let books = try tags.related(\.books, of: tag)
            answer.tagBooks.append(books.map(\.id))
            answer.tagBookTags.append(try books.map { try tags.related(\.tags, of: $0).map(\.id) })
        }
        let publishers = try await store.fetchWithRelationships(
            FetchDescriptor<RelPublisher>(relationshipKeyPathsForPrefetching: [\.authors]))
        answer.publishersAuthors = try publishers.map { try publishers.related(\.authors, of: $0).map(\.id) }
        return answer
    }

    @Test("250 cases over 25 generated data sets, each comparing to-many and many-to-many: identical answers")
    func differential() async throws {
        var random = SeededGenerator(seed: 0x5EED_0033)
        try await RelationshipHarness.with(.postgres) { postgres in
            var cases = 0
            var related = 0
            var paired = 0
            for _ in 0..<25 {
                let data = Self.data(&random)
                try await postgres.execute(
                    "TRUNCATE \(postgres.table("o")), \(postgres.table("rel_tag\"s")), \(postgres.table("rel_reviews")), \(postgres.table("rel_books")), \(postgres.table("rel_authors")), \(postgres.table("rel_publishers"))")
                try await postgres.seed((data.publishers, data.authors, data.books, data.reviews))
                try await postgres.seed((data.tags, data.bookTags))
                let memory = InMemoryStore()
                var changes = ChangeSet()
                changes.bulkInsert(data.publishers)
                changes.bulkInsert(data.authors)
                changes.bulkInsert(data.books)
                changes.bulkInsert(data.reviews)
                changes.bulkInsert(data.tags)
                changes.bulkInsert(data.bookTags)
                _ = try await memory.apply(changes)
                for _ in 0..<10 {
                    let descriptor = Self.descriptor(&random)
                    let tagDescriptor = Self.tagDescriptor(&random)
                    let expected = try await Self.answer(memory, descriptor, tagDescriptor)
                    // The PostgreSQL store itself: its many-to-many prefetch is one join query.
                    let actual = try await Self.answer(postgres.store.base, descriptor, tagDescriptor)
                    #expect(actual == expected)
                    if cases % 10 == 0 {
                        // Once per data set, the path a store other than PostgresStore takes (two fetches per
                        // many-to-many, here through the counting wrapper) gives the same answer too.
                        #expect(try await Self.answer(postgres.store, descriptor, tagDescriptor) == expected)
                    }
                    cases += 1
                    related += expected.books.joined().count + expected.reviews.joined().joined().count
                    paired += expected.tags.joined().joined().count + expected.tagBooks.joined().count
                        + expected.tagBookTags.joined().joined().count
                }
            }
            #expect(cases == 250)
            // The generated data exercised the relationships (not only empty answers).
            #expect(related > 1000)
            #expect(paired > 1000, "\(paired)")
        }
    }
}
