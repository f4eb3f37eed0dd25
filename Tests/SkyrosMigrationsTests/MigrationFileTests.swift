import Foundation
import Testing

@testable import SkyrosMigrations

@Suite("Migration files")
struct MigrationFileTests {
    @Test func fileNameGivesVersionAndDescription() throws {
        let migration = try SchemaMigration(fileName: "20250101120000_add_books_table.sql", contents: "SELECT 1;")
        #expect(migration.version == 20_250_101_120_000)
        #expect(migration.description == "add books table")
        #expect(migration.fileName == "20250101120000_add_books_table.sql")
    }

    @Test(arguments: ["create_authors.sql", "0_zero.sql", "1-create.sql", "1_.sql", "1_x.txt"])
    func invalidFileNamesAreRefusedByName(name: String) {
        let error = #expect(throws: MigrationError.self) { try SchemaMigration(fileName: name, contents: "SELECT 1;") }
        #expect(error?.kind == .invalidFileName)
        #expect(error?.fileName == name)
        #expect(error?.description.contains(name) == true)
    }

    @Test func withoutMarkersTheWholeFileIsUp() throws {
        let migration = try SchemaMigration(fileName: "1_a.sql", contents: "CREATE TABLE a (id int);\n")
        #expect(migration.up.firstLine == 1)
        #expect(migration.up.sql.contains("CREATE TABLE a"))
        #expect(migration.down == nil)
        #expect(!migration.isReversible)
        #expect(migration.isTransactional)
    }

    @Test func sectionsKnowTheirFirstLine() throws {
        let text = """
            -- migrate:up
            CREATE TABLE a (id int);
            CREATE TABLE b (id int);

            -- migrate:down
            DROP TABLE b;
            DROP TABLE a;
            """
        let migration = try SchemaMigration(fileName: "1_a.sql", contents: text)
        #expect(migration.up.firstLine == 2)
        #expect(migration.up.statements.map(\.line) == [2, 3])
        let down = try #require(migration.down)
        #expect(down.firstLine == 6)
        #expect(down.statements.map(\.line) == [6, 7])
    }

    @Test func directivesAtTheTop() throws {
        let text = """
            -- migrate:no-transaction
            -- migrate:lock-timeout 5s
            -- migrate:statement-timeout 2min
            -- migrate:up
            CREATE INDEX CONCURRENTLY a_id ON a (id);
            -- migrate:down
            DROP INDEX CONCURRENTLY a_id;
            """
        let migration = try SchemaMigration(fileName: "2_idx.sql", contents: text)
        #expect(!migration.isTransactional)
        #expect(migration.lockTimeout == "5s")
        #expect(migration.statementTimeout == "2min")
        #expect(migration.isReversible)
    }

    @Test func emptyDownSectionIsIrreversible() throws {
        let migration = try SchemaMigration(
            fileName: "1_a.sql", contents: "-- migrate:up\nCREATE TABLE a (id int);\n-- migrate:down\n\n-- nothing\n")
        #expect(migration.down == nil)
    }

    @Test func unknownDirectiveNamesFileAndLine() {
        let error = #expect(throws: MigrationError.self) {
            try SchemaMigration(fileName: "3_x.sql", contents: "-- migrate:up\nSELECT 1;\n-- migrate:no-transactions\n")
        }
        #expect(error?.kind == .invalidFile)
        #expect(error?.fileName == "3_x.sql")
        #expect(error?.line == 3)
    }

    @Test func noTransactionAfterSQLIsRefused() {
        let error = #expect(throws: MigrationError.self) {
            try SchemaMigration(fileName: "3_x.sql", contents: "SELECT 1;\n-- migrate:no-transaction\n")
        }
        #expect(error?.line == 2)
    }

    @Test func emptyUpSectionIsRefused() {
        let error = #expect(throws: MigrationError.self) {
            try SchemaMigration(fileName: "4_empty.sql", contents: "-- migrate:up\n\n-- migrate:down\nDROP TABLE a;\n")
        }
        #expect(error?.kind == .invalidFile)
        #expect(error?.fileName == "4_empty.sql")
    }

    @Test func checksumIgnoresLineEndingStyle() throws {
        let unix = try SchemaMigration(fileName: "1_a.sql", contents: "CREATE TABLE t (id int);\n-- migrate:down\nDROP TABLE t;\n")
        let windows = try SchemaMigration(
            fileName: "1_a.sql", contents: "CREATE TABLE t (id int);\r\n-- migrate:down\r\nDROP TABLE t;\r\n")
        let oldMac = try SchemaMigration(fileName: "1_a.sql", contents: "CREATE TABLE t (id int);\r-- migrate:down\rDROP TABLE t;\r")
        #expect(unix.checksum == windows.checksum)
        #expect(unix.checksum == oldMac.checksum)
        #expect(windows.down?.firstLine == 3)
        let edited = try SchemaMigration(fileName: "1_a.sql", contents: "CREATE TABLE t (id bigint);\n-- migrate:down\nDROP TABLE t;\n")
        #expect(edited.checksum != unix.checksum)
        #expect(unix.checksum == "238fb64a79783c1c3ec4a3d0ce8352f8717c6c5c16699c28ad1e52c3c87a890c")
    }

    @Test func directorySourceLoadsSortedAndRefusesDuplicates() throws {
        let directory = try TemporaryDirectory()
        try directory.write("10_c.sql", "SELECT 10;")
        try directory.write("2_b.sql", "SELECT 2;")
        try directory.write("README.md", "not a migration")
        let loaded = try MigrationSource.directory(directory.url).load()
        #expect(loaded.map(\.version) == [2, 10])
        try directory.write("02_again.sql", "SELECT 2;")
        let error = #expect(throws: MigrationError.self) { try MigrationSource.directory(directory.url).load() }
        #expect(error?.kind == .duplicateVersion)
    }

    @Test func missingDirectoryIsNamed() {
        let error = #expect(throws: MigrationError.self) {
            try MigrationSource.directory(path: "/nonexistent/skyros/migrations").load()
        }
        #expect(error?.kind == .sourceNotFound)
        #expect(error?.description.contains("/nonexistent/skyros/migrations") == true)
    }

    @Test func createWritesTheNextSequentialVersion() throws {
        let directory = try TemporaryDirectory()
        try directory.write("1_a.sql", "SELECT 1;")
        try directory.write("7_b.sql", "SELECT 7;")
        let url = try MigrationFileCreator.create(named: "Add reviews (v2)!", in: directory.url)
        #expect(url.lastPathComponent == "8_add_reviews_v2.sql")
        let text = try String(contentsOf: url, encoding: .utf8)
        #expect(text.contains("-- migrate:up"))
        #expect(text.contains("-- migrate:down"))
    }

    @Test func createFollowsTimestampVersions() throws {
        let directory = try TemporaryDirectory()
        try directory.write("20200101000000_a.sql", "SELECT 1;")
        let now = Date(timeIntervalSince1970: 1_750_000_000)  // 2025-06-15 15:06:40 UTC
        let url = try MigrationFileCreator.create(named: "b", in: directory.url, now: now)
        #expect(url.lastPathComponent == "20250615150640_b.sql")
        let empty = try TemporaryDirectory()
        #expect(try MigrationFileCreator.create(named: "first", in: empty.url).lastPathComponent == "1_first.sql")
    }
}
