import Foundation
import Logging
import SkyrosPostgres
import SkyrosTestSupport
import Testing

@testable import SkyrosMigrations

/// The library against the real server; each test migrates its own schema and drops it.
@Suite("SchemaMigrator (PostgreSQL)", .timeLimit(.minutes(3)))
struct MigratorTests {
    /// Runs `body` with a fresh schema name, a directory holding the example migrations and a connection.
    func withFixture(
        _ body: (String, TemporaryDirectory, PGConnection) async throws -> Void
    ) async throws {
        let schema = TestServer.uniqueSchema()
        let directory = try TemporaryDirectory()
        try ExampleMigrations.write(to: directory)
        let connection = try await TestServer.connect()
        do {
            try await body(schema, directory, connection)
        } catch {
            await connection.close()
            await TestServer.dropSchema(schema)
            throw error
        }
        await connection.close()
        await TestServer.dropSchema(schema)
    }

    func migrator(_ schema: String, _ directory: TemporaryDirectory, lockWait: Duration = .seconds(60)) -> SchemaMigrator {
        SchemaMigrator(
            source: .directory(directory.url),
            configuration: .init(schema: schema, lockWaitTimeout: lockWait))
    }

    @Test func freshDatabaseMigratesThenSecondRunIsANoOp() async throws {
        try await withFixture { schema, directory, connection in
            let migrator = self.migrator(schema, directory)
            #expect(try await migrator.status(on: connection).map(\.state) == [.pending, .pending, .pending])

            let first = try await migrator.migrate(on: connection)
            #expect(first.completed.map(\.migration.version) == [1, 2, 3])
            #expect(first.currentVersion == 3)
            #expect(try await TestServer.scalar(Int.self, "SELECT count(*)::int FROM \(qualified: [schema, "authors"])") == 1)
            #expect(try await TestServer.relationExists(schema, "authors_name"))

            let second = try await migrator.migrate(on: connection)
            #expect(second.completed.isEmpty)
            #expect(second.currentVersion == 3)
            #expect(try await TestServer.scalar(Int.self, "SELECT count(*)::int FROM \(qualified: [schema, "authors"])") == 1)

            let statuses = try await migrator.status(on: connection)
            #expect(statuses.map(\.state) == [.applied, .applied, .applied])
            #expect(statuses.allSatisfy { $0.appliedAt != nil })
            #expect(try await migrator.verify(on: connection).isEmpty)

            // History rows carry checksum, timing and who applied them.
            let rows = try await connection.query(
                "SELECT checksum, execution_ms, applied_by FROM \(qualified: [schema, "skyros_schema_migrations"]) ORDER BY version")
            #expect(rows.count == 3)
            #expect(try rows[0].decode(String.self, at: 0) == migrator.migrations()[0].checksum)
            #expect(try rows[0].decode(String.self, at: 2) == "postgres")
        }
    }

    @Test func searchPathIsRestoredAndObjectsLandInTheSchema() async throws {
        try await withFixture { schema, directory, connection in
            let before = try await connection.query("SELECT current_setting('search_path')")[0].decode(String.self, at: 0)
            try await self.migrator(schema, directory).migrate(on: connection)
            let after = try await connection.query("SELECT current_setting('search_path')")[0].decode(String.self, at: 0)
            #expect(before == after)
            #expect(try await TestServer.relationExists(schema, "authors"))
            #expect(try await TestServer.scalar(Bool.self, "SELECT to_regclass('public.authors_name') IS NULL"))
        }
    }

