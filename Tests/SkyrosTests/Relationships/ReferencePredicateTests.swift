import Foundation
import Logging
@testable import Skyros
@_spi(Benchmarks) @testable import SkyrosStore
import SkyrosPostgres
import SkyrosTestEntities
import SkyrosTestSupport
import SkyrosTesting
import Testing

/// Predicates across to-one relationships on both stores and through a stack: hostile names, a table referring
/// to itself, set-based writes, counts, aggregates, keyset pages, read-your-writes of a renamed target, and an
/// observation moved by another writer renaming the target.
@Suite("Predicates across references", .timeLimit(.minutes(2)))
struct ReferencePredicateTests {
    /// A store with the hostile tables: `o` (targets) and `n` (sources referring to `o` and to `n`).
    func withHostileStore(_ kind: StoreKind, _ body: (any Store) async throws -> Void) async throws {
        switch kind {
        case .inMemory:
            try await body(InMemoryStore())
        case .postgres:
            let pool = PGConnectionPool(configuration: .init(maximumConnections: 2), postgres: try TestServer.configuration, logger: Logger(label: "skyros.refpred"))
            let schema = StoreTestServer.uniqueSchemaName()
            let store = PostgresStore(pool: pool, schema: schema)
            try await withCleanup {
                try await store.createSchemaIfNeeded()
                try await pool.withConnection { connection in
                    _ = try await connection.execute(script: HostileSource.createTables { [schema, $0].map(quoteIdentifier).joined(separator: ".") })
                }
                try await body(store)
            } cleanup: {
                await pool.shutdown()
                await TestServer.dropSchema(schema)
            }
        }
    }

    static let targets = [
        HostileTarget(id: 1, title: "same", rank: 5, quoted: "it's"),
        HostileTarget(id: 2, title: "other", rank: 1, quoted: nil),
        HostileTarget(id: 3, title: "n", rank: 9, quoted: "\"q\""),
    ]
    /// Source 1 is the root; 2 and 3 are its children, 4 a child of 3 (three levels of one table).
    static let sources = [
        HostileSource(id: 1, title: "same", rank: 1, target: 1, parent: nil),
        HostileSource(id: 2, title: "x", rank: 2, target: 2, parent: 1),
        HostileSource(id: 3, title: "n", rank: 3, target: 3, parent: 1),
        HostileSource(id: 4, title: "o", rank: 4, target: 1, parent: 3),
    ]

    func ids(_ store: any Store, _ predicate: Predicate<HostileSource>) async throws -> [Int] {
        try await store.fetch(FetchDescriptor(predicate: predicate)).map(\.value.id)
    }

