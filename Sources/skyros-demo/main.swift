// skyros-demo: the context stack at work, with no setup: a write, a read, a background context, a durable
// write, an observed change, and books fetched with their authors (prefetched: one query per relationship).
//
//   swift run skyros-demo                      # in memory
//   DATABASE_URL=postgresql://… swift run skyros-demo   # PostgreSQL: applies migrations/ first, leaves its rows
//   DATABASE_URL=postgresql://… swift run skyros-demo draft add_isbn
//       # writes the next migrations/ file: what the tables lack for Author and Book (MigrationDraft)
import Foundation
import Skyros
import SkyrosPostgres

struct Author: Entity, ColumnKeyStrategyProviding {
    var id: UUID
    var name: String
    var email: String?

    static let tableName = "authors"
    static let columnKeyStrategy = ColumnKeyStrategy.convertToSnakeCase
    static let columns: [EntityColumn<Author>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.email, "email"),
    ]
    static let defaultSort = [SortDescriptor(\Author.name)]

    /// The author's books: the inverse of `Book.author` (prefetched, never held).
    var books: ToMany<Book> { ToMany() }
    static let relationships: [Relationship<Author>] = [.toMany(\.books, inverse: \Book.author)]
}

struct Book: Entity, ColumnKeyStrategyProviding {
    var id: UUID
    var title: String
    var author: Reference<Author>           // author_id uuid NOT NULL REFERENCES authors (id) ON DELETE CASCADE
    var year: Int32?
    var tags: [String]

    enum CodingKeys: String, CodingKey {
        case id, title, year, tags
        case author = "author_id"
    }

    static let tableName = "books"
    static let columnKeyStrategy = ColumnKeyStrategy.useCodingKeys
    static let columns: [EntityColumn<Book>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.author, "author_id"),
        EntityColumn(\.year, "year"), EntityColumn(\.tags, "tags"),
    ]
    static let defaultSort = [SortDescriptor(\Book.title)]
    // Checked at start against the foreign key (and applied by the in-memory store on delete).
    static let relationships: [Relationship<Book>] = [.toOne(\.author, deleteRule: .cascade)]
}

func run() async throws {
    let configuration: DataStackConfiguration
    if let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty {
        let postgres = try PGConfiguration(url: url)
        configuration = DataStackConfiguration(
            store: .postgres(postgres), migrations: .directory(path: "migrations"), entities: [Author.self, Book.self])
        print("Store: PostgreSQL (\(postgres)); applying migrations/ first")
    } else {
        configuration = DataStackConfiguration(store: .inMemory)
        print("Store: in memory (set DATABASE_URL to use PostgreSQL)")
    }
    let stack = try await DataStack.start(configuration)
    print("Stack started (store reachable, migrations applied, entities validated)")

    // 1. A write: visible to every reader in the process as soon as it returns; the commit is queued.
    let ada = Author(id: UUID(), name: "Ada Lovelace", email: nil)
    let adasBooks = Reference(to: ada)
    try await stack.write { context in
        try context.insert(ada)
        try context.insert(Book(id: UUID(), title: "Notes on the Analytical Engine", author: Reference(to: ada), year: 1843, tags: ["computing"]))
    }
    print("write: inserted author \(ada.name) and one book")

    // 2. A read on the main context (by id: served from memory).
    let books = try await stack.read { context in
        try await context.fetch(FetchDescriptor<Book>(predicate: #Predicate { $0.author == adasBooks }))
    }
    let cached = try await stack.read { try await $0.object(Author.self, id: ada.id) }
    print("read: \(books.count) book(s) by \(cached?.name ?? "?"): \(books.map(\.title))")

    // 3. A background context: its own scratch pad, saved into the stack.
    let background = stack.newBackgroundContext()
    if var book = try await background.first(FetchDescriptor<Book>(predicate: #Predicate { $0.author == adasBooks })) {
        book.tags.append("classic")
        try await background.update(book)  // only "tags" is written
    }
    print("background context: has changes = \(background.hasChanges)")
    try await background.saveToStore()
    print("background context: saved and committed")

    // 4. A durable write: returns after the PostgreSQL commit (and throws its error).
    let grace = Author(id: UUID(), name: "Grace Hopper", email: "grace-\(ada.id.uuidString.prefix(8))@example.com")
    try await stack.write(durability: .committed) { context in
        try context.insert(grace)
        try context.insert(Book(id: UUID(), title: "A Manual of Operation for the ASCC", author: Reference(to: grace), year: 1946, tags: []))
    }
    print("durable write: \(grace.name) committed")

    // 5. An observed change: an observer gets the current result, then a new result with an ordered diff
    //    whenever a save in this process (or another process's commit) changes it.
    let byName = FetchDescriptor<Author>(sortBy: [SortDescriptor(\Author.name)])
    var observer = stack.observe(byName).makeAsyncIterator()
    if let current = try await observer.next() { print("observe: \(current.values.map(\.name))") }
    try await stack.write { try $0.insert(Author(id: UUID(), name: "Barbara Liskov", email: nil)) }
    if let changed = try await observer.next() {
        let inserted = changed.diff.inserted.map { "\($0.value.name) at \($0.offset)" }
        print("observe: inserted \(inserted) → \(changed.values.map(\.name))")
    }

    let authors = try await stack.read { try await $0.fetch(Author.self) }
    print("authors now: \(authors.map(\.name))")

    // 6. Relationships: the books with their authors, and the authors with their books, in two queries each
    //    (one for the rows, one per relationship), whatever the number of rows; answered from memory.
    let shelf = try await stack.read { try await $0.fetchWithRelationships(FetchDescriptor<Book>(relationshipKeyPathsForPrefetching: [\.author])) }
    for book in shelf { print("prefetch: \(book.title) by \(try shelf.related(\.author, of: book)?.name ?? "?")") }
    let writers = try await stack.read { try await $0.fetchWithRelationships(FetchDescriptor<Author>(relationshipKeyPathsForPrefetching: [\.books])) }
    for author in writers { print("prefetch: \(author.name): \(try writers.related(\.books, of: author).count) book(s)") }
    let statistics = stack.cacheStatistics
    print("cache: \(statistics.rows) rows, \(statistics.hits) hits, \(statistics.misses) misses")
    await stack.shutdown()
    print("done")
}

if CommandLine.arguments.dropFirst().first == "draft" {
    exit(await MigrationDraft.command(Array(CommandLine.arguments.dropFirst()), entities: [Author.self, Book.self]))
}

do {
    try await run()
} catch {
    print("skyros-demo failed: \(error)")
    exit(1)
}
