import Foundation
@testable import Skyros
import Testing

/// `draft NAME [--database-url URL] [--schema S] [--dir D]`, as `MigrationDraft.command` parses it.
@Suite("Migration draft command line (no server)")
struct DraftOptionsTests {
    static let environment = ["DATABASE_URL": "postgresql://localhost/app"]

    @Test("defaults: DATABASE_URL, public, the app's directory")
    func defaults() throws {
        let options = try DraftOptions(["draft", "add bio"], directory: "migrations", environment: Self.environment)
        #expect(options == DraftOptions(
            name: "add bio", databaseURL: "postgresql://localhost/app", schema: "public", directory: "migrations"))
    }

    @Test("options, separate or with =, win over the environment")
    func options() throws {
        let options = try DraftOptions(
            ["draft", "--schema=app", "x", "--dir", "db/migrations", "--database-url", "postgresql://other/db"],
            directory: "migrations", environment: Self.environment.merging(["DATABASE_SCHEMA": "env"]) { $1 })
        #expect(options == DraftOptions(
            name: "x", databaseURL: "postgresql://other/db", schema: "app", directory: "db/migrations"))
        let fromEnvironment = try DraftOptions(
            ["draft", "x"], directory: "m", environment: Self.environment.merging(["DATABASE_SCHEMA": "env"]) { $1 })
        #expect(fromEnvironment.schema == "env")
    }

    @Test("usage errors", arguments: [
        ["add"], [], ["draft"], ["draft", "a", "b"], ["draft", "a", "--table", "t"], ["draft", "a", "--schema"],
        ["draft", "a", "--dir="],
    ])
    func usageErrors(_ arguments: [String]) {
        #expect(throws: DraftOptions.UsageError.self) {
            try DraftOptions(arguments, directory: "migrations", environment: Self.environment)
        }
    }

    @Test("no database is a usage error")
    func noDatabase() {
        #expect(throws: DraftOptions.UsageError.self) {
            try DraftOptions(["draft", "a"], directory: "migrations", environment: ["DATABASE_URL": ""])
        }
    }
}
