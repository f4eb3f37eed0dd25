import Foundation
import Logging
import Skyros
import SkyrosPostgres
import SkyrosTestEntities
import SkyrosTestSupport
import SkyrosTesting
import Testing

/// `DataContext.fetchWithRelationships`: context fetches (pending changes applied), and the prefetched rows
/// enter the main context's cache.
@Suite("Prefetching through a context")
struct ContextPrefetchTests {
    static let entities: [any Entity.Type] = [RelPublisher.self, RelAuthor.self, RelBook.self, RelReview.self, RelTag.self, RelBookTag.self]

    func withStack(_ kind: StackKind, _ body: (DataStack, RecordingLogHandler) async throws -> Void) async throws {
        let (logger, handler) = RecordingLogHandler.logger(label: "skyros.relationships")
        switch kind {
        case .inMemory:
            try await withTestStack(DataStackConfiguration(store: .inMemory, entities: Self.entities), on: .inMemory) { try await body($0, handler) }
        case .postgres:
            let sql = "-- migrate:up\n" + RelationshipSchema.createTables { $0 }
            try await StackTestServer.withMigrations(["1_rel.sql": sql]) { directory in
                let configuration = DataStackConfiguration(store: .inMemory, migrations: .directory(directory), entities: Self.entities)
                try await TestServer.database.withStack(configuration, prefix: "rel ctx", logger: logger) { try await body($0, handler) }
            }
        }
    }

    /// The statements that read the relationship tables, run since `start`.
    func reads(_ handler: RecordingLogHandler, since start: Int) -> [String] {
        handler.entries.dropFirst(start).compactMap { $0.metadata[PGLogKey.sql].map { "\($0)" } }
            .filter { $0.hasPrefix("SELECT") && $0.contains("\"rel_") }
    }

