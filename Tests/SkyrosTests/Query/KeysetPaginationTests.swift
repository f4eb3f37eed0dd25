import Foundation
@testable import Skyros
@testable import SkyrosStore
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// A row to page through: duplicates in every sort column, NULLs in `rank`, and columns whose names need
/// quoting (`select`, `ra"nk`).
struct PagedItem: Entity, Equatable, Hashable {
    var id: Int
    var name: String
    var rank: Int?
    var seen: Date

    enum CodingKeys: String, CodingKey {
        case id, name = "select", rank = "ra\"nk", seen
    }

    static let tableName = "paged_items"
    static let columns: [EntityColumn<PagedItem>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "select"), EntityColumn(\.rank, "ra\"nk"), EntityColumn(\.seen, "seen"),
    ]

    static func createTable(_ table: String) -> String {
        """
        CREATE TABLE \(table) (id bigint PRIMARY KEY, "select" text COLLATE "C" NOT NULL, "ra""nk" integer,
                               seen timestamptz NOT NULL)
        """
    }

    static let base = Date(timeIntervalSince1970: 1_800_000_000)

    /// 241 rows: five names (one empty, one non-ASCII), `rank` nil on every fourth, five distinct times.
    static let rows: [PagedItem] = (1...241).map { id in
        PagedItem(
            id: id, name: ["a", "b", "B", "é", ""][id % 5], rank: id % 4 == 0 ? nil : id % 7,
            seen: base.addingTimeInterval(Double(id % 5) + 0.25))
    }
}

@Suite("Query: keyset pages")
struct KeysetPaginationTests {
    typealias Sort = [SortDescriptor<PagedItem>]

    static let sorts: [(String, Sort)] = [
        ("primary key", []),
        ("name", [SortDescriptor(\.name)]),
        ("rank (nil first)", [SortDescriptor(\.rank)]),
        ("rank descending (nil last)", [SortDescriptor(\.rank, order: .reverse)]),
        ("rank descending, name", [SortDescriptor(\.rank, order: .reverse), SortDescriptor(\.name)]),
        ("name descending, rank", [SortDescriptor(\.name, order: .reverse), SortDescriptor(\.rank)]),
        ("seen descending, rank", [SortDescriptor(\.seen, order: .reverse), SortDescriptor(\.rank)]),
        ("seen, name descending, id descending", [SortDescriptor(\.seen), SortDescriptor(\.name, order: .reverse), SortDescriptor(\.id, order: .reverse)]),
    ]

    /// Every page of `descriptor` (page size `size`), each cursor passed on as its token, as a client would.
    static func pages(
        _ descriptor: FetchDescriptor<PagedItem>, size: Int, _ fetch: (FetchDescriptor<PagedItem>, PageCursor?) async throws -> FetchPage<PagedItem>
    ) async throws -> [[Int]] {
        var descriptor = descriptor
        descriptor.fetchLimit = size
        var cursor: PageCursor?
        var pages: [[Int]] = []
        repeat {
            let page = try await fetch(descriptor, cursor)
            pages.append(page.items.map(\.id))
            #expect(page.items.count <= size)
            if let next = page.nextCursor {
                #expect(page.items.count == size)
                // The token a client sends back.
                let token: String = next.description
                cursor = PageCursor(token)
                #expect(cursor == next)
            } else {
                cursor = nil
            }
            if pages.count > 1_000 { Issue.record("paging does not end"); break }
        } while cursor != nil
        return pages
    }

