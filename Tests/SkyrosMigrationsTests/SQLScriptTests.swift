import Testing

@testable import SkyrosMigrations

@Suite("SQL splitting and non-transactional statements")
struct SQLScriptTests {
    @Test func splitsOnlyOnTopLevelSemicolons() {
        let sql = """
            -- a comment; not a statement
            CREATE TABLE t (s text DEFAULT 'a;b', "we;ird" int); /* block; /* nested; */ still */
            INSERT INTO t VALUES (E'it\\'s; fine');
            CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $body$
            BEGIN
              RETURN 1;
            END;
            $body$;
            CREATE FUNCTION g(a int) RETURNS int LANGUAGE sql
            BEGIN ATOMIC
              SELECT CASE WHEN a > 0 THEN 1 ELSE 0 END;
              SELECT 2;
            END;
            SELECT $1
            """
        let statements = SQLScript.statements(in: sql, firstLine: 10)
        #expect(statements.count == 5)
        #expect(statements.map(\.line) == [11, 12, 13, 18, 23])
        #expect(statements[0].words.prefix(3) == ["CREATE", "TABLE", "T"])
        #expect(statements[2].text.hasSuffix("$body$"))
        #expect(statements[3].text.hasSuffix("END"))
        #expect(statements[4].text == "SELECT $1")
    }

    /// A semicolon inside parentheses does not end the statement (as in psql): a rule's action list.
    @Test func semicolonsInsideParenthesesDoNotSplit() {
        let sql = """
            CREATE RULE r AS ON INSERT TO t DO ALSO (INSERT INTO log VALUES (1); INSERT INTO log VALUES (2));
            SELECT ')';
            SELECT (1);
            """
        let statements = SQLScript.statements(in: sql, firstLine: 1)
        #expect(statements.count == 3)
        #expect(statements.first?.text.hasSuffix("VALUES (2))") == true)
        #expect(statements.map(\.line) == [1, 2, 3])
    }

    @Test func serverPositionMapsToFileLine() throws {
        let statements = SQLScript.statements(in: "\n\nINSERT INTO a\n  VALUES (1),\n  (nope);", firstLine: 5)
        let statement = try #require(statements.first)
        #expect(statement.line == 7)
        let position = Array(statement.text.unicodeScalars).firstIndex(of: "n")! + 1
        #expect(statement.line(ofPosition: position) == 9)
        #expect(statement.line(ofPosition: 1) == 7)
    }

    @Test(arguments: [
        "CREATE INDEX CONCURRENTLY a_id ON a (id)",
        "create unique index concurrently a_id on a (id)",
        "DROP INDEX CONCURRENTLY a_id",
        "REINDEX (VERBOSE) TABLE CONCURRENTLY a",
        "REINDEX DATABASE app",
        "VACUUM ANALYZE a",
        "CREATE DATABASE other",
        "DROP DATABASE other",
        "ALTER SYSTEM SET work_mem = '64MB'",
        "ALTER TABLE p DETACH PARTITION p1 CONCURRENTLY",
        "COMMIT",
        "BEGIN",
        "ROLLBACK",
    ])
    func refusedInsideATransaction(sql: String) throws {
        let statement = try #require(SQLScript.statements(in: sql, firstLine: 1).first)
        #expect(NonTransactionalStatement.reason(for: statement, serverVersion: 150000) != nil)
    }

    @Test(arguments: [
        "CREATE INDEX a_id ON a (id)",
        "CREATE TABLE concurrently (id int)",
        "COMMENT ON TABLE a IS 'CREATE INDEX CONCURRENTLY later'",
        "ALTER TYPE mood ADD VALUE 'meh'",
        "SAVEPOINT s",
        "ROLLBACK TO SAVEPOINT s",
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; END",
    ])
    func allowedInsideATransaction(sql: String) throws {
        let statement = try #require(SQLScript.statements(in: sql, firstLine: 1).first)
        #expect(NonTransactionalStatement.reason(for: statement, serverVersion: 150000) == nil)
    }

    @Test func alterTypeAddValueIsRefusedBeforePostgres12() throws {
        let statement = try #require(SQLScript.statements(in: "ALTER TYPE mood ADD VALUE 'meh'", firstLine: 1).first)
        #expect(NonTransactionalStatement.reason(for: statement, serverVersion: 110000) != nil)
    }
}
