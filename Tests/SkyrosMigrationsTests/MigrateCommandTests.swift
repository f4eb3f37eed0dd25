import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// The real `migrate` executable (built next to the test bundle by `swift build --build-tests`).
@Suite("migrate command (PostgreSQL)", .timeLimit(.minutes(5)))
struct MigrateCommandTests {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// The `migrate` binary: next to the test bundle, or under the package's `.build/debug`.
    static var executable: URL {
        get throws {
            let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            let candidates = [
                URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("migrate"),
                Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("migrate"),
                packageRoot.appendingPathComponent(".build/debug/migrate"),
            ]
            return try #require(
                candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) },
                "the migrate executable was not built: run `swift build --build-tests`")
        }
    }

    /// Starts `migrate arguments…` with `DATABASE_URL` (unless `environment` overrides it); output goes to files.
    final class Run: @unchecked Sendable {  // Process is used from one task at a time only.
        let process = Process()
        let out: URL
        let err: URL

        init(_ arguments: [String], environment: [String: String?] = [:]) throws {
            let base = FileManager.default.temporaryDirectory.appendingPathComponent("migrate-\(UUID().uuidString)")
            self.out = base.appendingPathExtension("out")
            self.err = base.appendingPathExtension("err")
            _ = FileManager.default.createFile(atPath: self.out.path, contents: nil)
            _ = FileManager.default.createFile(atPath: self.err.path, contents: nil)
            self.process.executableURL = try MigrateCommandTests.executable
            self.process.arguments = arguments
            var env = ProcessInfo.processInfo.environment
            for (key, value) in environment { env[key] = value }
            self.process.environment = env
            self.process.standardOutput = try FileHandle(forWritingTo: self.out)
            self.process.standardError = try FileHandle(forWritingTo: self.err)
            try self.process.run()
        }

        /// Waits for the process to exit, polling against a deadline; kills it if the deadline passes.
        func wait(deadline: Duration = .seconds(60)) async throws -> Result {
            _ = await poll(within: deadline, every: .milliseconds(20)) { !self.process.isRunning }
            if self.process.isRunning {
                self.process.terminate()
                Issue.record("migrate \(self.process.arguments ?? []) did not exit within \(deadline)")
            }
            self.process.waitUntilExit()
            let stdout = (try? String(contentsOf: self.out, encoding: .utf8)) ?? ""
            let stderr = (try? String(contentsOf: self.err, encoding: .utf8)) ?? ""
            try? FileManager.default.removeItem(at: self.out)
            try? FileManager.default.removeItem(at: self.err)
            return Result(status: self.process.terminationStatus, stdout: stdout, stderr: stderr)
        }
    }

    static func migrate(_ arguments: [String], environment: [String: String?] = [:]) async throws -> Result {
        try await Run(arguments, environment: environment).wait()
    }

    func withFixture(_ body: (String, TemporaryDirectory) async throws -> Void) async throws {
        let schema = TestServer.uniqueSchema("cli")
        let directory = try TemporaryDirectory()
        try ExampleMigrations.write(to: directory)
        do {
            try await body(schema, directory)
        } catch {
            await TestServer.dropSchema(schema)
            throw error
        }
        await TestServer.dropSchema(schema)
    }

    /// An out-of-range lock wait is a usage error (exit 2), not a crash: `inf` and 1e19 seconds overflowed the
    /// conversion to milliseconds and trapped.
    @Test func anOutOfRangeLockWaitIsAUsageError() async throws {
        try await withFixture { schema, directory in
            for value in ["inf", "1e19", "-1"] {
                let result = try await Self.migrate(["--dir", directory.path, "--schema", schema, "--lock-wait-timeout", value])
                #expect(result.status == 2, "\(value): \(result.stderr)")
                #expect(result.stderr.contains("--lock-wait-timeout"), "\(value)")
            }
        }
    }

    @Test func upThenNoOpAndStatusReflectsBoth() async throws {
        try await withFixture { schema, directory in
            let base = ["--dir", directory.path, "--schema", schema]
            let before = try await Self.migrate(["status", "--exit-code"] + base)
            #expect(before.status == 3)
            #expect(before.stdout.contains("Version"))
            #expect(before.stdout.contains("0 applied, 3 pending."))

            let up = try await Self.migrate(base)
            #expect(up.status == 0, "\(up.stderr)")
            let progress = up.stdout.split(separator: "\n").filter { $0.hasPrefix("Applied ") && $0.contains(".sql (") }
            #expect(progress.count == 3)
            #expect(up.stdout.contains("Applied 1_create_authors.sql ("))
            #expect(up.stdout.contains(" ms)"))

            let again = try await Self.migrate(["up"] + base)
            #expect(again.status == 0)
            #expect(again.stdout.contains("Nothing to migrate; database at version 3."))

            let after = try await Self.migrate(["status", "--exit-code"] + base)
            #expect(after.status == 0)
            #expect(after.stdout.contains("3 applied, 0 pending."))
            #expect(after.stdout.contains("create authors"))
            #expect(after.stdout.contains("UTC"))
        }
    }

    @Test func sixProcessesAtOnceApplyEachMigrationExactlyOnce() async throws {
        try await withFixture { schema, directory in
            let runs = try (0..<6).map { _ in try Run(["up", "--dir", directory.path, "--schema", schema]) }
            var results: [Result] = []
            for run in runs { results.append(try await run.wait(deadline: .seconds(120))) }
            for result in results { #expect(result.status == 0, "\(result.stderr)") }
            let applyLines = results.map { result in
                result.stdout.split(separator: "\n").filter { $0.hasPrefix("Applied ") && $0.contains(".sql (") }.count
            }
            #expect(applyLines.reduce(0, +) == 3)
            #expect(try await TestServer.scalar(Int.self, "SELECT count(*)::int FROM \(qualified: [schema, "authors"])") == 1)
            #expect(
                try await TestServer.scalar(
                    Int.self, "SELECT count(*)::int FROM \(qualified: [schema, "skyros_schema_migrations"])") == 3)
        }
    }

    @Test func failureOnThirdLineNamesFileAndLineAndRerunProceeds() async throws {
        try await withFixture { schema, directory in
            let base = ["--dir", directory.path, "--schema", schema]
            try directory.write(
                "4_broken.sql",
                "CREATE TABLE partial_thing (id int);\nINSERT INTO partial_thing VALUES (1);\nINSERT INTO no_such_table VALUES (1);\n")
            let failed = try await Self.migrate(base)
            #expect(failed.status == 1)
            #expect(failed.stderr.contains("4_broken.sql:3: SQLSTATE 42P01: relation \"no_such_table\" does not exist"))
            #expect(failed.stdout.contains("Applied 3_index_authors_name.sql"))
            #expect(!(try await TestServer.relationExists(schema, "partial_thing")))
            let status = try await Self.migrate(["status"] + base)
            #expect(status.stdout.contains("3 applied, 1 pending."))

            try directory.write("4_broken.sql", "CREATE TABLE partial_thing (id int);\nINSERT INTO partial_thing VALUES (1);\n")
            let fixed = try await Self.migrate(base)
            #expect(fixed.status == 0, "\(fixed.stderr)")
            #expect(fixed.stdout.contains("Applied 4_broken.sql"))
            #expect(try await TestServer.scalar(Int.self, "SELECT count(*)::int FROM \(qualified: [schema, "partial_thing"])") == 1)
        }
    }

    @Test func editedFileIsRefusedByUpAndVerify() async throws {
        try await withFixture { schema, directory in
            let base = ["--dir", directory.path, "--schema", schema]
            #expect(try await Self.migrate(base).status == 0)
            #expect(try await Self.migrate(["verify"] + base).status == 0)
            try directory.write("2_seed_authors.sql", "INSERT INTO authors (name) VALUES ('Someone else');\n")
            let up = try await Self.migrate(base)
            #expect(up.status == 1)
            #expect(up.stderr.contains("2_seed_authors.sql"))
            #expect(up.stderr.contains("checksum"))
            let verify = try await Self.migrate(["verify"] + base)
            #expect(verify.status == 1)
            #expect(verify.stderr.contains("checksum mismatch: 2_seed_authors.sql"))
        }
    }

    @Test func downDryRunAndCreate() async throws {
        try await withFixture { schema, directory in
            let base = ["--dir", directory.path, "--schema", schema]
            let dry = try await Self.migrate(["--dry-run"] + base)
            #expect(dry.status == 0)
            #expect(dry.stdout.contains("Dry run: would apply 3 migration(s)"))
            #expect(dry.stdout.contains("CREATE TABLE authors"))
            #expect(try await TestServer.scalar(Int.self, "SELECT count(*)::int FROM pg_namespace WHERE nspname = \(schema)") == 0)

            #expect(try await Self.migrate(base).status == 0)
            let down = try await Self.migrate(["down", "--steps", "1"] + base)
            #expect(down.status == 0, "\(down.stderr)")
            #expect(down.stdout.contains("Reverted 3_index_authors_name.sql ("))
            #expect(!(try await TestServer.relationExists(schema, "authors_name")))
            #expect(try await TestServer.relationExists(schema, "authors"))

            let created = try await Self.migrate(["create", "add reviews", "--dir", directory.path])
            #expect(created.status == 0)
            #expect(FileManager.default.fileExists(atPath: directory.url.appendingPathComponent("4_add_reviews.sql").path))
        }
    }

    @Test func unreachableDatabaseDoesNotPrintThePassword() async throws {
        let directory = try TemporaryDirectory()
        try ExampleMigrations.write(to: directory)
        let secret = "s3cret-Pa55word-\(UUID().uuidString.prefix(6))"
        let result = try await Self.migrate(
            ["--dir", directory.path, "--database-url", "postgres://app:\(secret)@127.0.0.1:1/app?connect_timeout=5"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("migrate: error:"))
        #expect(!result.stderr.contains(secret))
        #expect(!result.stdout.contains(secret))

        let malformed = try await Self.migrate(
            ["--dir", directory.path, "--database-url", "postgres://app:\(secret)@[bad/app?sslmode=nonsense"])
        #expect(malformed.status == 2)
        #expect(!malformed.stderr.contains(secret))
    }

    @Test func usageErrorsExitTwoAndHelpDocumentsExitCodes() async throws {
        let noURL = try await Self.migrate(["status"], environment: ["DATABASE_URL": nil])
        #expect(noURL.status == 2)
        #expect(noURL.stderr.contains("DATABASE_URL"))
        #expect(try await Self.migrate(["down", "--steps", "zero"]).status == 2)
        #expect(try await Self.migrate(["--no-such-flag"]).status == 2)
        let help = try await Self.migrate(["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("Exit codes:"))
        #expect(help.stdout.contains("usage error"))
    }
}