    @Test("Two queries for 100 books and their authors; the authors then come from the main context's cache", arguments: StackKind.allCases)
    func mainContextCaches(kind: StackKind) async throws {
        try await self.withStack(kind) { stack, handler in
            let sample = RelationshipSchema.sample()
            try await stack.write(durability: .committed) { context in
                try context.bulkInsert(sample.publishers)
                try context.bulkInsert(sample.authors)
                try context.bulkInsert(sample.books)
            }
            let start = handler.entries.count
            let books = try await stack.mainContext.fetchWithRelationships(
                FetchDescriptor<RelBook>(relationshipKeyPathsForPrefetching: [\.author]))
            #expect(books.rows == sample.books)
            for book in books { #expect(try books.related(\.author, of: book)?.id == book.author.id) }
            if kind == .postgres { #expect(self.reads(handler, since: start).count == 2, "\(self.reads(handler, since: start))") }
            for author in sample.authors {
                #expect(try await stack.mainContext.object(RelAuthor.self, id: author.id) == author)
            }
            if kind == .postgres { #expect(self.reads(handler, since: start).count == 2, "the authors were not cached") }
        }
    }

    @Test("A plain fetch naming relationships prefetches them into the main context's cache", arguments: StackKind.allCases)
    func plainFetchWarmsTheCache(kind: StackKind) async throws {
        try await self.withStack(kind) { stack, handler in
            let sample = RelationshipSchema.sample()
            try await stack.write(durability: .committed) { context in
                try context.bulkInsert(sample.publishers)
                try context.bulkInsert(sample.authors)
                try context.bulkInsert(sample.books)
            }
            let start = handler.entries.count
            let books = try await stack.mainContext.fetch(
                FetchDescriptor<RelBook>(fetchLimit: 100, relationshipKeyPathsForPrefetching: [\.author]))
            #expect(books == sample.books)
            for book in books {
                #expect(try await stack.mainContext.object(RelAuthor.self, id: book.author.id)?.id == book.author.id)
            }
            if kind == .postgres { #expect(self.reads(handler, since: start).count == 2, "\(self.reads(handler, since: start))") }
        }
    }

    @Test("Through a context a many-to-many is two fetches (unsaved join rows count, the tags enter the main cache); in a snapshot one", arguments: StackKind.allCases)
    func manyToManyThroughContexts(kind: StackKind) async throws {
        try await self.withStack(kind) { stack, handler in
            try await stack.write(durability: .committed) { context in
                try context.insert(RelAuthor(id: 1, name: "ann", publisher: nil))
                for id in 1...3 { try context.insert(RelBook(id: Int64(id), title: "b\(id)", author: 1)) }
                try context.insert(RelTag(id: 1, label: "z"))
                try context.insert(RelTag(id: 2, label: "y"))
                try context.insert(RelTag(id: 3, label: "x"))
                try context.bulkInsert([RelBookTag(book: 1, tag: 1), RelBookTag(book: 1, tag: 2), RelBookTag(book: 2, tag: 3)])
            }
            func tagsByBook(_ books: PrefetchedResults<RelBook>) throws -> [[Int64]] {
                try books.map { try books.related(\.tags, of: $0).map(\.id) }
            }
            let start = handler.entries.count
            let books = try await stack.mainContext.fetchWithRelationships(
                FetchDescriptor<RelBook>(relationshipKeyPathsForPrefetching: [\.tags]))
            #expect(try tagsByBook(books) == [[2, 1], [3], []])
            let reads = { handler.entries.dropFirst(start).compactMap { $0.metadata[PGLogKey.sql].map { "\($0)" } }
                .filter { $0.hasPrefix("SELECT") && ($0.contains("\"rel_") || $0.contains(".\"o\"")) } }
            if kind == .postgres { #expect(reads().count == 3, "\(reads())") }
            for id: Int64 in 1...3 { #expect(try await stack.mainContext.object(RelTag.self, id: id)?.id == id) }
            if kind == .postgres { #expect(reads().count == 3, "the tags were not cached: \(reads())") }

            // Unsaved changes of a context: a join row added, another deleted.
            let context = stack.newBackgroundContext()
            try context.insert(RelBookTag(book: 3, tag: 1))
            try await context.delete(RelBookTag.self, id: CompositeKey(Reference(2), Reference(3)))
            let edited = try await context.fetchWithRelationships(FetchDescriptor<RelBook>(relationshipKeyPathsForPrefetching: [\.tags]))
            #expect(try tagsByBook(edited) == [[2, 1], [], [1]])
            // The main context does not see them.
            let main = try await stack.mainContext.fetchWithRelationships(FetchDescriptor<RelBook>(relationshipKeyPathsForPrefetching: [\.tags]))
            #expect(try tagsByBook(main) == [[2, 1], [3], []])

            // A snapshot: one query for the many-to-many (the tags joined to the join table), inside the snapshot.
            let before = reads().count
            let snapshot = try await stack.readSnapshot {
                try await $0.fetchWithRelationships(FetchDescriptor<RelBook>(relationshipKeyPathsForPrefetching: [\.tags]))
            }
            #expect(try tagsByBook(snapshot) == [[2, 1], [3], []])
            if kind == .postgres {
                let snapshotReads = Array(reads().dropFirst(before))
                #expect(snapshotReads.count == 2 && snapshotReads.last?.contains(" JOIN ") == true, "\(snapshotReads)")
            }
        }
    }

    @Test("A snapshot reader prefetches inside its snapshot", arguments: StackKind.allCases)
    func snapshot(kind: StackKind) async throws {
        try await self.withStack(kind) { stack, handler in
            let sample = RelationshipSchema.sample()
            try await stack.write(durability: .committed) { context in
                try context.bulkInsert(sample.publishers)
                try context.bulkInsert(sample.authors)
                try context.bulkInsert(sample.books)
            }
            let start = handler.entries.count
            let pairs = try await stack.readSnapshot { reader in
                var descriptor = FetchDescriptor<RelBook>(predicate: #Predicate { $0.id <= 30 })
                descriptor.prefetchPaths = [PrefetchPath(\.author, then: [PrefetchPath(\.publisher)])]
                let books = try await reader.fetchWithRelationships(descriptor)
                return try books.map { book in
                    let author = try books.related(\.author, of: book)
                    return (book.id, author?.id, try author.flatMap { try books.related(\.publisher, of: $0)?.id })
                }
            }
            let authors = Dictionary(uniqueKeysWithValues: sample.authors.map { ($0.id, $0) })
            #expect(pairs.map(\.0) == Array(1...30))
            for (id, author, publisher) in pairs {
                let book = sample.books[Int(id) - 1]
                #expect(author == book.author.id)
                #expect(publisher == authors[book.author.id]?.publisher?.id)
            }
            if kind == .postgres { #expect(self.reads(handler, since: start).count == 3, "\(self.reads(handler, since: start))") }
        }
    }

    @Test("A context's unsaved changes are seen by the prefetch", arguments: StackKind.allCases)
    func unsavedChanges(kind: StackKind) async throws {
        try await self.withStack(kind) { stack, _ in
            let sample = RelationshipSchema.sample(authors: 4, books: 8)
            try await stack.write(durability: .committed) { context in
                try context.bulkInsert(sample.publishers)
                try context.bulkInsert(sample.authors)
                try context.bulkInsert(sample.books)
            }
            let context = stack.newBackgroundContext()
            var renamed = sample.authors[0]
            renamed.name = "renamed"
            try await context.update(renamed)
            _ = try context.insert(RelBook(id: 500, title: "new", author: renamed.id))
            let authors = try await context.fetchWithRelationships(
                FetchDescriptor<RelAuthor>(predicate: #Predicate { $0.id == 1 }, relationshipKeyPathsForPrefetching: [\.books]))
            #expect(authors.rows == [renamed])
            let books = try authors.related(\.books, of: renamed)
            #expect(books.map(\.id) == sample.books.filter { $0.author.id == 1 }.map(\.id) + [500])
        }
    }

    @Test("An author deleted by SQL with ON DELETE CASCADE: its books leave the stack's fetches, cache and observers")
    func cascadeFromSQL() async throws {
        try await self.withStack(.postgres) { stack, _ in
            let sample = RelationshipSchema.sample()
            try await stack.write(durability: .committed) { context in
                try context.bulkInsert(sample.publishers)
                try context.bulkInsert(sample.authors)
                try context.bulkInsert(sample.books)
            }
            // Cache the author's books (10, 20, …, 100) in the main context.
            let authors = try await stack.mainContext.fetchWithRelationships(
                FetchDescriptor<RelAuthor>(predicate: #Predicate { $0.id == 1 }, relationshipKeyPathsForPrefetching: [\.books]))
            let books = try authors.related(\.books, of: authors[0])
            #expect(books.map(\.id) == Array(stride(from: 10, through: 100, by: 10)))
            #expect(try await stack.mainContext.object(RelBook.self, id: 10) != nil)
            let observed = Locked<[Int64]>([])
            let observer = Task {
                for try await result in stack.observe(FetchDescriptor<RelBook>(predicate: #Predicate { $0.id <= 20 })) {
                    observed.withLock { $0 = result.values.map(\.id) }
                }
            }
            #expect(await eventually { observed.withLock { $0 } == Array(1...20) })

            try await StackTestServer.execute(stack, "DELETE FROM rel_authors WHERE id = 1")

            #expect(await eventually { observed.withLock { $0 } == Array(1...9) + Array(11...19) }, "\(observed.withLock { $0 })")
            observer.cancel()
            _ = await observer.result

            let gone = try await eventually {
                let book = try await stack.mainContext.object(RelBook.self, id: 10)
                let author = try await stack.mainContext.object(RelAuthor.self, id: 1)
                return book == nil && author == nil
            }
            #expect(gone)
            let remaining = try await stack.mainContext.fetch(FetchDescriptor<RelBook>())
            #expect(remaining.count == 90 && !remaining.contains { $0.author.id == 1 })
            let again = try await stack.mainContext.fetchWithRelationships(
                FetchDescriptor<RelAuthor>(relationshipKeyPathsForPrefetching: [\.books]))
            #expect(again.map(\.id) == Array(2...10))
            #expect(try again.flatMap { try again.related(\.books, of: $0) }.count == 90)
        }
    }

    @Test("An in-memory stack's cache drops the rows a cascade deleted")
    func inMemoryCascadeEvictsCache() async throws {
        try await self.withStack(.inMemory) { stack, _ in
            let sample = RelationshipSchema.sample()
            try await stack.write(durability: .committed) { context in
                try context.bulkInsert(sample.publishers)
                try context.bulkInsert(sample.authors)
                try context.bulkInsert(sample.books)
            }
            #expect(try await stack.mainContext.object(RelBook.self, id: 10) != nil)
            #expect(try await stack.mainContext.object(RelAuthor.self, id: 3)?.publisher == nil)
            #expect(try await stack.mainContext.object(RelAuthor.self, id: 1)?.publisher?.id == 2)
            try await stack.write(durability: .committed) { context in
                try await context.delete(RelAuthor.self, id: 1)
                try await context.delete(RelPublisher.self, id: 3)
            }
            #expect(try await stack.mainContext.object(RelBook.self, id: 10) == nil)
            #expect(try await stack.mainContext.fetch(FetchDescriptor<RelBook>()).count == 90)
            // Author 2's publisher was 3: set to NULL by the rule, and read again.
            #expect(try await stack.mainContext.object(RelAuthor.self, id: 2)?.publisher == nil)
        }
    }

    @Test("Observers of the referring table see an in-memory cascade and SET NULL")
    func inMemoryCascadeWakesObservers() async throws {
        try await self.withStack(.inMemory) { stack, _ in
            let sample = RelationshipSchema.sample()
            try await stack.write(durability: .committed) { context in
                try context.bulkInsert(sample.publishers)
                try context.bulkInsert(sample.authors)
                try context.bulkInsert(sample.books)
            }
            let books = Locked<[Int64]>([])
            let unpublished = Locked<[Int64]>([])
            let observers = [
                Task {
                    for try await result in stack.observe(FetchDescriptor<RelBook>(predicate: #Predicate { $0.id <= 20 })) {
                        books.withLock { $0 = result.values.map(\.id) }
                    }
                },
                Task {
                    for try await result in stack.observe(FetchDescriptor<RelAuthor>(predicate: #Predicate { $0.publisher == nil })) {
                        unpublished.withLock { $0 = result.values.map(\.id) }
                    }
                },
            ]
            #expect(await eventually { books.withLock { $0 } == Array(1...20) && unpublished.withLock { $0 } == [3, 6, 9] })
            try await stack.write(durability: .committed) { context in
                try await context.delete(RelAuthor.self, id: 1)        // books 10 and 20
                try await context.delete(RelPublisher.self, id: 3)     // authors 2, 5 and 8
            }
            #expect(await eventually { books.withLock { $0 } == Array(1...9) + Array(11...19) })
            #expect(await eventually { unpublished.withLock { $0 } == [2, 3, 5, 6, 8, 9] }, "\(unpublished.withLock { $0 })")
            for observer in observers {
                observer.cancel()
                _ = await observer.result
            }
        }
    }
}
