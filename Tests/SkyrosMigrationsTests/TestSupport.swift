import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

extension TestServer {
    /// A unique schema name; the migrator creates the schema, `dropSchema` removes it.
    static func uniqueSchema(_ prefix: String = "mig") -> String { self.uniqueSchemaName(prefix) }

    /// The first column of the first row of `sql`, decoded as `T`.
    static func scalar<T: PGDecodable>(_ type: T.Type, _ query: PGQuery) async throws -> T {
        let connection = try await self.connect()
        do {
            let rows = try await connection.query(query)
            await connection.close()
            return try #require(rows.first).decode(T.self, at: 0)
        } catch {
            await connection.close()
            throw error
        }
    }

    /// `"schema"."skyros_schema_migrations"`, quoted.
    static func qualifiedHistory(_ schema: String, table: String = "skyros_schema_migrations") -> String {
        quoteIdentifier(schema) + "." + quoteIdentifier(table)
    }

    /// Whether a relation `schema.name` exists.
    static func relationExists(_ schema: String, _ name: String) async throws -> Bool {
        try await self.scalar(Bool.self, "SELECT to_regclass(\(quoteIdentifier(schema) + "." + quoteIdentifier(name))) IS NOT NULL")
    }
}

/// A temporary directory of migration files, removed when the value is released.
final class TemporaryDirectory: Sendable {
    let url: URL

    init() throws {
        self.url = FileManager.default.temporaryDirectory.appendingPathComponent("skyros-migrations-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: self.url, withIntermediateDirectories: true)
    }

    func write(_ name: String, _ contents: String) throws {
        try Data(contents.utf8).write(to: self.url.appendingPathComponent(name))
    }

    func remove(_ name: String) throws {
        try FileManager.default.removeItem(at: self.url.appendingPathComponent(name))
    }

    var path: String { self.url.path }

    deinit { try? FileManager.default.removeItem(at: self.url) }
}

/// The example schema: three migrations like `migrations/` plus a seeding INSERT, used by the integration tests.
enum ExampleMigrations {
    static let files: [(String, String)] = [
        (
            "1_create_authors.sql",
            """
            -- migrate:up
            CREATE TABLE authors (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), name text NOT NULL);
            -- migrate:down
            DROP TABLE authors;
            """
        ),
        (
            "2_seed_authors.sql",
            """
            -- migrate:up
            INSERT INTO authors (name) VALUES ('Ursula K. Le Guin');
            -- migrate:down
            DELETE FROM authors WHERE name = 'Ursula K. Le Guin';
            """
        ),
        (
            "3_index_authors_name.sql",
            """
            -- migrate:no-transaction
            -- migrate:up
            CREATE INDEX CONCURRENTLY IF NOT EXISTS authors_name ON authors (name);
            -- migrate:down
            DROP INDEX CONCURRENTLY IF EXISTS authors_name;
            """
        ),
    ]

    static func write(to directory: TemporaryDirectory) throws {
        for (name, contents) in self.files { try directory.write(name, contents) }
    }
}
