import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The README's Quickstart as a newcomer runs it: its migration file and its program, as printed, run twice
/// against one database, then the real `migrate status` beside it, with neither given a schema. Each run is a
/// database of its own: the Quickstart uses the default schema (`public`), which every other suite leaves alone.
@Suite("Quickstart (PostgreSQL)", .timeLimit(.minutes(5)))
struct QuickstartTests {
    /// Where the Quickstart's migrations come from.
    enum Migrations: String, CustomTestStringConvertible, CaseIterable {
        /// A fresh project holding only the README's `migrations/1_create_authors.sql`.
        case readmeFile
        /// A checkout of this repository: `swift run skyros-quickstart` with its three files in `migrations/`.
        case checkout

        var testDescription: String { self.rawValue }
    }

    static let packageRoot: URL = {
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { root.deleteLastPathComponent() }
        return root
    }()

    @Test("the README's Quickstart is the program and the migration file that are run")
    func theReadmeShowsWhatRuns() throws {
        let program = try String(
            contentsOf: Self.packageRoot.appendingPathComponent("Sources/skyros-quickstart/main.swift"), encoding: .utf8)
        #expect(try Self.readmeBlock("swift") == program, "README.md's Quickstart and Sources/skyros-quickstart/main.swift differ")
        let migration = try String(
            contentsOf: Self.packageRoot.appendingPathComponent("migrations/1_create_authors.sql"), encoding: .utf8)
        #expect(try Self.readmeBlock("sql") == migration, "README.md's Quickstart migration and migrations/1_create_authors.sql differ")
    }

    @Test("the Quickstart runs twice against one database; migrate status beside it shows every migration applied",
          arguments: Migrations.allCases)
    func runsTwiceAndMigrateStatusAgrees(_ migrations: Migrations) async throws {
        let project = try Self.project(migrations)
        defer { if migrations == .readmeFile { try? FileManager.default.removeItem(at: project) } }
        let expected = try FileManager.default.contentsOfDirectory(atPath: project.appendingPathComponent("migrations").path)
            .filter { $0.hasSuffix(".sql") }.count
        try await Self.withDatabase { database, url in
            for run in 1...2 {
                let result = try await Self.run(Self.executable("skyros-quickstart"), [], in: project, databaseURL: url)
                #expect(result.status == 0, "run \(run): \(result.report)")
                #expect(result.stdout == "Ada Lovelace ada@example.com\n", "run \(run): \(result.report)")
            }
            let authors = try await PGConnection.connect(to: database)
            let counts = try await authors.query("SELECT count(*)::int, count(email)::int FROM public.authors")[0]
            await authors.close()
            #expect(try counts.decode(Int.self, at: 0) == 1)
            #expect(try counts.decode(Int.self, at: 1) == 1)

            let migrate = try Self.executable("migrate")
            let status = try await Self.run(migrate, ["status", "--exit-code"], in: project, databaseURL: url)
            #expect(status.status == 0, "\(status.report)")
            #expect(status.stdout.contains("\(expected) applied, 0 pending."), "\(status.report)")

            let json = try await Self.run(migrate, ["status", "--json"], in: project, databaseURL: url)
            #expect(json.status == 0, "\(json.report)")
            let document = try #require(
                try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.report)")
            #expect(document["schema"] as? String == "public")
            #expect(document["applied"] as? Int == expected)
            #expect(document["pending"] as? Int == 0)
            let states = (document["migrations"] as? [[String: Any]] ?? []).map { $0["state"] as? String }
            #expect(states == Array(repeating: "applied", count: expected))
        }
    }

    // MARK: The README

    /// The first fenced block of `language` in the README's Quickstart section, with its final newline.
    static func readmeBlock(_ language: String) throws -> String {
        let readme = try String(contentsOf: self.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let lines = readme.components(separatedBy: "\n")
        let start = try #require(lines.firstIndex(of: "## Quickstart"), "README.md has no Quickstart section")
        let end = lines[(start + 1)...].firstIndex { $0.hasPrefix("## ") } ?? lines.endIndex
        let open = try #require(
            lines[start..<end].firstIndex(of: "```" + language), "the Quickstart has no ```\(language) block")
        let close = try #require(lines[(open + 1)..<end].firstIndex(of: "```"), "the ```\(language) block is not closed")
        return lines[(open + 1)..<close].map { $0 + "\n" }.joined()
    }

    /// The directory the Quickstart runs in: a new one holding the README's migration, or the checkout.
    static func project(_ migrations: Migrations) throws -> URL {
        switch migrations {
        case .checkout:
            return self.packageRoot
        case .readmeFile:
            let project = FileManager.default.temporaryDirectory.appendingPathComponent("quickstart-\(UUID().uuidString)")
            let directory = project.appendingPathComponent("migrations")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try Data(try self.readmeBlock("sql").utf8).write(to: directory.appendingPathComponent("1_create_authors.sql"))
            return project
        }
    }

    // MARK: The database

    /// Runs `body` with a new database (its configuration and a `DATABASE_URL` for it), dropped afterwards.
    static func withDatabase(_ body: (PGConfiguration, String) async throws -> Void) async throws {
        let name = "quickstart_\(UUID().uuidString.prefix(8).lowercased())"
        let database = try TestServer.configuration.withDatabase(name)
        _ = try await TestServer.withConnection { try await $0.execute(script: "CREATE DATABASE \(quoteIdentifier(name))") }
        try await withCleanup {
            try await body(database, Self.conninfo(database))
        } cleanup: {
            if let connection = try? await PGConnection.connect(to: database) {
                await TestServer.dropLogicalCapture(schema: "public", on: connection)
                await connection.close()
            }
            _ = try? await TestServer.withConnection {
                try await $0.execute(script: "DROP DATABASE IF EXISTS \(quoteIdentifier(name)) WITH (FORCE)")
            }
        }
    }

    /// The configuration as a keyword conninfo string, which `PGConfiguration(url:)` and libpq read back.
    static func conninfo(_ configuration: PGConfiguration) -> String {
        configuration.options.map { option in
            let value = option.value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'")
            return "\(option.keyword)='\(value)'"
        }.joined(separator: " ")
    }

    // MARK: The executables

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
        var report: String { "exit \(self.status)\nstdout:\n\(self.stdout)stderr:\n\(self.stderr)" }
    }

    /// A product of this build: next to the running test bundle, else under `<package root>/.build/debug`.
    static func executable(_ name: String) throws -> String {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(name).path,
            self.packageRoot.appendingPathComponent(".build/debug/\(name)").path,
        ]
        return try #require(
            candidates.first { FileManager.default.isExecutableFile(atPath: $0) },
            "\(name) was not built: run `swift build --build-tests`")
    }

    /// Runs `executable arguments…` in `directory` with `DATABASE_URL` and without `DATABASE_SCHEMA`, as a user
    /// runs it from a shell in their project; killed after two minutes.
    static func run(_ executable: String, _ arguments: [String], in directory: URL, databaseURL: String) async throws -> Result {
        let process = try NodeProcess.spawn(
            "/bin/sh",
            ["-c", "cd \"$1\" && shift && exec /usr/bin/env \"$@\"", "sh", directory.path,
             "-u", "DATABASE_SCHEMA", "DATABASE_URL=\(databaseURL)", executable] + arguments)
        let status = await process.exitStatus(killingAfter: .seconds(120))
        let result = Result(status: status, stdout: process.output, stderr: process.errorOutput)
        process.removeOutput()
        return result
    }
}