    @Test("Hostile names and a table referring to itself, on both stores", arguments: StoreKind.allCases)
    func hostileNames(kind: StoreKind) async throws {
        try await self.withHostileStore(kind) { store in
            var changes = ChangeSet()
            changes.bulkInsert(Self.targets)
            changes.bulkInsert(Self.sources)
            _ = try await store.apply(changes)

            // The target's column named as the source's own: each read from its table.
            #expect(try await self.ids(store, #Predicate { $0.target.title == "same" }) == [1, 4])
            #expect(try await self.ids(store, #Predicate { ($0.target.title ?? "") == $0.title }) == [1, 3])
            #expect(try await self.ids(store, #Predicate { ($0.target.rank ?? 0) > $0.rank }) == [1, 3, 4])
            #expect(try await self.ids(store, #Predicate { $0.target.quoted == "it's" }) == [1, 4])
            #expect(try await self.ids(store, #Predicate { $0.target.quoted != "it's" }) == [2, 3])
            #expect(try await self.ids(store, #Predicate { $0.target.quoted?.contains("q") == true }) == [3])
            // The parent (same table, in a column named as the first alias), and the parent's target.
            #expect(try await self.ids(store, #Predicate { $0.parent?.title == "same" }) == [2, 3])
            #expect(try await self.ids(store, #Predicate { $0.parent?.title != "same" }) == [1, 4])
            // A missing parent's title is nil, which differs from "n" (as in Swift).
            #expect(try await self.ids(store, #Predicate { ($0.parent?.rank ?? 0) < $0.rank && $0.parent?.title != "n" }) == [1, 2, 3])
            #expect(try await self.ids(store, #Predicate { $0.parent?.target?.title == "n" }) == [4])
            #expect(try await self.ids(store, #Predicate { $0.parent?.parent?.title == "same" }) == [4])
            #expect(try await self.ids(store, #Predicate { !($0.parent?.target?.rank == 5) || $0.title == "x" }) == [1, 2, 4])

            // Count, aggregate and a keyset page of the same predicate.
            let byTarget = #Predicate<HostileSource> { $0.target.title == "same" || $0.parent?.title == "n" }
            #expect(try await store.count(FetchDescriptor(predicate: byTarget)) == 2)
            let total = try await store.aggregate(FetchDescriptor(predicate: byTarget), .sum(\.rank))
            #expect(total == 5)
            let page = try await store.fetchPage(FetchDescriptor(predicate: byTarget, sortBy: [SortDescriptor(\.rank)], fetchLimit: 1))
            #expect(page.items.map(\.value.id) == [1])
            let next = try await store.fetchPage(FetchDescriptor(predicate: byTarget, sortBy: [SortDescriptor(\.rank)], fetchLimit: 1), after: page.nextCursor)
            #expect(next.items.map(\.value.id) == [4])

            // Set-based writes select their rows the same way.
            var update = ChangeSet()
            update.update(where: #Predicate<HostileSource> { $0.parent?.target?.rank == 5 }, set: [.set(\.rank, to: 20)])
            _ = try await store.apply(update)
            #expect(try await self.ids(store, #Predicate { $0.rank == 20 }) == [2, 3])
            var delete = ChangeSet()
            delete.delete(where: #Predicate<HostileSource> { $0.target.quoted == nil || $0.parent?.target?.title == "n" })
            _ = try await store.apply(delete)
            #expect(try await self.ids(store, #Predicate { $0.rank > 0 }) == [1, 3])
        }
    }

    static let entities: [any Entity.Type] = [PredPublisher.self, PredAuthor.self, PredBook.self]

    func withStack(_ kind: StackKind, _ body: (DataStack, String?) async throws -> Void) async throws {
        switch kind {
        case .inMemory:
            try await withTestStack(DataStackConfiguration(store: .inMemory, entities: Self.entities), on: .inMemory) { try await body($0, nil) }
        case .postgres:
            let sql = "-- migrate:up\n" + PredicateReferenceSchema.createTables { $0 }
            try await StackTestServer.withMigrations(["1_pred.sql": sql]) { directory in
                let configuration = DataStackConfiguration(store: .inMemory, migrations: .directory(directory), entities: Self.entities)
                try await TestServer.database.withStack(configuration, prefix: "refpred") { stack in
                    try await body(stack, (stack.store as? PostgresStore)?.schema)
                }
            }
        }
    }

    func seed(_ stack: DataStack) async throws {
        try await stack.write(durability: .committed) { context in
            try context.insert(PredPublisher(id: 1, name: "Ace", country: "FR"))
            try context.insert(PredAuthor(id: 1, name: "Ada", nick: nil, born: 1815, rank: 1, publisher: 1, mentor: nil))
            try context.insert(PredAuthor(id: 2, name: "Bob", nick: "b", born: 1900, rank: nil, publisher: nil, mentor: 1))
            for id in 1...4 { try context.insert(PredBook(id: id, title: "t\(id)", pages: id * 10, author: id % 2 + 1, coAuthor: nil)) }
        }
    }

    @Test("A context reads its own unsaved and queued changes of the referenced rows", arguments: StackKind.allCases)
    func readYourWritesAcrossReferences(kind: StackKind) async throws {
        try await self.withStack(kind) { stack, _ in
            try await self.seed(stack)
            let byAda = FetchDescriptor<PredBook>(predicate: #Predicate { $0.author.name == "Ada" })
            #expect(try await stack.mainContext.fetch(byAda).map(\.id) == [2, 4])
            try await stack.write(durability: .committed) { context in
                // Unsaved: Bob renamed Ada, a new book by him, book 2 moved to him.
                try await context.update(PredAuthor(id: 2, name: "Ada", nick: "b", born: 1900, rank: nil, publisher: nil, mentor: 1))
                try await context.update(PredAuthor(id: 1, name: "Ann", nick: nil, born: 1815, rank: 1, publisher: 1, mentor: nil))
                try context.insert(PredBook(id: 5, title: "t5", pages: 50, author: 2, coAuthor: nil))
                #expect(try await context.fetch(byAda).map(\.id) == [1, 3, 5])
                #expect(try await context.count(byAda) == 3)
                #expect(try await context.fetch(FetchDescriptor<PredBook>(predicate: #Predicate { $0.author.mentor?.name == "Ann" })).map(\.id) == [1, 3, 5])
                let pages = try await context.aggregate(byAda, .sum(\.pages))
                #expect(pages == 90)
            }
            // Saved (and, on PostgreSQL, committed): the main context and the store agree.
            #expect(try await stack.mainContext.fetch(byAda).map(\.id) == [1, 3, 5])
            #expect(try await stack.store.fetch(byAda).map(\.value.id) == [1, 3, 5])
            #expect(try await stack.mainContext.count(byAda) == 3)
        }
    }

    /// The latest ids an observation yielded.
    final class Latest: @unchecked Sendable {
        private let lock = NSLock()
        private var value: [Int]?
        func set(_ ids: [Int]) { self.lock.withLock { self.value = ids } }
        var ids: [Int]? { self.lock.withLock { self.value } }
    }

    @Test("An observation of books by their author's name moves when the author is renamed", arguments: StackKind.allCases)
    func observationMovesWhenTheTargetChanges(kind: StackKind) async throws {
        try await self.withStack(kind) { stack, schema in
            try await self.seed(stack)
            let latest = Latest()
            let observer = Task {
                for try await books in stack.observe(FetchDescriptor<PredBook>(predicate: #Predicate { $0.author.name == "Ada" })) {
                    latest.set(books.values.map(\.id))
                }
            }
            defer { observer.cancel() }
            await expectEventually("the first result") { latest.ids == [2, 4] }
            // Only the authors table changes: by another writer (psql) on PostgreSQL, by the stack in memory.
            if let schema {
                try await Psql.run("UPDATE pred_authors SET name = 'Ada' WHERE id = 2; UPDATE pred_authors SET name = 'Ann' WHERE id = 1", schema: schema)
            } else {
                try await stack.write(durability: .committed) { context in
                    try await context.update(PredAuthor(id: 2, name: "Ada", nick: "b", born: 1900, rank: nil, publisher: nil, mentor: 1))
                    try await context.update(PredAuthor(id: 1, name: "Ann", nick: nil, born: 1815, rank: 1, publisher: 1, mentor: nil))
                }
            }
            await expectEventually("the renamed authors moved the observation") { latest.ids == [1, 3] }
        }
    }
}

/// The plan PostgreSQL picks for an equality across a reference: a join through the indexes (the `EXISTS` is a
/// semi-join), not a subquery run for each book.
@Suite("Predicates across references: plans (EXPLAIN on 50,000 books)")
struct ReferencePredicatePlanTests {
    @Test func equalityAcrossAReferenceIsAJoinServedByIndexes() async throws {
        try await TestServer.withSchema("pred_ref_plan") { schema in
            try await TestServer.withConnection { connection in
                let s = quoteIdentifier(schema)
                _ = try await connection.execute(script: PredicateReferenceSchema.createTables { "\(s).\(quoteIdentifier($0))" } + """
                    INSERT INTO \(s).pred_authors (id, name, born) SELECT g, 'author ' || g, 1900 FROM generate_series(1, 5000) AS g;
                    INSERT INTO \(s).pred_books (id, title, pages, author_id)
                        SELECT g, md5(g::text), g % 500, g % 5000 + 1 FROM generate_series(1, 50000) AS g;
                    CREATE INDEX pred_authors_name ON \(s).pred_authors (name);
                    CREATE INDEX pred_books_author ON \(s).pred_books (author_id);
                    ANALYZE \(s).pred_authors; ANALYZE \(s).pred_books;
                    """)
                let name = "author 77"
                let query = try SQLQueryBuilder.select(
                    FetchDescriptor<PredBook>(predicate: #Predicate { $0.author.name == name }), schema: schema, includeVersion: true)
                let plan = try await connection.query(PGQuery(unsafeSQL: "EXPLAIN " + query.sql, binds: query.binds))
                    .map { try $0.decode(String.self, at: 0) }.joined(separator: "\n")
                #expect(!plan.contains("SubPlan"), "\(plan)")
                #expect(plan.contains("pred_authors_name"), "\(plan)")
                #expect(plan.contains("pred_books_author"), "\(plan)")
                let rows = try await connection.query(query)
                #expect(rows.count == 10)
            }
        }
    }
}
