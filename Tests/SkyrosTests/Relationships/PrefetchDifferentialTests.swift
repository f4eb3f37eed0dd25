import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestEntities
import SkyrosTestFixtures
import SkyrosTestSupport
import Testing

/// To-one and to-many prefetching over generated data: the in-memory store and PostgreSQL give the same rows and
/// the same related rows, case after case.
@Suite("Prefetching: in memory vs PostgreSQL")
struct PrefetchDifferentialTests {
    /// Everything a prefetching fetch of authors answers, flattened so that two stores' answers compare.
    struct Answer: Equatable {
        var authors: [Int64] = []
        var publisher: [Int64?] = []
        var books: [[Int64]] = []
        var reviews: [[[Int64]]] = []
        var publishersAuthors: [[Int64]] = []
    }

    static func data(_ random: inout SeededGenerator)
        -> (publishers: [RelPublisher], authors: [RelAuthor], books: [RelBook], reviews: [RelReview])
    {
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
        return (publishers, authors, books, reviews)
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
        descriptor.prefetchPaths = [PrefetchPath(\.books, then: [PrefetchPath(\.reviews)]), PrefetchPath(\.publisher)]
        return descriptor
    }

    static func answer(_ store: any Store, _ descriptor: FetchDescriptor<RelAuthor>) async throws -> Answer {
        let authors = try await store.fetchWithRelationships(descriptor)
        var answer = Answer()
        for author in authors {
            answer.authors.append(author.id)
            answer.publisher.append(try authors.related(\.publisher, of: author)?.id)
            let books = try authors.related(\.books, of: author)
            answer.books.append(books.map(\.id))
            answer.reviews.append(try books.map { try authors.related(\.reviews, of: $0).map(\.id) })
        }
        let publishers = try await store.fetchWithRelationships(
            FetchDescriptor<RelPublisher>(relationshipKeyPathsForPrefetching: [\.authors]))
        answer.publishersAuthors = try publishers.map { try publishers.related(\.authors, of: $0).map(\.id) }
        return answer
    }

    @Test("250 cases over 25 generated data sets: identical answers")
    func differential() async throws {
        var random = SeededGenerator(seed: 0x5EED_0033)
        try await RelationshipHarness.with(.postgres) { postgres in
            var cases = 0
            var related = 0
            for _ in 0..<25 {
                let data = Self.data(&random)
                try await postgres.execute(
                    "TRUNCATE \(postgres.table("rel_reviews")), \(postgres.table("rel_books")), \(postgres.table("rel_authors")), \(postgres.table("rel_publishers"))")
                try await postgres.seed(data)
                let memory = InMemoryStore()
                var changes = ChangeSet()
                changes.bulkInsert(data.publishers)
                changes.bulkInsert(data.authors)
                changes.bulkInsert(data.books)
                changes.bulkInsert(data.reviews)
                _ = try await memory.apply(changes)
                for _ in 0..<10 {
                    let descriptor = Self.descriptor(&random)
                    let expected = try await Self.answer(memory, descriptor)
                    let actual = try await Self.answer(postgres.store, descriptor)
                    #expect(actual == expected)
                    cases += 1
                    related += expected.books.joined().count + expected.reviews.joined().joined().count
                }
            }
            #expect(cases == 250)
            // The generated data exercised the relationships (not only empty answers).
            #expect(related > 1000)
        }
    }
}
