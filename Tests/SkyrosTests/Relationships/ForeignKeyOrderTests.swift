import Foundation
import Logging
import Skyros
import SkyrosPostgres
import SkyrosTestEntities
import SkyrosTestSupport
import SkyrosTesting
import Testing

/// A save spanning tables commits whatever order the app made its changes in: rows are written after the rows
/// they refer to, and deleted after the rows that refer to them (on PostgreSQL, whose foreign keys check every
/// statement, and in memory, which checks every operation).
@Suite("Writes ordered by their foreign keys")
struct ForeignKeyOrderTests {
    static let entities: [any Entity.Type] = [RelPublisher.self, RelAuthor.self, RelBook.self, RelReview.self, RelTag.self, RelBookTag.self]

    func withStack(_ kind: StackKind, _ body: (DataStack) async throws -> Void) async throws {
        switch kind {
        case .inMemory:
            try await withTestStack(DataStackConfiguration(store: .inMemory, entities: Self.entities), on: .inMemory, body)
        case .postgres:
            let sql = "-- migrate:up\n" + RelationshipSchema.createTables { $0 }
            try await StackTestServer.withMigrations(["1_rel.sql": sql]) { directory in
                let configuration = DataStackConfiguration(store: .inMemory, migrations: .directory(directory), entities: Self.entities)
                try await TestServer.database.withStack(configuration, prefix: "rel order", body)
            }
        }
    }

    /// What every table holds, read from the store (not a cache).
    func stored(_ stack: DataStack) async throws -> (authors: [RelAuthor], books: [RelBook], reviews: [RelReview]) {
        let authors = try await stack.readSnapshot { try await $0.fetch(FetchDescriptor<RelAuthor>(sortBy: [SortDescriptor(\.id)])) }
        let books = try await stack.readSnapshot { try await $0.fetch(FetchDescriptor<RelBook>(sortBy: [SortDescriptor(\.id)])) }
        let reviews = try await stack.readSnapshot { try await $0.fetch(FetchDescriptor<RelReview>(sortBy: [SortDescriptor(\.id)])) }
        return (authors, books, reviews)
    }

    @Test("Rows inserted before the rows they refer to, in one write", arguments: StackKind.allCases, [WriteDurability.committed, .visible])
    func childrenFirst(kind: StackKind, durability: WriteDurability) async throws {
        try await self.withStack(kind) { stack in
            try await stack.write(durability: durability) { context in
                try context.insert(RelBookTag(book: 10, tag: 4))   // a join row (composite key) before both its rows
                try context.insert(RelReview(id: 1, book: 10, stars: 5))
                try context.insert(RelReview(id: 2, book: 10, stars: 4))
                try context.insert(RelBook(id: 10, title: "Emma", author: 7))
                try context.insert(RelAuthor(id: 7, name: "Austen", publisher: 3))
                try context.insert(RelPublisher(id: 3, name: "Murray"))
                try context.insert(RelTag(id: 4, label: "classic"))
            }
            // A visible write commits in the background: wait for its rows in the store.
            #expect(try await eventually { try await self.stored(stack).reviews.count == 2 })
            let stored = try await self.stored(stack)
            #expect(stored.authors == [RelAuthor(id: 7, name: "Austen", publisher: 3)])
            #expect(stored.books == [RelBook(id: 10, title: "Emma", author: 7)])
            #expect(stored.reviews.map(\.id) == [1, 2])
            let tags = try await stack.readSnapshot { try await $0.fetch(FetchDescriptor<RelBookTag>()) }
            #expect(tags == [RelBookTag(book: 10, tag: 4)])
        }
    }

    @Test("A parent deleted before its children (NO ACTION), and a child moved away from a deleted parent", arguments: StackKind.allCases)
    func parentsLast(kind: StackKind) async throws {
        try await self.withStack(kind) { stack in
            try await stack.write(durability: .committed) { context in
                try context.insert(RelAuthor(id: 1, name: "a", publisher: nil))
                try context.bulkInsert([RelBook(id: 1, title: "one", author: 1), RelBook(id: 2, title: "two", author: 1)])
                try context.bulkInsert([RelReview(id: 1, book: 1, stars: 1), RelReview(id: 2, book: 1, stars: 2), RelReview(id: 3, book: 2, stars: 3)])
            }
            // Book 1 goes first in the app's order; its reviews' foreign key has no cascade.
            try await stack.write(durability: .committed) { context in
                try await context.delete(RelBook.self, id: 1)
                try await context.delete(RelReview.self, id: 1)
                guard var moved = try await context.object(RelReview.self, id: 2) else { throw CancellationError() }
                moved.book = Reference(2)
                try await context.update(moved)
            }
            let stored = try await self.stored(stack)
            #expect(stored.books.map(\.id) == [2])
            #expect(stored.reviews == [RelReview(id: 2, book: 2, stars: 2), RelReview(id: 3, book: 2, stars: 3)])
        }
    }

    @Test("A row pointed at a parent the same write creates later", arguments: StackKind.allCases)
    func updateToNewParent(kind: StackKind) async throws {
        try await self.withStack(kind) { stack in
            try await stack.write(durability: .committed) { context in
                try context.insert(RelAuthor(id: 1, name: "a", publisher: nil))
                try context.insert(RelBook(id: 1, title: "one", author: 1))
            }
            try await stack.write(durability: .committed) { context in
                guard var book = try await context.object(RelBook.self, id: 1) else { throw CancellationError() }
                book.author = Reference(2)
                try await context.update(book)
                try context.insert(RelAuthor(id: 2, name: "b", publisher: nil))
            }
            let stored = try await self.stored(stack)
            #expect(stored.books == [RelBook(id: 1, title: "one", author: 2)])
        }
    }

    @Test("A write whose foreign keys cannot hold still fails with the constraint named", arguments: StackKind.allCases)
    func missingParentStillFails(kind: StackKind) async throws {
        try await self.withStack(kind) { stack in
            let error = await #expect(throws: PGError.self) {
                try await stack.write(durability: .committed) { context in
                    try context.insert(RelBook(id: 1, title: "orphan", author: 99))
                }
            }
            #expect(error?.constraint == "rel_books_author_id_fkey")
            let stored = try await self.stored(stack)
            #expect(stored.books.isEmpty)
        }
    }
}