    /// On both stores, with and without a predicate, for every sort and several page sizes: the pages, one after
    /// another, hold every row exactly once in the order of the full fetch, and both stores page alike.
    @Test func pagesVisitEveryRowOnceOnBothStores() async throws {
        try await StoreTestServer.withStore(.postgres) { postgres in
            try await postgres.execute(PagedItem.createTable(postgres.table(PagedItem.tableName)))
            let memory = InMemoryStore()
            try await postgres.store.bulkInsert(PagedItem.rows)
            try await memory.bulkInsert(PagedItem.rows)
            let three = 3
            let predicates: [Predicate<PagedItem>?] = [nil, #Predicate { $0.rank != three }]
            var checked = 0
            for (sortIndex, (name, sort)) in Self.sorts.enumerated() {
                for predicate in predicates {
                    let descriptor = FetchDescriptor(predicate: predicate, sortBy: sort)
                    let full = try await postgres.store.fetch(descriptor).map(\.value.id)
                    #expect(try await memory.fetch(descriptor).map(\.value.id) == full, "\(name): the stores' orders differ")
                    #expect(Set(full).count == full.count)
                    // One row a page (a cursor per row) on the mixed-direction sort with NULLs.
                    for size in [1, 7, 64, 500] where size != 1 || (predicate == nil && sortIndex == 4) {
                        for (storeName, store) in [("postgres", postgres.store), ("in-memory", memory as any Store)] {
                            let pages = try await Self.pages(descriptor, size: size) { descriptor, cursor in
                                let page = try await store.fetchPage(descriptor, after: cursor)
                                return FetchPage(items: page.items.map(\.value), nextCursor: page.nextCursor)
                            }
                            #expect(pages.flatMap { $0 } == full, "\(storeName), \(name), \(size) a page: pages differ from the fetch")
                            #expect(pages.count == max(1, (full.count + size - 1) / size), "\(storeName), \(name), \(size) a page")
                            checked += 1
                        }
                    }
                }
            }
            #expect(checked == (Self.sorts.count * 6 + 1) * 2)
        }
    }

    /// Through a context whose reads overlay unsaved changes (its own) and queued ones (the stack's, held back
    /// from committing): the pages hold every row the context sees exactly once, in its order, on both stacks.
    @Test(arguments: StackKind.allCases)
    func contextsPageOverUnsavedAndQueuedChanges(_ kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { context in
                for id in 1...90 { try context.insert(StackNote(id: id, title: "note \(id % 9)", rank: id % 6, tag: id % 3 == 0 ? nil : "t\(id % 4)")) }
            }
            stack.holdCommits()
            try await stack.write { context in
                for id in 91...100 { try context.insert(StackNote(id: id, title: "queued \(id)", rank: id % 5, tag: nil)) }
                for id in stride(from: 2, through: 40, by: 7) {
                    var note = try #require(try await context.object(StackNote.self, id: id))
                    note.rank = 100 + id
                    note.tag = id % 2 == 0 ? nil : "moved"
                    try await context.update(note)
                }
                for id in [5, 6, 50, 77] { try await context.delete(StackNote.self, id: id) }
            }
            #expect(stack.queuedCommits > 0)
            let context = stack.newBackgroundContext()
            for id in 101...108 { try context.insert(StackNote(id: id, title: "unsaved \(id)", rank: id % 3, tag: id % 2 == 0 ? "t1" : nil)) }
            for id in [3, 12, 60] {
                var note = try #require(try await context.object(StackNote.self, id: id))
                note.rank = -id
                try await context.update(note)
            }
            try await context.delete(StackNote.self, id: 1)
            try await context.delete(StackNote.self, id: 93)

            let sorts: [[SortDescriptor<StackNote>]] = [
                [], [SortDescriptor(\.title)], [SortDescriptor(\.tag), SortDescriptor(\.rank, order: .reverse)],
                [SortDescriptor(\.tag, order: .reverse)], [SortDescriptor(\.rank, order: .reverse), SortDescriptor(\.id, order: .reverse)],
            ]
            for sort in sorts {
                for reader in [context, stack.mainContext] {
                    let full = try await reader.fetch(FetchDescriptor(sortBy: sort)).map(\.id)
                    for size in [4, 25] {
                        var cursor: PageCursor?
                        var seen: [Int] = []
                        repeat {
                            let page = try await reader.fetchPage(FetchDescriptor(sortBy: sort, fetchLimit: size), after: cursor)
                            seen += page.items.map(\.id)
                            cursor = page.nextCursor
                        } while cursor != nil && seen.count <= full.count
                        #expect(seen == full, "\(kind), sort \(sort.map { "\($0.keyPath.map { "\($0)" } ?? "?") \($0.order)" }), \(size) a page")
                    }
                }
            }
            // The context's full view: 100 saved or queued rows, 4 deleted in the queue, 8 inserted and 2 deleted
            // unsaved.
            #expect(try await context.fetch(FetchDescriptor<StackNote>()).count == 100 - 4 + 8 - 2)
            stack.releaseCommits()
            try await stack.write(durability: .committed) { _ in }
        }
    }

    /// A cursor handed to a client (its token) fetches the next page on another stack of the same database, and
    /// that page is the one the first stack would have returned.
    @Test func aCursorWorksOnANewStack() async throws {
        let database = try TestServer.database
        try await StackTestServer.withMigrations(["1_stack.sql": StackTestServer.migrationSQL]) { directory in
            try await database.withSchema(prefix: "keyset") { schema in
                var configuration = schema.stackConfiguration(
                    DataStackConfiguration(store: .inMemory, migrations: .directory(directory), entities: [StackNote.self, StackCounter.self]))
                configuration.changeFeed.isEnabled = false
                let descriptor = FetchDescriptor<StackNote>(sortBy: [SortDescriptor(\.tag), SortDescriptor(\.rank, order: .reverse)], fetchLimit: 10)
                let first = try await DataStack.start(configuration)
                let (token, expected) = try await withCleanup {
                    try await first.write(durability: .committed) { context in
                        for id in 1...35 { try context.insert(StackNote(id: id, title: "n", rank: id % 4, tag: id % 5 == 0 ? nil : "t\(id % 3)")) }
                    }
                    let page = try await first.read { try await $0.fetchPage(descriptor) }
                    let next = try await first.read { try await $0.fetchPage(descriptor, after: page.nextCursor) }
                    return (try #require(page.nextCursor).description, next.items.map(\.id))
                } cleanup: {
                    await first.shutdown()
                }
                let second = try await DataStack.start(configuration)
                try await withCleanup {
                    let cursor = try #require(PageCursor(token))
                    let page = try await second.read { try await $0.fetchPage(descriptor, after: cursor) }
                    #expect(page.items.map(\.id) == expected)
                    #expect(expected.count == 10)
                    // In a snapshot read as well (its own SQL path, past the context and the cache).
                    let snapshot = try await second.readSnapshot { try await $0.fetchPage(descriptor, after: cursor) }
                    #expect(snapshot.items.map(\.id) == expected)
                    #expect(snapshot.nextCursor == page.nextCursor)
                    // A cursor decoded from JSON (a request body) works as well.
                    let decoded = try JSONDecoder().decode([String: PageCursor].self, from: Data(#"{"after":"\#(token)"}"#.utf8))
                    #expect(try await second.read { try await $0.fetchPage(descriptor, after: decoded["after"]) }.items.map(\.id) == expected)
                } cleanup: {
                    await second.shutdown()
                }
            }
        }
    }
}
