import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestEntities
import SkyrosTestSupport
import SkyrosTesting
import Testing

/// `DataStack.observeWithRelationships`: an observed query with its prefetched relationships moves when a related
/// row changes, by this stack's writes or another writer's (psql).
@Suite("Observing a query with its relationships", .timeLimit(.minutes(2)))
struct ObservedPrefetchTests {
    static let entities: [any Entity.Type] = [RelPublisher.self, RelAuthor.self, RelBook.self, RelReview.self, RelTag.self, RelBookTag.self]

    func withStack(_ kind: StackKind, _ body: (DataStack, String?) async throws -> Void) async throws {
        switch kind {
        case .inMemory:
            try await withTestStack(DataStackConfiguration(store: .inMemory, entities: Self.entities), on: .inMemory) { try await body($0, nil) }
        case .postgres:
            let sql = "-- migrate:up\n" + RelationshipSchema.createTables { $0 }
            try await StackTestServer.withMigrations(["1_rel.sql": sql]) { directory in
                let configuration = DataStackConfiguration(store: .inMemory, migrations: .directory(directory), entities: Self.entities)
                try await TestServer.database.withStack(configuration, prefix: "relobs") { stack in
                    try await body(stack, (stack.store as? PostgresStore)?.schema)
                }
            }
        }
    }

    /// The latest element an observation yielded, as "author: book titles (review stars)".
    final class Latest: @unchecked Sendable {
        private let lock = NSLock()
        private var value: [String] = []
        private var count = 0
        func set(_ lines: [String]) { self.lock.withLock { (self.value, self.count) = (lines, self.count + 1) } }
        var lines: [String] { self.lock.withLock { self.value } }
        var events: Int { self.lock.withLock { self.count } }
    }

