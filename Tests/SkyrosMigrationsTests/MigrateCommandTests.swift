import Foundation
import SkyrosMigrations
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
            self.process.standardInput = FileHandle.nullDevice  // never a terminal: `repair` must ask for --yes
            self.process.standardOutput = try FileHandle(forWritingTo: self.out)
            self.process.standardError = try FileHandle(forWritingTo: self.err)
            try self.process.run()
        }

        /// What the process wrote to stderr so far (it is still writing: read incrementally).
        var stderrSoFar: String { (try? String(contentsOf: self.err, encoding: .utf8)) ?? "" }

        /// Waits for the process to exit, polling against a deadline; kills it if the deadline passes.
        func wait(deadline: Duration = .seconds(60)) async throws -> Result {
            _ = await eventually(within: deadline, every: .milliseconds(20)) { !self.process.isRunning }
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

    // MARK: Rolling deploys, repair, JSON, waiting, progress

    /// A newer build applied `4_author_bio.sql`; the previous build (files 1–3) still migrates at start: `up`
    /// succeeds with a notice on stderr, `--refuse-newer-applied` restores the refusal.
    @Test func anOlderBuildStartsAgainstANewerDatabase() async throws {
        try await withFixture { schema, older in
            let newer = try TemporaryDirectory()
            try ExampleMigrations.write(to: newer)
            try newer.write("4_author_bio.sql", "ALTER TABLE authors ADD COLUMN bio text;\n")
            let applied = try await Self.migrate(["up", "--dir", newer.path, "--schema", schema])
            #expect(applied.status == 0, "\(applied.stderr)")

            let base = ["--dir", older.path, "--schema", schema]
            let up = try await Self.migrate(["up"] + base)
            #expect(up.status == 0, "\(up.stderr)")
            #expect(up.stdout.contains("Nothing to migrate; database at version 4."))
            #expect(up.stderr.contains("notice"))
            #expect(up.stderr.contains("4_author_bio.sql"))
            #expect(try await Self.migrate(["verify"] + base).status == 0)

            let refused = try await Self.migrate(["up", "--refuse-newer-applied"] + base)
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("unknown applied version"), "\(refused.stderr)")
            #expect(try await Self.migrate(["verify", "--refuse-newer-applied"] + base).status == 1)

            // An edit inside the prefix is still refused.
            try older.write("2_seed_authors.sql", "INSERT INTO authors (name) VALUES ('Someone else');\n")
            let edited = try await Self.migrate(["up"] + base)
            #expect(edited.status == 1)
            #expect(edited.stderr.contains("2_seed_authors.sql"))
        }
    }

    /// `repair` refuses without `--yes` when stdin is not a terminal; with it, it records the old and the new
    /// checksum, and `verify` and `up` pass again.
    @Test func repairAfterAnEditMakesVerifyPass() async throws {
        try await withFixture { schema, directory in
            let base = ["--dir", directory.path, "--schema", schema]
            #expect(try await Self.migrate(base).status == 0)
            let table = TestServer.qualifiedHistory(schema)
            let recorded = try await TestServer.scalar(String.self, "SELECT checksum FROM \(unsafeRaw: table) WHERE version = 2")
            try directory.write(
                "2_seed_authors.sql",
                "-- migrate:up\n-- The first author.\nINSERT INTO authors (name) VALUES ('Ursula K. Le Guin');\n"
                    + "-- migrate:down\nDELETE FROM authors WHERE name = 'Ursula K. Le Guin';\n")
            #expect(try await Self.migrate(["verify"] + base).status == 1)

            let unconfirmed = try await Self.migrate(["repair"] + base)
            #expect(unconfirmed.status == 2)
            #expect(unconfirmed.stderr.contains("--yes"))
            #expect(try await Self.migrate(["verify"] + base).status == 1)

            let repaired = try await Self.migrate(["repair", "--yes"] + base)
            #expect(repaired.status == 0, "\(repaired.stderr)")
            #expect(repaired.stdout.contains("2_seed_authors.sql"))
            #expect(repaired.stdout.contains("Repaired 1 migration(s)"))

            let verify = try await Self.migrate(["verify"] + base)
            #expect(verify.status == 0, "\(verify.stderr)")
            #expect(try await Self.migrate(["up"] + base).status == 0)
            let again = try await Self.migrate(["repair", "--yes"] + base)
            #expect(again.stdout.contains("Nothing to repair"))

            let now = try await TestServer.scalar(String.self, "SELECT checksum FROM \(unsafeRaw: table) WHERE version = 2")
            #expect(now != recorded)
            let old = try await TestServer.scalar(
                String.self, "SELECT repairs->0->>'old_checksum' FROM \(unsafeRaw: table) WHERE version = 2")
            let new = try await TestServer.scalar(
                String.self, "SELECT repairs->0->>'new_checksum' FROM \(unsafeRaw: table) WHERE version = 2")
            #expect(old == recorded)
            #expect(new == now)
            #expect(try await TestServer.scalar(Int.self, "SELECT count(*)::int FROM \(unsafeRaw: table) WHERE repairs <> '[]'") == 1)
        }
    }

    /// `status --json` is one JSON document on stdout (Foundation parses it, and jq when installed); `up --json`
    /// and a failure under `--json` too.
    @Test func captureSQLPrintsAnInstallThatCapturesEveryWriter() async throws {
        try await withFixture { schema, directory in
            let base = ["--dir", directory.path, "--schema", schema]
            #expect(try await Self.migrate(["up"] + base).status == 0)
            let missing = try await Self.migrate(["capture-sql", "--schema", schema, "no_such_table"])
            #expect(missing.status != 0 && missing.stderr.contains("no_such_table"), "\(missing.stderr)")
            let printed = try await Self.migrate(["capture-sql", "--schema", schema, "authors"])
            #expect(printed.status == 0, "\(printed.stderr)")
            // The server quotes the names (`format('%I')`), so only where they need it.
            #expect(printed.stdout.contains("CREATE TRIGGER skyros_capture_update AFTER UPDATE ON \(schema).authors REFERENCING"), "\(printed.stdout)")
            // What a DBA runs: the printed script, then any writer's change is logged.
            let connection = try await TestServer.connect()
            try await connection.execute(script: printed.stdout)
            try await connection.query("INSERT INTO \(qualified: [schema, "authors"]) (name) VALUES ('Ada')")
            try await connection.query("UPDATE \(qualified: [schema, "authors"]) SET name = 'Ada L.'")
            let logged = try await connection.query(
                "SELECT count(*)::int FROM \(qualified: [schema, "skyros_change_log"]) WHERE changes <> ''")[0].decode(Int.self, at: 0)
            #expect(logged == 2)

            // What an operator sees, then removes: after `capture drop` every writer's statements run, uncaptured.
            let status = try await Self.migrate(["capture", "status", "--json", "--schema", schema])
            #expect(status.status == 0, "\(status.stderr)")
            let document = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
            #expect((document["version"] as? Int ?? 0) >= 3, "\(status.stdout)")
            #expect(document["tables"] as? [String] == ["authors"])
            #expect(document["logEntries"] as? Int == 2)
            let dropped = try await Self.migrate(["capture", "drop", "--include-log", "--schema", schema])
            #expect(dropped.status == 0 && dropped.stdout.contains("from 1 table(s)"), "\(dropped.stdout) \(dropped.stderr)")
            try await connection.query("UPDATE \(qualified: [schema, "authors"]) SET name = 'Ada Lovelace'")
            let leftovers = try await connection.query("""
                SELECT (SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'skyros\\_capture%'
                          AND tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = \(schema)::regnamespace))
                     + (SELECT count(*) FROM pg_proc WHERE proname LIKE 'skyros\\_capture%' AND pronamespace = \(schema)::regnamespace)
                     + (CASE WHEN to_regclass(\(schema + ".skyros_change_log")) IS NULL THEN 0 ELSE 1 END)
                """)[0].decode(Int.self, at: 0)
            #expect(leftovers == 0, "capture objects left after `capture drop --include-log`")
            let after = try await Self.migrate(["capture", "status", "--schema", schema])
            #expect(after.status == 0 && after.stdout.contains("No change capture"), "\(after.stdout)")
            await connection.close()
        }
    }

    @Test func statusJSONParses() async throws {
        try await withFixture { schema, directory in
            let base = ["--dir", directory.path, "--schema", schema]
            let up = try await Self.migrate(["up", "--json"] + base)
            #expect(up.status == 0, "\(up.stderr)")
            let upDocument = try #require(try JSONSerialization.jsonObject(with: Data(up.stdout.utf8)) as? [String: Any])
            #expect((upDocument["completed"] as? [Any])?.count == 3)
            #expect(upDocument["currentVersion"] as? Int == 3)
            #expect(up.stderr.contains("Applied 1_create_authors.sql"))

            let status = try await Self.migrate(["status", "--json"] + base)
            #expect(status.status == 0, "\(status.stderr)")
            let document = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
            #expect(document["command"] as? String == "status")
            #expect(document["applied"] as? Int == 3)
            #expect(document["pending"] as? Int == 0)
            #expect(document["currentVersion"] as? Int == 3)
            let migrations = try #require(document["migrations"] as? [[String: Any]])
            #expect(migrations.map { $0["state"] as? String } == ["applied", "applied", "applied"])
            #expect(migrations.first?["file"] as? String == "1_create_authors.sql")
            #expect(migrations.allSatisfy { ($0["appliedAt"] as? String)?.hasSuffix("Z") == true })

            if FileManager.default.isExecutableFile(atPath: "/usr/bin/jq") {
                let file = FileManager.default.temporaryDirectory.appendingPathComponent("status-\(UUID().uuidString).json")
                try Data(status.stdout.utf8).write(to: file)
                defer { try? FileManager.default.removeItem(at: file) }
                let jq = try await runProcess(
                    "/bin/sh", ["-c", "jq -e '.migrations | length == 3 and (map(.state) | all(. == \"applied\"))' < '\(file.path)' >/dev/null"])
                #expect(jq == 0)
            }

            try directory.write("2_seed_authors.sql", "INSERT INTO authors (name) VALUES ('Someone else');\n")
            let failed = try await Self.migrate(["up", "--json"] + base)
            #expect(failed.status == 1)
            let failure = try #require(try JSONSerialization.jsonObject(with: Data(failed.stdout.utf8)) as? [String: Any])
            let error = try #require(failure["error"] as? [String: Any])
            #expect(error["kind"] as? String == "refused")
            #expect(error["file"] as? String == "2_seed_authors.sql")
            #expect(failure["exitCode"] as? Int == 1)
        }
    }

    /// `up --wait 10` against a server that starts 3 s after it: it retries (a line per attempt on stderr) and
    /// then migrates.
    @Test(.enabled(if: PostgresFixture.isAvailable, "needs scripts/test's PostgreSQL binaries for a second cluster"))
    func upWaitsForAServerThatStartsLater() async throws {
        try await PostgresFixture.with("logged") { fixture in
            let url = try fixture.value("URL")
            let pgCtl = Self.pgCtl(data: fixture.root + "/data")
            #expect(try await runProcess("/bin/sh", ["-c", "\(pgCtl) stop -m fast -w >/dev/null 2>&1"]) == 0)
            let directory = try TemporaryDirectory()
            try ExampleMigrations.write(to: directory)
            let run = try Run(["up", "--wait", "10", "--dir", directory.path, "--database-url", url])
            try await Task.sleep(for: .seconds(3))  // the scenario: the server comes up 3 s later
            #expect(run.process.isRunning)
            // restart: starts it again with the options it last ran with (port, socket, listen address).
            #expect(try await runProcess("/bin/sh", ["-c", "\(pgCtl) -l \(fixture.root)/data.log -w -t 60 restart >/dev/null 2>&1"]) == 0)
            let result = try await run.wait(deadline: .seconds(60))
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stderr.contains("waiting for the database (attempt 1"))
            #expect(result.stderr.contains("the database accepts connections"))
            #expect(result.stdout.contains("Applied 3 migration(s)"))
            #expect(!result.stderr.contains(try fixture.value("PASSWORD")))
        }
    }

    /// A migration that runs until the test lets it end (it waits for an advisory lock the test holds): its
    /// start line is on stderr while it runs, then a progress line with the elapsed time, still while it runs
    /// (stderr is a file here: plain lines, no in-place rewriting). Progress, not durations: a loaded machine
    /// only makes the lines later.
    @Test func aLongMigrationReportsItsStartAndProgress() async throws {
        try await withFixture { schema, directory in
            let key = Int64.random(in: 1...Int64.max)
            try directory.write("4_slow.sql", "SELECT pg_advisory_lock(\(key));\nSELECT pg_advisory_unlock(\(key));\n")
            try await TestServer.withConnection { holder in
                _ = try await holder.query("SELECT pg_advisory_lock(\(key))")
                let run = try Run(["up", "--dir", directory.path, "--schema", schema])
                let sawStart = await eventually(within: .seconds(60), every: .milliseconds(50)) {
                    run.stderrSoFar.contains("Applying 4_slow.sql…") || !run.process.isRunning
                }
                #expect(sawStart && run.process.isRunning, "no start line while the migration runs: \(run.stderrSoFar)")
                let sawProgress = await eventually(within: .seconds(60), every: .milliseconds(50)) {
                    run.stderrSoFar.contains("4_slow.sql: still running, 5 s elapsed") || !run.process.isRunning
                }
                #expect(sawProgress && run.process.isRunning, "no progress line while the migration runs: \(run.stderrSoFar)")
                #expect(!run.stderrSoFar.contains("\u{1B}["), "no terminal control codes in a file")
                _ = try await holder.query("SELECT pg_advisory_unlock(\(key))")
                let result = try await run.wait(deadline: .seconds(60))
                #expect(result.status == 0, "\(result.stderr)")
                #expect(result.stdout.contains("Applied 4_slow.sql ("))
            }
        }
    }

    @Test func versionAndRemovedOptions() async throws {
        let version = try await Self.migrate(["--version"])
        #expect(version.status == 0)
        #expect(version.stdout.contains("Skyros \(SkyrosVersion.current)"))
        let statusHelp = try await Self.migrate(["status", "--help"])
        #expect(!statusHelp.stdout.contains("--lock-wait-timeout"))
        #expect(statusHelp.stdout.contains("--json"))
        #expect(statusHelp.stdout.contains("--wait"))
        #expect(statusHelp.stdout.contains("--connect-timeout"))
        let verifyHelp = try await Self.migrate(["verify", "--help"])
        #expect(!verifyHelp.stdout.contains("--lock-wait-timeout"))
        #expect(try await Self.migrate(["up", "--help"]).stdout.contains("--lock-wait-timeout"))
    }

    /// `pg_ctl -D data`, as the cluster's owner (`postgres` when the tests run as root).
    static func pgCtl(data: String) -> String {
        let binaries = ProcessInfo.processInfo.environment["SKYROS_TEST_PG_BIN"] ?? ""
        let prefix = getuid() == 0 ? "runuser -u postgres -- " : ""
        return "\(prefix)\(binaries)/pg_ctl -D \(data)"
    }
}
