import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// `PGQuery.append` renumbers the appended query's `$n` parameters, and only where PostgreSQL reads a
/// parameter: never inside strings, quoted identifiers, comments or dollar quotes.
@Suite("PGQuery.append renumbers parameters")
struct PostgresQueryTests {
    /// `sql` appended to a query that already has one parameter.
    func appended(_ sql: String) -> String {
        var query = PGQuery(unsafeSQL: "SELECT $1", binds: [.null])
        query.append(PGQuery(unsafeSQL: sql, binds: [.null, .null]))
        return String(query.sql.dropFirst("SELECT $1".count))
    }

    @Test func lineComments() {
        #expect(appended(" y = $1 -- don't\n AND z = $2") == " y = $2 -- don't\n AND z = $3")
        #expect(appended(" -- $1\r$1") == " -- $1\r$2")
        #expect(appended(" $1 -- $2 at the end") == " $2 -- $2 at the end")
        #expect(appended(" 5 - -$1") == " 5 - -$2", "a lone minus is an operator")
    }

    @Test func nestedBlockComments() {
        #expect(appended(" /* don't $1 /* nested $2 */ still ' $1 */ $1, $2") == " /* don't $1 /* nested $2 */ still ' $1 */ $2, $3")
        #expect(appended(" $1 / $2 * $1") == " $2 / $3 * $2", "division and multiplication are not comments")
        #expect(appended(" /* unterminated $1") == " /* unterminated $1")
    }

    @Test func stringsAndQuotedIdentifiers() {
        #expect(appended(" 'it''s $1' = $1") == " 'it''s $1' = $2")
        #expect(appended(" \"a\"\"$1\" = $2") == " \"a\"\"$1\" = $3")
        #expect(appended(" E'it\\'s $1' = $1") == " E'it\\'s $1' = $2")
        #expect(appended(" e'\\\\' = $1, '$2'") == " e'\\\\' = $2, '$2'", "an escaped backslash ends before the quote")
        #expect(appended(" '\\' = $1") == " '\\' = $2", "in a standard string a backslash is a character")
        #expect(appended(" U&'\\0041 $1' = $1, B'01' = $2, X'ff' = $2") == " U&'\\0041 $1' = $2, B'01' = $3, X'ff' = $3")
        #expect(appended(" name'$1' = $1") == " name'$1' = $2", "an identifier ending in E is not an escape-string prefix")
        #expect(appended(" '名前 $1' = $1 AND \"列\" = $2") == " '名前 $1' = $2 AND \"列\" = $3")
    }

    @Test func dollarQuotes() {
        #expect(appended(" $$ it's $1 $$ || $1") == " $$ it's $1 $$ || $2")
        #expect(appended(" $fn$ $1 $$ $x$ $fn$ = $2") == " $fn$ $1 $$ $x$ $fn$ = $3")
        #expect(appended(" $a$ $b$ $1 $a$, $1") == " $a$ $b$ $1 $a$, $2")
        #expect(appended(" $1$tag$ $2 $tag$") == " $2$tag$ $2 $tag$", "$1 is a parameter, then $tag$ opens a quote")
        #expect(appended(" $_1$ $1 $_1$ $2") == " $_1$ $1 $_1$ $3")
        #expect(appended(" $$ unterminated $1") == " $$ unterminated $1")
        #expect(appended(" a$1 = $1, $12") == " a$1 = $2, $13", "a$1 is one identifier")
    }

    /// The reviewer's case on the server: before, `z` silently got `y`'s value.
    @Test func appendedQueriesBindTheRightValues() async throws {
        try await TestServer.withConnection { connection in
            var query: PGQuery = "SELECT \(10)::int8 AS x"
            query.append(", \(20)::int8 AS y -- don't\n, \(30)::int8 AS z")
            query.append(", $q$ it's $1 $q$ AS quoted /* $2 ' */, E'\\'' || \(40)::int8 AS w")
            #expect(query.binds.count == 4)
            let row = try await connection.query(query)[0]
            #expect(try row.decode(Int.self, column: "x") == 10)
            #expect(try row.decode(Int.self, column: "y") == 20)
            #expect(try row.decode(Int.self, column: "z") == 30)
            #expect(try row.decode(String.self, column: "quoted") == " it's $1 ")
            #expect(try row.decode(String.self, column: "w") == "'40")
        }
    }
}
