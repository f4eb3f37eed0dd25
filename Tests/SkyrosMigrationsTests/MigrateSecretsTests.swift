import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// What the real `migrate` executable prints, with and without `--json`, holds no password from a mistyped URL and
/// no row value from the server's `DETAIL` of a failed migration.
@Suite("migrate: no secrets in its output", .timeLimit(.minutes(2)))
struct MigrateSecretsTests {
    /// The URL of issue #36: a missing colon, so libpq would read it as `keyword=value` pairs and quote it whole.
    static let mistyped = "postgres//u:Sup3rS3cret@host/db"

    /// Every piece of `secret` at least 4 characters long.
    static func pieces(of secret: String) -> [String] {
        let characters = Array(secret)
        return (0...(characters.count - 4)).map { String(characters[$0..<($0 + 4)]) }
    }

    /// Whether stdout or stderr holds any piece of `secret`; records which.
    static func expectNoPiece(
        of secret: String, in result: MigrateCommandTests.Result, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for piece in self.pieces(of: secret) {
            #expect(!result.stdout.contains(piece), "stdout shows \"\(piece)\": \(result.stdout)", sourceLocation: sourceLocation)
            #expect(!result.stderr.contains(piece), "stderr shows \"\(piece)\": \(result.stderr)", sourceLocation: sourceLocation)
        }
    }

    /// From `--database-url` and from `DATABASE_URL`: a usage error (exit 2) that names the position.
    @Test(arguments: [false, true])
    func aMistypedURLShowsNoPieceOfThePassword(json: Bool) async throws {
        let directory = try TemporaryDirectory()
        try ExampleMigrations.write(to: directory)
        let flags = json ? ["--json"] : []
        let runs: [(arguments: [String], environment: [String: String?])] = [
            (["up"] + flags + ["--dir", directory.path, "--database-url", Self.mistyped], [:]),
            (["status"] + flags + ["--dir", directory.path], ["DATABASE_URL": Self.mistyped]),
        ]
        for run in runs {
            let result = try await MigrateCommandTests.migrate(run.arguments, environment: run.environment)
            #expect(result.status == 2, "\(run.arguments): \(result.stderr)")
            #expect(
                result.stderr.contains("invalid database URL: malformed PostgreSQL URL at character 9: expected the URL to begin with"),
                "\(result.stderr)")
            Self.expectNoPiece(of: "Sup3rS3cret", in: result)
            if json {
                let document = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
                let error = try #require(document?["error"] as? [String: Any], "\(result.stdout)")
                #expect(error["kind"] as? String == "invalidConfiguration")
                #expect((error["message"] as? String)?.contains("at character 9") == true, "\(error)")
                #expect(document?["exitCode"] as? Int == 2)
            } else {
                #expect(result.stdout.isEmpty, "\(result.stdout)")
            }
        }
    }

    /// A migration that fails on a unique violation: stderr names the file, line and SQLSTATE, and the detail with
    /// the key's value redacted.
    @Test func aFailedMigrationShowsNoRowValue() async throws {
        let schema = TestServer.uniqueSchema("cli_detail")
        let directory = try TemporaryDirectory()
        let value = "Qz9m-\(UUID().uuidString.prefix(8))@example.com"
        try directory.write(
            "1_users.sql",
            "CREATE TABLE users (email text UNIQUE);\nINSERT INTO users VALUES ('\(value)');\n"
                + "INSERT INTO users VALUES ('\(value)');\n")
        try await withCleanup {
            for json in [false, true] {
                let result = try await MigrateCommandTests.migrate(
                    ["up"] + (json ? ["--json"] : []) + ["--dir", directory.path, "--schema", schema])
                #expect(result.status == 1, "\(result.stderr)")
                #expect(result.stderr.contains("1_users.sql:3: SQLSTATE 23505"), "\(result.stderr)")
                #expect(result.stderr.contains("detail: Key (email)=(<redacted>) already exists."), "\(result.stderr)")
                let distinctive = String(value.prefix(13))
                #expect(!result.stdout.contains(distinctive) && !result.stderr.contains(distinctive), "\(result.stdout)\n\(result.stderr)")
                if json {
                    let document = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
                    #expect((document?["error"] as? [String: Any])?["sqlState"] as? String == "23505", "\(result.stdout)")
                }
            }
        } cleanup: {
            await TestServer.dropSchema(schema)
        }
    }
}
