import Foundation
import Skyros
import SkyrosPostgres
import SkyrosSync
import SkyrosTestFixtures
import SkyrosTestSupport
import Testing

/// Installing the change capture: a role that may not, and two capture versions side by side.
@Suite struct CaptureInstallTests {
    /// A role that may write the tables but not create triggers on them: `start` fails with one error naming a
    /// table and carrying the SQL a DBA must run; no capture object is left behind. After an owner runs that
    /// SQL, the same role starts, and its stack follows another writer's changes.
    @Test func aRoleWithoutTriggerRightsGetsTheSQLToRunAndNothingChanges() async throws {
        try await CaptureHarness.withSchema { schema in
            let role = "skyros_app_\(UInt32.random(in: 0...UInt32.max))"
            let qualified = quoteIdentifier(schema)
            try await TestServer.withConnection { connection in
                _ = try await connection.execute(script: """
                    CREATE ROLE \(role) LOGIN PASSWORD 'app-secret';
                    GRANT USAGE, CREATE ON SCHEMA \(qualified) TO \(role);
                    GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA \(qualified) TO \(role);
                    DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO \(role)', current_database()); END $$;
                    """)
            }
            defer {
                Task {
                    try? await TestServer.withConnection { connection in
                        _ = try await connection.execute(script: "DROP OWNED BY \(role) CASCADE; DROP ROLE IF EXISTS \(role)")
                    }
                }
            }
            var session = try TestServer.configuration
            session["user"] = role
            session["password"] = "app-secret"
            var configuration = DataStackConfiguration(
                store: .postgres(session, schema: schema), entities: [CaptureAuthor.self, CaptureBook.self, CaptureAudit.self])
            configuration.pool.leaseTimeout = .seconds(30)

            let error = await thrownError { _ = try await DataStack.start(configuration) }
            let text = String(describing: try #require(error))
            #expect(text.contains("cap_authors"), "\(text)")
            #expect(text.contains("CREATE TRIGGER skyros_capture_insert"), "\(text)")
            #expect(!text.contains("app-secret"))
            let leftovers = try await TestServer.withConnection { connection in
                try await connection.query("""
                    SELECT (SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'skyros\\_capture%'
                              AND tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = \(schema)::regnamespace))
                         + (SELECT count(*) FROM pg_proc WHERE proname LIKE 'skyros\\_capture%' AND pronamespace = \(schema)::regnamespace)
                         + (CASE WHEN to_regclass(\(schema + ".skyros_change_log")) IS NULL THEN 0 ELSE 1 END)
                    """)[0].decode(Int.self, at: 0)
            }
            #expect(leftovers == 0, "capture objects were left behind")

            // The DBA runs the SQL (as the error carries it); the role then starts without installing anything.
            let sql = try #require(text.range(of: "BEGIN;").map { String(text[$0.lowerBound...]) })
            try await TestServer.withConnection { connection in
                _ = try await connection.execute(script: sql)
                _ = try await connection.execute(script: """
                    GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA \(qualified) TO \(role);
                    GRANT USAGE ON ALL SEQUENCES IN SCHEMA \(qualified) TO \(role);
                    """)
            }
            let stack = try await DataStack.start(configuration)
            #expect(try await stack.mainContext.object(CaptureBook.self, id: 2)?.title == "book2")
            _ = try await Psql.run("UPDATE cap_books SET title = 'renamed' WHERE id = 2", schema: schema)
            let renamed = try await expectEventually(within: CaptureHarness.deadline) {
                try await stack.mainContext.object(CaptureBook.self, id: 2)?.title == "renamed"
            }
            #expect(renamed)
            await stack.shutdown()
        }
    }

    /// Two capture versions at once. An older definition installed (one log row and hint per statement, as a
    /// simpler earlier version might write) is upgraded by a newer stack under the lock, and a stack started
    /// before keeps converging; a newer definition installed is left alone by this version, which converges
    /// with it too.
    /// (Versions of the trigger source's definition: its stacks are configured for it.)
    @Test func stacksConvergeAcrossCaptureVersions() async throws {
        try await CaptureHarness.withSchema { schema in
            let a = try await CaptureHarness.stack(schema: schema, source: .triggers)
            defer { Task { await a.shutdown() } }
            #expect(try await Self.installedComment(schema) == "skyros capture \(ChangeCapture.version)")

            // An older version's definition replaces the function.
            try await Self.installOlderDefinition(schema)
            #expect(try await Self.installedComment(schema) == "skyros capture 0")
            _ = try await Psql.run("UPDATE cap_books SET title = 'old-capture' WHERE id = 1", schema: schema)
            #expect(await Self.converges(a, book: 1, title: "old-capture"))

            // A stack of this version upgrades it; both follow psql.
            let b = try await CaptureHarness.stack(schema: schema, source: .triggers)
            defer { Task { await b.shutdown() } }
            // A durable write from the second stack of this process, right after it started: the first follows it.
            try await b.write(durability: .committed) { try await $0.update(CaptureBook(id: 3, authorID: 1, title: "from-b")) }
            #expect(await Self.converges(a, book: 3, title: "from-b"))
            #expect(try await Self.installedComment(schema) == "skyros capture \(ChangeCapture.version)")
            _ = try await Psql.run("UPDATE cap_books SET title = 'upgraded' WHERE id = 2", schema: schema)
            #expect(await Self.converges(a, book: 2, title: "upgraded"))
            #expect(await Self.converges(b, book: 2, title: "upgraded"))

            // A newer version's definition (simulated by its comment): this version leaves it in place.
            try await TestServer.withConnection { connection in
                _ = try await connection.execute(
                    script: "COMMENT ON FUNCTION \(quoteIdentifier(schema)).skyros_capture() IS 'skyros capture \(ChangeCapture.version + 1)'")
            }
            let c = try await CaptureHarness.stack(schema: schema, source: .triggers)
            defer { Task { await c.shutdown() } }
            #expect(try await Self.installedComment(schema) == "skyros capture \(ChangeCapture.version + 1)")
            _ = try await c.mainContext.object(CaptureBook.self, id: 4)
            _ = try await Psql.run("UPDATE cap_books SET title = 'newer' WHERE id = 4", schema: schema)
            #expect(await Self.converges(a, book: 4, title: "newer"))
            #expect(await Self.converges(c, book: 4, title: "newer"))
        }
    }

    private static func converges(_ stack: DataStack, book id: Int64, title: String) async -> Bool {
        (try? await expectEventually(within: CaptureHarness.deadline) {
            try await stack.mainContext.object(CaptureBook.self, id: id)?.title == title
        }) ?? false
    }

    private static func installedComment(_ schema: String) async throws -> String? {
        try await TestServer.withConnection { connection in
            try await connection.query(
                "SELECT obj_description(to_regprocedure(\(quoteIdentifier(schema) + ".skyros_capture()")), 'pg_proc')"
            )[0].decode(String?.self, at: 0)
        }
    }

    /// A version 0 capture function: one log row and one hint (`<position> <origin>`) per statement.
    private static func installOlderDefinition(_ schema: String) async throws {
        let q = quoteIdentifier(schema)
        let channel = schema.utf8.count + 15 <= 63 ? "skyros_changes_\(schema)" : "skyros_changes_default"
        try await TestServer.withConnection { connection in
            _ = try await connection.execute(script: """
                CREATE OR REPLACE FUNCTION \(q).skyros_capture() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
                SET search_path = pg_catalog, pg_temp AS $old$
                DECLARE part text; entry int8;
                BEGIN
                  IF TG_OP = 'DELETE' THEN
                    SELECT string_agg('{"t":' || to_json(TG_TABLE_NAME::text)::text || ',"o":' || TG_ARGV[1] || ',"i":'
                      || to_json(to_jsonb(o) ->> TG_ARGV[0])::text || ',"k":"d"}', ',') INTO part FROM skyros_old AS o;
                  ELSIF TG_OP = 'TRUNCATE' THEN
                    part := '{"t":' || to_json(TG_TABLE_NAME::text)::text || ',"o":0,"i":"","k":"t"}';
                  ELSE
                    SELECT string_agg('{"t":' || to_json(TG_TABLE_NAME::text)::text || ',"o":' || TG_ARGV[1] || ',"i":'
                      || to_json(to_jsonb(n) ->> TG_ARGV[0])::text || ',"k":"u"}', ',') INTO part FROM skyros_new AS n;
                  END IF;
                  IF part IS NULL THEN RETURN NULL; END IF;
                  INSERT INTO \(q).skyros_change_log (origin, changes)
                    VALUES ('00000000-0000-0000-0000-000000000000', '[' || part || ']') RETURNING position INTO entry;
                  PERFORM pg_notify('\(channel)', entry::text || ' 00000000-0000-0000-0000-000000000000');
                  RETURN NULL;
                END $old$;
                COMMENT ON FUNCTION \(q).skyros_capture() IS 'skyros capture 0';
                """)
        }
    }
}