    @Test("An observed author with its books and their reviews moves when a book or a review is added", arguments: StackKind.allCases)
    func relatedRowsMoveTheObservation(kind: StackKind) async throws {
        try await self.withStack(kind) { stack, schema in
            try await stack.write(durability: .committed) { context in
                try context.insert(RelAuthor(id: 1, name: "ann", publisher: nil))
                try context.insert(RelAuthor(id: 2, name: "bob", publisher: nil))
                try context.insert(RelBook(id: 10, title: "first", author: 1))
                try context.insert(RelBook(id: 20, title: "other", author: 2))
            }
            var descriptor = FetchDescriptor<RelAuthor>(predicate: #Predicate { $0.id == 1 })
            descriptor.prefetchPaths = [PrefetchPath(\.books, then: [PrefetchPath(\.reviews)])]
            let latest = Latest()
            let observer = Task {
                for try await authors in stack.observeWithRelationships(descriptor) {
                    latest.set(try authors.flatMap { author in
                        try authors.related(\.books, of: author).map { book in
                            "\(author.name): \(book.title) \(try authors.related(\.reviews, of: book).map(\.stars))"
                        }
                    })
                }
            }
            defer { observer.cancel() }
            await expectEventually("the first result") { latest.lines == ["ann: first []"] }

            // A book of this author, and a review of it: by another writer on PostgreSQL, by the stack in memory.
            if let schema {
                try await Psql.run("INSERT INTO rel_books VALUES (11, 'second', 1); INSERT INTO rel_reviews VALUES (1, 11, 4)", schema: schema)
            } else {
                try await stack.write(durability: .committed) { context in
                    try context.insert(RelBook(id: 11, title: "second", author: 1))
                    try context.insert(RelReview(id: 1, book: 11, stars: 4))
                }
            }
            await expectEventually("the added book and review reached the observer") {
                latest.lines == ["ann: first []", "ann: second [4]"]
            }
            // The review changes (a row two relationships away), then the book goes.
            if let schema {
                try await Psql.run("UPDATE rel_reviews SET stars = 5 WHERE id = 1", schema: schema)
            } else {
                try await stack.write(durability: .committed) { context in try await context.update(RelReview(id: 1, book: 11, stars: 5)) }
            }
            await expectEventually("the changed review reached the observer") { latest.lines == ["ann: first []", "ann: second [5]"] }
            try await stack.write(durability: .committed) { context in
                try await context.delete(RelReview.self, id: 1)
                try await context.delete(RelBook.self, id: 10)
            }
            await expectEventually("the deleted book left the observed result") { latest.lines == ["ann: second []"] }
        }
    }

    @Test("The next element follows related changes; update(_:) moves the observation to another row with its relationships", arguments: StackKind.allCases)
    func theQueryCanChangeWithItsRelationships(kind: StackKind) async throws {
        try await self.withStack(kind) { stack, _ in
            try await stack.write(durability: .committed) { context in
                try context.insert(RelAuthor(id: 1, name: "ann", publisher: nil))
                try context.insert(RelAuthor(id: 2, name: "bob", publisher: nil))
                try context.insert(RelBook(id: 10, title: "ann's", author: 1))
                try context.insert(RelBook(id: 20, title: "bob's", author: 2))
            }
            let observation = stack.observeWithRelationships(
                FetchDescriptor<RelAuthor>(predicate: #Predicate { $0.id == 1 }, relationshipKeyPathsForPrefetching: [\.books]))
            var iterator = observation.makeAsyncIterator()
            let first = try #require(try await iterator.next())
            #expect(try first.flatMap { try first.related(\.books, of: $0).map(\.title) } == ["ann's"])
            // Bob's book changes (a commit to the observed books table that leaves this result as it is), then
            // ann's: the next element holds ann's change.
            try await stack.write(durability: .committed) { try await $0.update(RelBook(id: 20, title: "bob's, revised", author: 2)) }
            try await stack.write(durability: .committed) { try await $0.update(RelBook(id: 10, title: "ann's, revised", author: 1)) }
            let next = try #require(try await iterator.next())
            #expect(try next.flatMap { try next.related(\.books, of: $0).map(\.title) } == ["ann's, revised"])
            // The query moves to bob: the next element is his, with his books.
            observation.update(FetchDescriptor<RelAuthor>(predicate: #Predicate { $0.id == 2 }, relationshipKeyPathsForPrefetching: [\.books]))
            let moved = try #require(try await iterator.next())
            #expect(moved.map(\.name) == ["bob"])
            #expect(try moved.flatMap { try moved.related(\.books, of: $0).map(\.title) } == ["bob's, revised"])
        }
    }

    @Test("An observed book with its tags (many-to-many) moves when a join row is added or removed", arguments: StackKind.allCases)
    func joinRowsMoveTheObservation(kind: StackKind) async throws {
        try await self.withStack(kind) { stack, schema in
            try await stack.write(durability: .committed) { context in
                try context.insert(RelAuthor(id: 1, name: "ann", publisher: nil))
                try context.insert(RelBook(id: 10, title: "first", author: 1))
                try context.insert(RelTag(id: 1, label: "b"))
                try context.insert(RelTag(id: 2, label: "a"))
                try context.insert(RelBookTag(book: 10, tag: 1))
            }
            let latest = Latest()
            let observer = Task {
                for try await books in stack.observeWithRelationships(
                    FetchDescriptor<RelBook>(predicate: #Predicate { $0.id == 10 }, relationshipKeyPathsForPrefetching: [\.tags]))
                {
                    latest.set(try books.flatMap { book in try books.related(\.tags, of: book).map { "\(book.title): \($0.label)" } })
                }
            }
            defer { observer.cancel() }
            await expectEventually("the first result") { latest.lines == ["first: b"] }

            // A join row: by another writer on PostgreSQL, by the stack in memory.
            if let schema {
                try await Psql.run("INSERT INTO o VALUES (10, 2)", schema: schema)
            } else {
                try await stack.write(durability: .committed) { try $0.insert(RelBookTag(book: 10, tag: 2)) }
            }
            await expectEventually("the added join row reached the observer") { latest.lines == ["first: a", "first: b"] }
            // The tag's label changes (a target row), then a join row goes.
            if let schema {
                try await Psql.run("UPDATE \"rel_tag\"\"s\" SET prefix = 'c' WHERE n = 2", schema: schema)
            } else {
                try await stack.write(durability: .committed) { try await $0.update(RelTag(id: 2, label: "c")) }
            }
            await expectEventually("the changed tag reached the observer") { latest.lines == ["first: b", "first: c"] }
            if let schema {
                try await Psql.run("DELETE FROM o WHERE \(quoteIdentifier(RelBookTag.tagColumn)) = 1", schema: schema)
            } else {
                try await stack.write(durability: .committed) { try await $0.delete(RelBookTag.self, id: CompositeKey(Reference(10), Reference(1))) }
            }
            await expectEventually("the removed join row left the observed result") { latest.lines == ["first: c"] }
        }
    }
}
