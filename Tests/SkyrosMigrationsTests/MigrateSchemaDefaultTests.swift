import Foundation
import SkyrosMigrations
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Which schema the real `migrate` executable works in when `--schema` is not given: `DATABASE_SCHEMA`, else the
/// library's default (`SchemaMigrator.Configuration.defaultSchema`), so that it reads the history an app wrote.
@Suite("migrate command: the default schema (PostgreSQL)", .timeLimit(.minutes(3)))
struct MigrateSchemaDefaultTests {
    /// `status --json`'s document.
    static func status(_ arguments: [String], environment: [String: String?]) async throws -> [String: Any] {
        let result = try await MigrateCommandTests.migrate(["status", "--json"] + arguments, environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(
            try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
            "stdout: \(result.stdout)\nstderr: \(result.stderr)")
    }

    @Test("DATABASE_SCHEMA is the schema of every command without --schema; --schema wins over it")
    func theEnvironmentVariableNamesTheSchema() async throws {
        let schema = TestServer.uniqueSchema("envschema")
        let directory = try TemporaryDirectory()
        try ExampleMigrations.write(to: directory)
        try await withCleanup {
            let environment: [String: String?] = ["DATABASE_SCHEMA": schema]
            let up = try await MigrateCommandTests.migrate(["up", "--dir", directory.path], environment: environment)
            #expect(up.status == 0, "\(up.stderr)")
            #expect(try await TestServer.relationExists(schema, "authors"))
            #expect(try await TestServer.relationExists(schema, "skyros_schema_migrations"))

            let status = try await MigrateCommandTests.migrate(
                ["status", "--exit-code", "--dir", directory.path], environment: environment)
            #expect(status.status == 0, "\(status.stderr)")
            #expect(status.stdout.contains("3 applied, 0 pending."))
            let document = try await Self.status(["--dir", directory.path], environment: environment)
            #expect(document["schema"] as? String == schema)
            #expect(document["applied"] as? Int == 3)

            // An explicit --schema wins: the other schema holds no history, so everything is pending there.
            let other = TestServer.uniqueSchema("envschema_other")
            let overridden = try await Self.status(["--dir", directory.path, "--schema", other], environment: environment)
            #expect(overridden["schema"] as? String == other)
            #expect(overridden["pending"] as? Int == 3)
        } cleanup: {
            await TestServer.dropSchema(schema)
        }
    }

    @Test("without --schema and DATABASE_SCHEMA (unset or empty) the command uses the library's default schema")
    func theLibrarysDefaultOtherwise() async throws {
        #expect(SchemaMigrator.Configuration.defaultSchema == "public")
        #expect(SchemaMigrator.Configuration().schema == SchemaMigrator.Configuration.defaultSchema)
        let directory = try TemporaryDirectory()
        try ExampleMigrations.write(to: directory)
        // `status` only reads: the shared database's public schema is left as it is.
        for value in [nil, ""] as [String?] {
            let document = try await Self.status(["--dir", directory.path], environment: ["DATABASE_SCHEMA": value])
            #expect(document["schema"] as? String == SchemaMigrator.Configuration.defaultSchema, "DATABASE_SCHEMA=\(value ?? "unset")")
        }
    }

    @Test("--help names DATABASE_SCHEMA and the default schema")
    func helpSaysWhereTheSchemaComesFrom() async throws {
        for arguments in [["--help"], ["status", "--help"], ["up", "--help"]] {
            let result = try await MigrateCommandTests.migrate(arguments, environment: ["DATABASE_SCHEMA": nil])
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            let help = result.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            #expect(help.contains("DATABASE_SCHEMA"), "\(arguments): \(result.stdout)")
            #expect(help.contains("'\(SchemaMigrator.Configuration.defaultSchema)'"), "\(arguments): \(result.stdout)")
        }
    }
}
