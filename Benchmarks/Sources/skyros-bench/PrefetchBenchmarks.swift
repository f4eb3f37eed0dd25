import Foundation
import RawLibPQ
import Skyros
import SkyrosPostgres

/// An author of the prefetch benchmark (`bench_authors`: 1,000 rows).
struct BenchAuthor: Entity {
    var id: Int64
    var name: String

    static let tableName = "bench_authors"
    static let columns: [EntityColumn<BenchAuthor>] = [EntityColumn(\.id, "id"), EntityColumn(\.name, "name")]
}

/// A book of the prefetch benchmark (`bench_books`: 10,000 rows; books 1…100 have authors 1…100).
struct BenchBook: Entity {
    var id: Int64
    var title: String
    var author: Reference<BenchAuthor>

    enum CodingKeys: String, CodingKey {
        case id, title
        case author = "author_id"
    }

    static let tableName = "bench_books"
    static let columns: [EntityColumn<BenchBook>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.author, "author_id"),
    ]
    static let relationships: [Relationship<BenchBook>] = [.toOne(\.author)]
}

/// 100 books with their authors (issue 33): prefetched by a store (two queries) vs the same two queries by raw
/// libpq, and vs N+1 fetches through Skyros (the books, then each book's author by id), in the same run.
struct PrefetchBenchmarks {
    let url: String
    let rounds: Int
    let iterations: Int

    static let books = 100

    func run(into report: inout Report) async throws {
        let config = try PGConfiguration(url: self.url)
        guard let raw = raw_connect(self.url) else { throw BenchmarkFailure(description: "raw connect failed") }
        defer { raw_finish(raw) }
        guard raw_exec(raw, """
            DROP TABLE IF EXISTS bench_books, bench_authors;
            CREATE TABLE bench_authors (id bigint PRIMARY KEY, name text NOT NULL);
            CREATE TABLE bench_books (id bigint PRIMARY KEY, title text NOT NULL,
                                      author_id bigint NOT NULL REFERENCES bench_authors (id));
            INSERT INTO bench_authors SELECT i, 'author ' || i FROM generate_series(1, 1000) AS i;
            INSERT INTO bench_books SELECT i, 'book ' || i, (i - 1) % 1000 + 1 FROM generate_series(1, 10000) AS i;
            ANALYZE bench_authors, bench_books;
            """) == 0 else { throw BenchmarkFailure(description: "prefetch tables not created") }

        let pool = PGConnectionPool(configuration: .init(maximumConnections: 2), postgres: config)
        let store = PostgresStore(pool: pool)
        let limit = Int64(Self.books)
        let plain = FetchDescriptor<BenchBook>(predicate: #Predicate { $0.id <= limit }, sortBy: [SortDescriptor(\.id)])
        var prefetching = plain
        prefetching.relationshipKeyPathsForPrefetching = [\.author]

        // Each form reads every book's author name, so that all three do the same work.
        func prefetched() async throws -> Int {
            let books = try await store.fetchWithRelationships(prefetching)
            var total = 0
            for book in books { total += try books.related(\.author, of: book)?.name.utf8.count ?? 0 }
            return total
        }
        func oneByOne() async throws -> Int {
            var total = 0
            for book in try await store.fetch(plain) {
                total += try await store.object(BenchAuthor.self, id: book.value.author.id)?.value.name.utf8.count ?? 0
            }
            return total
        }
        // The floor of the architecture, with no store: the same two statements through Skyros's client (a pooled
        // connection on its own thread, awaited; each statement prepared once), every value read typed, the
        // books matched to their authors by id. What the store adds on top is row decoding into entities, the
        // predicate's translation and the related rows' index.
        func throughClient() async throws -> Int {
            try await pool.withConnection { connection in
                let books = try await connection.query(
                    "SELECT id, author_id, title FROM bench_books WHERE id <= \(limit) ORDER BY id")
                var rows: [(id: Int64, author: Int64, title: String)] = []
                rows.reserveCapacity(books.count)
                for row in books {
                    let (id, author, title) = try row.decode((Int64, Int64, String).self)
                    rows.append((id, author, title))
                }
                let ids = Array(Set(rows.map(\.author))).sorted()
                var names: [Int64: String] = [:]
                for row in try await connection.query("SELECT id, name FROM bench_authors WHERE id = ANY(\(ids))") {
                    let (id, name) = try row.decode((Int64, String).self)
                    names[id] = name
                }
                return rows.reduce(0) { $0 + (names[$1.author]?.utf8.count ?? 0) }
            }
        }
        let expected = try await oneByOne()
        guard try await throughClient() == expected else {
            throw BenchmarkFailure(description: "the client floor and N+1 read different authors")
        }
        guard try await prefetched() == expected, expected > 0 else {
            throw BenchmarkFailure(description: "prefetch and N+1 read different authors")
        }
        let n = max(20, self.iterations / 20)
        var rawTwo = Measurement()
        var skyros = Measurement()
        var nPlusOne = Measurement()
        var client = Measurement()
        _ = raw_books_with_authors(raw, 20, Int32(Self.books))
        for _ in 0..<20 { _ = try await prefetched(); _ = try await throughClient() }
        for _ in 0..<self.rounds {
            let rawNs = raw_books_with_authors(raw, Int32(n), Int32(Self.books))
            guard rawNs > 0 else { throw BenchmarkFailure(description: "raw books with authors failed") }
            rawTwo.add(totalNanoseconds: rawNs, operations: n)
            skyros.add(totalNanoseconds: try await elapsedNanoseconds {
                for _ in 0..<n { _ = try await prefetched() }
            }, operations: n)
            client.add(totalNanoseconds: try await elapsedNanoseconds {
                for _ in 0..<n { _ = try await throughClient() }
            }, operations: n)
            let fewer = max(5, n / 10)   // 101 round trips each
            nPlusOne.add(totalNanoseconds: try await elapsedNanoseconds {
                for _ in 0..<fewer { _ = try await oneByOne() }
            }, operations: fewer)
        }
        report.add(
            "100 books + their authors: prefetch (2 queries, PostgresStore) vs the same 2 queries (raw libpq)",
            microseconds(rawTwo.median), microseconds(skyros.median), ratio(skyros.median, rawTwo.median), "≤ 1.3×")
        report.add(
            "  floor: the same 2 statements through Skyros's client, no store (PGConnection) vs raw libpq",
            microseconds(rawTwo.median), microseconds(client.median), ratio(client.median, rawTwo.median), "—")
        report.add(
            "  the same through N+1 Skyros fetches (101 queries) vs the prefetch",
            microseconds(skyros.median), microseconds(nPlusOne.median), String(format: "%.1f× slower", nPlusOne.median / skyros.median), "—")
        await pool.shutdown()
    }
}
