// A team moving from Fluent to Skyros step by step imports both: this file must compile with the README's
// Quickstart unqualified (issue: "No clashes"). Built by `./smoke` with the rest of the package.
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
        store: .postgres(try PGConfiguration(url: databaseURL), schema: "app"),
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

// Code a team already has on Fluent and PostgresNIO, unchanged by `import Skyros`: every name below is
// PostgresNIO's, FluentKit's or swift-crypto's; the seven PostgresNIO names that Skyros's client used to share
// (PostgresQuery, PostgresRow, PostgresError, PostgresNotification, PostgresEncodable, PostgresDecodable,
// PostgresCodable) are all used, so a clash would fail this build.

/// A value type stored in a `bigint` column through PostgresNIO's coding protocols.
struct Cents: PostgresCodable, Equatable {
    var value: Int64

    static var psqlType: PostgresDataType { .int8 }
    static var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(into byteBuffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        self.value.encode(into: &byteBuffer, context: context)
    }

    init(value: Int64) { self.value = value }

    init<JSONDecoder: PostgresJSONDecoder>(
        from byteBuffer: inout ByteBuffer, type: PostgresDataType, format: PostgresFormat,
        context: PostgresDecodingContext<JSONDecoder>
    ) throws {
        self.value = try Int64(from: &byteBuffer, type: type, format: format, context: context)
    }
}

func encodable(_ value: some PostgresEncodable) -> PostgresDataType { type(of: value).psqlType }
func decodable<T: PostgresDecodable>(_ type: T.Type) -> String { "\(type)" }

/// A query, its rows and its errors, PostgresNIO's way.
func balance(of account: UUID, on connection: PostgresConnection, logger: Logger) async throws -> Cents? {
    let query: PostgresQuery = "SELECT balance FROM accounts WHERE id = \(account)"
    do {
        let rows = try await connection.query(query, logger: logger)
        for try await row in rows {
            return try cents(in: row)
        }
        return nil
    } catch let error as PostgresError {
        logger.error("legacy PostgresNIO error: \(error)")
        throw error
    }
}

func cents(in row: PostgresRow) throws -> Cents { try row.decode(Cents.self) }

func describe(_ notification: PostgresNotification) -> String { notification.payload }

/// A Fluent model beside Skyros's entities.
final class LegacyAuthor: Model, @unchecked Sendable {
    static let schema = "legacy_authors"
    @ID(key: .id) var id: UUID?
    @Field(key: "name") var name: String
    init() {}
}

/// swift-crypto's SHA256 (Skyros's migrations checksum with an internal one).
func fingerprint(_ text: String) -> String {
    SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
}
