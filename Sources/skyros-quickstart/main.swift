import Foundation                                       // UUID, SortDescriptor, #Predicate, ProcessInfo
import Skyros                                           // the stack, and the client types its API takes

struct Author: Entity {
    var id: UUID
    var name: String
    var email: String?

    static let tableName = "authors"
    static let columns: [EntityColumn<Author>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.email, "email"),
    ]
    static let defaultSort = [SortDescriptor(\Author.name)]
}

let databaseURL = ProcessInfo.processInfo.environment["DATABASE_URL"]
    ?? "postgres://skyros:skyros@localhost:5433/skyros"  // docker compose up -d
let stack = try await DataStack.start(DataStackConfiguration(
    store: .postgres(try PGConfiguration(url: databaseURL)),  // schema public, where `swift run migrate` looks
    migrations: .directory(path: "migrations"),          // the pending ones applied before start returns
    entities: [Author.self]))                            // checked against the live schema

try await stack.write { context in                       // visible to every reader when it returns
    let ada = FetchDescriptor<Author>(predicate: #Predicate { $0.name == "Ada Lovelace" })
    if try await context.first(ada) == nil {             // a second run finds her: no second Ada
        try context.insert(Author(id: UUID(), name: "Ada Lovelace"))
    }
}
try await stack.write(durability: .committed) { context in   // returns after PostgreSQL committed
    if var ada = try await context.first(FetchDescriptor<Author>(predicate: #Predicate { $0.name == "Ada Lovelace" })) {
        ada.email = "ada@example.com"
        try await context.update(ada)                    // writes "email" if it changed, guarded by the row version
    }
}
let authors = try await stack.read { try await $0.fetch(FetchDescriptor<Author>(fetchLimit: 20)) }
for author in authors { print(author.name, author.email ?? "-") }
await stack.shutdown()                                   // waits for queued commits, closes the connections