    @Test func failingThirdLineNamesFileAndLineAndLeavesNothingBehind() async throws {
        try await withFixture { schema, directory, connection in
            try directory.write(
                "4_broken.sql",
                "CREATE TABLE partial_thing (id int);\nINSERT INTO partial_thing VALUES (1);\nINSERT INTO no_such_table VALUES (1);\n")
            let migrator = self.migrator(schema, directory)
            let error = await #expect(throws: MigrationError.self) { try await migrator.migrate(on: connection) }
            #expect(error?.kind == .statementFailed)
            #expect(error?.fileName == "4_broken.sql")
            #expect(error?.line == 3)
            #expect(error?.sqlState == .undefinedTable)
            #expect(error?.description.hasPrefix("4_broken.sql:3: SQLSTATE 42P01") == true)
            #expect(!(try await TestServer.relationExists(schema, "partial_thing")))
            #expect(try await migrator.status(on: connection).map(\.state) == [.applied, .applied, .applied, .pending])
            #expect(await !connection.isInTransaction)

            // A runtime error without a server position points at the statement's first line.
            try directory.write(
                "4_broken.sql",
                "CREATE TABLE partial_thing (id int PRIMARY KEY);\n\nINSERT INTO partial_thing\n  VALUES (1), (1);\n")
            let duplicate = await #expect(throws: MigrationError.self) { try await migrator.migrate(on: connection) }
            #expect(duplicate?.line == 3)
            #expect(duplicate?.sqlState == .uniqueViolation)

            try directory.write(
                "4_broken.sql", "CREATE TABLE partial_thing (id int);\nINSERT INTO partial_thing VALUES (1);\n")
            let fixed = try await migrator.migrate(on: connection)
            #expect(fixed.completed.map(\.migration.fileName) == ["4_broken.sql"])
            #expect(try await TestServer.relationExists(schema, "partial_thing"))
        }
    }

    @Test func editedAppliedFileIsRefusedByUpAndVerify() async throws {
        try await withFixture { schema, directory, connection in
            let migrator = self.migrator(schema, directory)
            try await migrator.migrate(on: connection)
            try directory.write(
                "1_create_authors.sql",
                "-- migrate:up\nCREATE TABLE authors (id uuid PRIMARY KEY, name text);\n-- migrate:down\nDROP TABLE authors;\n")
            try directory.write("5_more.sql", "CREATE TABLE more (id int);")
            let error = await #expect(throws: MigrationError.self) { try await migrator.migrate(on: connection) }
            #expect(error?.kind == .refused)
            #expect(error?.fileName == "1_create_authors.sql")
            #expect(error?.issues.map(\.kind) == [.checksumMismatch])
            #expect(!(try await TestServer.relationExists(schema, "more")))
            #expect(try await migrator.verify(on: connection).map(\.fileName) == ["1_create_authors.sql"])

            // A CRLF checkout of an unchanged file is not drift.
            try directory.remove("5_more.sql")
            let original = ExampleMigrations.files[0].1
            try directory.write("1_create_authors.sql", original.replacingOccurrences(of: "\n", with: "\r\n"))
            #expect(try await migrator.verify(on: connection).isEmpty)
        }
    }

    @Test func missingAndOutOfOrderFilesAreRefused() async throws {
        try await withFixture { schema, directory, connection in
            let migrator = self.migrator(schema, directory)
            try directory.remove("2_seed_authors.sql")
            try await migrator.migrate(on: connection)  // 1 and 3
            try directory.write("2_seed_authors.sql", ExampleMigrations.files[1].1)
            let outOfOrder = await #expect(throws: MigrationError.self) { try await migrator.migrate(on: connection) }
            #expect(outOfOrder?.issues.map(\.kind) == [.outOfOrder])
            #expect(outOfOrder?.fileName == "2_seed_authors.sql")

            let lenient = SchemaMigrator(
                source: .directory(directory.url), configuration: .init(schema: schema, allowOutOfOrder: true))
            #expect(try await lenient.migrate(on: connection).completed.map(\.migration.version) == [2])

            try directory.remove("1_create_authors.sql")
            let missing = await #expect(throws: MigrationError.self) { try await migrator.migrate(on: connection) }
            #expect(missing?.issues.map(\.kind) == [.missingFile])
            #expect(missing?.fileName == "1_create_authors.sql")
        }
    }

    @Test func rollbackRevertsTheNewestMigration() async throws {
        try await withFixture { schema, directory, connection in
            let migrator = self.migrator(schema, directory)
            try await migrator.migrate(on: connection)
            let report = try await migrator.rollback(steps: 1, on: connection)
            #expect(report.completed.map(\.migration.version) == [3])
            #expect(report.currentVersion == 2)
            #expect(!(try await TestServer.relationExists(schema, "authors_name")))
            let two = try await migrator.rollback(steps: 2, on: connection)
            #expect(two.completed.map(\.migration.version) == [2, 1])
            #expect(!(try await TestServer.relationExists(schema, "authors")))
            #expect(try await migrator.status(on: connection).map(\.state) == [.pending, .pending, .pending])

            try directory.write("4_irreversible.sql", "CREATE TABLE forever (id int);")
            try await migrator.migrate(on: connection)
            let error = await #expect(throws: MigrationError.self) { try await migrator.rollback(on: connection) }
            #expect(error?.kind == .irreversible)
            #expect(error?.fileName == "4_irreversible.sql")
        }
    }

