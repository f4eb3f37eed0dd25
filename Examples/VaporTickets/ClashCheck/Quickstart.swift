// A team moving from Fluent to Skyros step by step imports both: this file must compile with the README's
// Quickstart unqualified (issue: "No clashes"). Built only with SKYROS_CLASH_CHECK=1 (see Package.swift).
import Crypto
import FluentKit
import Foundation
import PostgresNIO
import Skyros

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

func quickstart(databaseURL: String) async throws {
    let stack = try await DataStack.start(DataStackConfiguration(
        store: .postgres(try PostgresConfiguration(url: databaseURL), schema: "app"),
        migrations: .directory(path: "migrations"),          // applied before start returns
        entities: [Author.self]))                            // checked against the live schema

    try await stack.write { context in                       // visible to every reader when it returns
        try context.insert(Author(id: UUID(), name: "Ada Lovelace"))
    }
    try await stack.write(durability: .committed) { context in   // returns after PostgreSQL committed
        if var ada = try await context.first(FetchDescriptor<Author>(predicate: #Predicate { $0.name == "Ada Lovelace" })) {
            ada.email = "ada@example.com"
            try await context.update(ada)                    // writes only "email", guarded by the row version
        }
    }
    let authors = try await stack.read { try await $0.fetch(FetchDescriptor<Author>(fetchLimit: 20)) }
    _ = authors
}

/// The names both sides export, used unqualified where a team would: Skyros's errors and client beside
/// PostgresNIO's, swift-crypto's SHA256.
func sideBySide(_ error: any Error) -> String {
    let digest = SHA256.hash(data: Data("skyros".utf8))
    if let postgres = error as? PostgresError { return "\(postgres) \(digest)" }
    if let refused = error as? ColumnValueError { return refused.description }
    return "\(error)"
}