    @Test func dryRunChangesNothing() async throws {
        try await withFixture { schema, directory, connection in
            let migrator = self.migrator(schema, directory)
            let report = try await migrator.migrate(on: connection, dryRun: true)
            #expect(report.isDryRun)
            #expect(report.planned.map(\.version) == [1, 2, 3])
            #expect(report.completed.isEmpty)
            #expect(try await TestServer.scalar(Int.self, "SELECT count(*)::int FROM pg_namespace WHERE nspname = \(schema)") == 0)

            try await migrator.migrate(on: connection, to: 2)
            let down = try await migrator.rollback(steps: 1, on: connection, dryRun: true)
            #expect(down.planned.map(\.version) == [2])
            #expect(try await TestServer.scalar(Int.self, "SELECT count(*)::int FROM \(qualified: [schema, "authors"])") == 1)
            #expect(try await migrator.status(on: connection).map(\.state) == [.applied, .applied, .pending])
        }
    }

    @Test func nonTransactionalStatementIsRefusedBeforeAnythingRuns() async throws {
        try await withFixture { schema, directory, connection in
            try directory.write(
                "4_index.sql", "CREATE TABLE t4 (id int);\n\nCREATE INDEX CONCURRENTLY t4_id ON t4 (id);\n")
            let migrator = self.migrator(schema, directory)
            let error = await #expect(throws: MigrationError.self) { try await migrator.migrate(on: connection) }
            #expect(error?.kind == .nonTransactionalStatement)
            #expect(error?.fileName == "4_index.sql")
            #expect(error?.line == 3)
            #expect(error?.message.contains("-- migrate:no-transaction") == true)
            #expect(try await TestServer.scalar(Int.self, "SELECT count(*)::int FROM pg_namespace WHERE nspname = \(schema)") == 1)
            #expect(!(try await TestServer.relationExists(schema, "authors")))  // refused before migration 1 ran
        }
    }

    @Test func statementTimeoutDirectiveApplies() async throws {
        try await withFixture { schema, directory, connection in
            try directory.write("4_slow.sql", "-- migrate:statement-timeout 100ms\nSELECT pg_sleep(5);\n")
            let migrator = self.migrator(schema, directory)
            let error = await #expect(throws: MigrationError.self) { try await migrator.migrate(on: connection) }
            #expect(error?.sqlState == .queryCanceled)
            #expect(error?.line == 2)
            // The timeout was local to the migration's transaction.
            #expect(try await connection.query("SHOW statement_timeout")[0].decode(String.self, at: 0) == "0")
        }
    }

    @Test func lockWaitTimesOutNamingTheHolder() async throws {
        try await withFixture { schema, directory, connection in
            let database = try await connection.query("SELECT current_database()")[0].decode(String.self, at: 0)
            let lock = MigrationLock(database: database, schema: schema, table: "skyros_schema_migrations")
            let holder = try await TestServer.connect()
            try await holder.query("SELECT pg_advisory_lock(\(lock.key))")
            let holderPID = await holder.backendPID
            let migrator = self.migrator(schema, directory, lockWait: .milliseconds(300))
            let error = await #expect(throws: MigrationError.self) { try await migrator.migrate(on: connection) }
            #expect(error?.kind == .lockTimeout)
            #expect(error?.message.contains("pid \(holderPID)") == true)
            #expect(try await TestServer.scalar(Int.self, "SELECT count(*)::int FROM pg_namespace WHERE nspname = \(schema)") == 0)
            await holder.close()
            #expect(try await migrator.migrate(on: connection).completed.count == 3)
        }
    }

    /// Eight migrators at once: each migration is applied once. The lock is held for as long as the first
    /// migrator's three migrations take, and one is a `CREATE INDEX CONCURRENTLY`, which waits for every
    /// transaction in the database holding an older snapshot (other suites hold some open on purpose): the
    /// others wait up to 150 s, what a loaded CI machine under ThreadSanitizer needs, not how long it should take.
    @Test func concurrentMigratorsApplyEachMigrationOnce() async throws {
        try await withFixture { schema, directory, _ in
            let migrator = self.migrator(schema, directory, lockWait: .seconds(150))
            let configuration = try TestServer.configuration
            let applied = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 {
                    group.addTask { try await migrator.migrate(database: configuration).completed.count }
                }
                return try await group.reduce(0, +)
            }
            #expect(applied == 3)
            #expect(try await TestServer.scalar(Int.self, "SELECT count(*)::int FROM \(qualified: [schema, "authors"])") == 1)
        }
    }

    @Test func baselineSkipsOlderFiles() async throws {
        try await withFixture { schema, directory, connection in
            try await connection.execute(
                script: "CREATE SCHEMA \(quoteIdentifier(schema)); CREATE TABLE \(quoteIdentifier(schema)).authors (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), name text NOT NULL)")
            let migrator = self.migrator(schema, directory)
            try await migrator.baseline(version: 1, on: connection)
            let report = try await migrator.migrate(on: connection)
            #expect(report.completed.map(\.migration.version) == [2, 3])
            #expect(try await migrator.status(on: connection).map(\.state) == [.baseline, .applied, .applied])
            let error = await #expect(throws: MigrationError.self) { try await migrator.baseline(version: 5, on: connection) }
            #expect(error?.kind == .invalidBaseline)
        }
    }

    /// A migration cancelled mid-statement (its task cancelled, as a startup deadline would) on a connection the
    /// caller keeps: the migration lock is released and the search path restored all the same (the statements
    /// were skipped in a cancelled task, and every other migrator then waited for this connection to close).
    @Test func aCancelledMigrationReleasesItsLockOnTheCallersConnection() async throws {
        try await withFixture { schema, _, connection in
            let migrations = try [SchemaMigration(version: 1, description: "slow", up: "SELECT pg_sleep(30);", down: "")]
            let migrator = SchemaMigrator(source: .migrations(migrations), configuration: .init(schema: schema))
            let pid = try await connection.query("SELECT pg_backend_pid()")[0].decode(Int.self, at: 0)
            let pathBefore = try await connection.query("SHOW search_path")[0].decode(String.self, at: 0)
            let running = Task { try await migrator.migrate(on: connection) }
            let observer = try await TestServer.connect()
            let started = try await eventually(within: .seconds(20), every: .milliseconds(20)) {
                try await observer.query(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = \(pid) AND query LIKE '%pg_sleep%'")[0].decode(Int.self, at: 0) > 0
            }
            try #require(started, "the migration never started its statement")
            running.cancel()
            _ = await running.result
            let locks = try await observer.query("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = \(pid)")
            #expect(try locks[0].decode(Int.self, at: 0) == 0)
            #expect(try await connection.query("SHOW search_path")[0].decode(String.self, at: 0) == pathBefore)
            await observer.close()
        }
    }

    @Test func inCodeSourceWorks() async throws {
        try await withFixture { schema, _, connection in
            let migrations = try [
                SchemaMigration(version: 1, description: "create t", up: "CREATE TABLE t (id int);", down: "DROP TABLE t;")
            ]
            let migrator = SchemaMigrator(source: .migrations(migrations), configuration: .init(schema: schema))
            #expect(try await migrator.migrate(on: connection).completed.count == 1)
            #expect(try await TestServer.relationExists(schema, "t"))
        }
    }

    /// The example schema shipped in `migrations/` at the package root applies, and reverts, cleanly.
    @Test func packageExampleMigrationsApplyAndRevert() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let schema = TestServer.uniqueSchema("example")
        let connection = try await TestServer.connect()
        let migrator = SchemaMigrator(
            source: .directory(root.appendingPathComponent("migrations")), configuration: .init(schema: schema))
        do {
            let report = try await migrator.migrate(on: connection)
            #expect(report.completed.count == (try migrator.migrations()).count)
            #expect(try await TestServer.relationExists(schema, "books"))
            #expect(try await TestServer.relationExists(schema, "books_title"))
            let steps = report.completed.count
            try await migrator.rollback(steps: steps, on: connection)
            #expect(!(try await TestServer.relationExists(schema, "authors")))
        } catch {
            await connection.close()
            await TestServer.dropSchema(schema)
            throw error
        }
        await connection.close()
        await TestServer.dropSchema(schema)
    }

    // MARK: Rolling deploys and repair

    /// The previous build (files 1–3) starts — `migrate(database:)`, the call `DataStack.start` makes — against a
    /// database a newer build took to version 4, logging a `notice`; `.refuse` restores the refusal.
    @Test func anOlderBuildStartsAgainstANewerDatabaseWithANotice() async throws {
        try await withFixture { schema, older, connection in
            let newer = try TemporaryDirectory()
            try ExampleMigrations.write(to: newer)
            try newer.write("4_author_bio.sql", "ALTER TABLE authors ADD COLUMN bio text;\n")
            try await self.migrator(schema, newer).migrate(on: connection)

            let handler = RecordingLogHandler()
            let logger = Logger(label: "test", factory: { _ in handler })
            let migrator = SchemaMigrator(
                source: .directory(older.url), configuration: .init(schema: schema, lockWaitTimeout: .seconds(60)),
                logger: logger)
            let report = try await migrator.migrate(database: try TestServer.configuration)
            #expect(report.completed.isEmpty)
            #expect(report.currentVersion == 4)
            #expect(report.newerApplied.map(\.fileName) == ["4_author_bio.sql"])
            let notices = handler.entries.filter { $0.level == .notice }
            #expect(notices.count == 1)
            #expect(notices.first.map { "\($0.message)".contains("4_author_bio.sql") } == true)
            #expect(try await migrator.verify(on: connection).isEmpty)
            #expect(try await migrator.status(on: connection).map(\.state) == [.applied, .applied, .applied, .newerThanFiles])

            let strict = SchemaMigrator(
                source: .directory(older.url),
                configuration: .init(schema: schema, lockWaitTimeout: .seconds(60), newerAppliedMigrations: .refuse))
            let error = await #expect(throws: MigrationError.self) {
                try await strict.migrate(database: try TestServer.configuration)
            }
            #expect(error?.kind == .refused)
            #expect(error?.issues.map(\.kind) == [.unknownAppliedVersion])
        }
    }

    /// `repair` on a history table an older build created (no `repairs` column): the column is added (twice is
    /// fine), the old and new checksums are recorded, and `verify` passes.
    @Test func repairUpgradesAnOlderHistoryAndRecordsBothChecksums() async throws {
        try await withFixture { schema, directory, connection in
            let migrator = self.migrator(schema, directory)
            try await migrator.migrate(on: connection)
            let table = TestServer.qualifiedHistory(schema)
            try await connection.execute(script: "ALTER TABLE \(table) DROP COLUMN repairs")
            #expect(try await migrator.repair(on: connection).isEmpty)

            try directory.write(
                "1_create_authors.sql",
                "-- migrate:up\n-- Authors.\nCREATE TABLE authors (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), name text NOT NULL);\n-- migrate:down\nDROP TABLE authors;\n")
            #expect(try await migrator.verify(on: connection).map(\.kind) == [.checksumMismatch])
            let planned = try await migrator.repair(on: connection, dryRun: true)
            #expect(planned.map(\.version) == [1])
            #expect(try await migrator.verify(on: connection).map(\.kind) == [.checksumMismatch])  // a dry run

            let repairs = try await migrator.repair(on: connection)
            #expect(repairs == planned)
            #expect(try await migrator.verify(on: connection).isEmpty)
            let rows = try await connection.query(
                "SELECT repairs->0->>'old_checksum', repairs->0->>'new_checksum', jsonb_array_length(repairs) FROM \(unsafeRaw: table) WHERE version = 1")
            let row = try #require(rows.first)
            #expect(try row.decode(String.self, at: 0) == repairs.first?.oldChecksum)
            #expect(try row.decode(String.self, at: 1) == repairs.first?.newChecksum)
            #expect(try row.decode(Int32.self, at: 2) == 1)
            // The upgrade is idempotent, and an older build's insert (named columns) still works.
            try await MigrationHistory(schema: schema, table: "skyros_schema_migrations").addRepairsColumn(on: connection)
            try directory.write("4_more.sql", "CREATE TABLE more (id int);\n")
            #expect(try await migrator.migrate(on: connection).completed.map(\.migration.version) == [4])
        }
    }
}
