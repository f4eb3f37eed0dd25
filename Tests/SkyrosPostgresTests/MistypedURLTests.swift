import Foundation
import Logging
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Every piece of `secret` at least 4 characters long: a text holding none of them holds no useful part of it.
fileprivate func pieces(of secret: String) -> [String] {
    let characters = Array(secret)
    guard characters.count >= 4 else { return [secret] }
    return (0...(characters.count - 4)).map { String(characters[$0..<($0 + 4)]) }
}

/// A mistyped URL or conninfo string is text libpq cannot parse, and libpq's parse errors quote that text,
/// password included (`missing "=" after "postgres//u:Sup3rS3cret@…"`). Skyros checks libpq's grammar first and
/// says where the string went wrong and what was expected, quoting nothing of it.
@Suite("Mistyped URLs and conninfo strings")
struct MistypedURLTests {
    /// A mistyped string, its password, and what the error must say (`nil`: libpq parses it, so connecting to
    /// the unreachable 127.0.0.1:1 is what fails).
    static let cases: [(input: String, password: String, says: String?)] = [
        // The scheme.
        ("postgres//u:Sup3rS3cret@host/db", "Sup3rS3cret", "at character 9: expected the URL to begin with"),
        ("postgres:/u:Hx7Wq2Lm9@host/db", "Hx7Wq2Lm9", "at character 11: expected the URL to begin with"),
        ("postgresql:/u:Kd4Rt8Pz1@host/db", "Kd4Rt8Pz1", "at character 13: expected the URL to begin with"),
        ("postgresql//u:Mn3Vb6Qa2@host/db", "Mn3Vb6Qa2", "at character 11"),
        ("postgres:u:Rw2Ty4Ux6@host/db", "Rw2Ty4Ux6", "at character 10"),
        ("postgress://u:Gf2Hj4Kl6@host/db", "Gf2Hj4Kl6", "at character 9"),
        ("Postgres://u:Pq8Zx1Cv3@host/db", "Pq8Zx1Cv3", "at character 1: expected the URL to begin with postgresql:// or postgres://, in lower case"),
        (" postgres://u:Ty5Ui9Op1@host/db", "Ty5Ui9Op1", "at character 1: expected the URL to begin with postgresql:// or postgres://, with nothing before it"),
        ("u:Lk7Mn2Bv4@host/db", "Lk7Mn2Bv4", "at character 1"),
        ("mysql://u:Mm1Nn3Bb5@host/db", "Mm1Nn3Bb5", "at character 1"),
        // The user information.
        ("postgres://u:Zx9%zzWv3@127.0.0.1:1/db", "Zx9%zzWv3", "at character 12: the user name or password that starts here holds a '%'"),
        ("postgres://u:Cv3Bn5 Hj7@127.0.0.1:1/db", "Cv3Bn5 Hj7", "at character 12: the user name or password that starts here holds a space"),
        ("postgres:// u:Fg4Hk6Lz8@127.0.0.1:1/db", "Fg4Hk6Lz8", "at character 12: the user name or password that starts here holds a space"),
        ("postgres://u:Lf1Sx@Ry9Zq@127.0.0.1:1/db", "Lf1Sx@Ry9Zq", "at character 12: more than one '@'"),
        ("postgres://u:Wq8Sx=Rt3Zy@127.0.0.1:1/db", "Wq8Sx=Rt3Zy", nil),  // '=' needs no escape there
        ("postgres://u:Qw1Er3Ty5@127.0.0.1:1/db ", "Qw1Er3Ty5", nil),  // libpq takes "db " as the database
        // Hosts and ports.
        ("postgres://u:Vb6Nm8Df0@[::1/db", "Vb6Nm8Df0", "at character 24: expected a ']' to close the IPv6 address"),
        ("postgres://u:Yu2Io4Pa6@[]/db", "Yu2Io4Pa6", "at character 25: expected an IPv6 address"),
        ("postgres://u:Ju2Ki4Lo6@[::1]x/db", "Ju2Ki4Lo6", "at character 29: expected ':', '/', '?' or ','"),
        ("postgres://u:Rt5Yu7Ws9@127.0.0.1:54x2/db", "Rt5Yu7Ws9", "at character 34: expected a port number from 1 to 65535"),
        ("postgres://u:Jd2Kf4Gh6/db", "Jd2Kf4Gh6", "at character 14: expected a port number from 1 to 65535 (a password goes before the host"),
        ("postgres://u:Ff5Gg7Hh9@127.0.0.1:1/d%zzb", "Ff5Gg7Hh9", "at character 37: expected two hexadecimal digits"),
        // Query parameters.
        ("postgres://u:Hh3Jj5Kk7@127.0.0.1:1/db?sslmode", "Hh3Jj5Kk7", "at character 39: expected a keyword=value query parameter"),
        ("postgres://u:Ss2Dd4Ff6@127.0.0.1:1/db?sslmode=require=x", "Ss2Dd4Ff6", "at character 54: expected '&' or the end"),
        ("postgres://u@127.0.0.1:1/db?password=Nb4Sx=Rq6Mm", "Nb4Sx=Rq6Mm", "at character 38: the value of query parameter password that starts here holds a space, a '='"),
        ("postgres://u@127.0.0.1:1/db?passwd=Pp9Oo7Ii5", "Pp9Oo7Ii5", "at character 29: expected a query parameter that libpq knows"),
        // Keyword conninfo.
        ("host=127.0.0.1 port=1 user=u password='As4Df6Gh8 dbname=db", "As4Df6Gh8", "at character 39: the quoted value that starts here has no closing quote"),
        ("host=127.0.0.1 port=1 user=u password=Gh7Jk9Lz1' dbname=db", "Gh7Jk9Lz1", nil),  // a quote inside a value is the value's
        ("host=127.0.0.1 port=1 user=u password=Xc5Vb7 Rq7Vb dbname=db", "Xc5Vb7 Rq7Vb", "at character 39: the unquoted value of password that starts here is followed by words"),
        ("host=127.0.0.1 port=1 user=u passwd=Ee6Rr8Tt0", "Ee6Rr8Tt0", "at character 30: expected a keyword that libpq knows"),
        ("host=127.0.0.1 port=1 user=u password Tt4Yy6Uu8", "Tt4Yy6Uu8", "at character 39: expected '=' after the keyword at character 30"),
        ("host=127.0.0.1 port=1 user=u =Aa1Ss3Dd5", "Aa1Ss3Dd5", "at character 30: expected a keyword before '='"),
    ]

    @Test(.timeLimit(.minutes(1)), arguments: 0..<cases.count)
    func noPieceOfThePasswordShows(_ index: Int) async throws {
        let (input, password, says) = Self.cases[index]
        let (logger, handler) = RecordingLogHandler.logger()
        var shown: [String] = []
        do {
            var config = try PGConfiguration(url: input)
            #expect(says == nil, "\(input) parsed: \(config)")
            shown += [config.description, String(reflecting: config)]
            config["connect_timeout"] = "2"
            do {
                let connection = try await PGConnection.connect(to: config, logger: logger)
                await connection.close()
                Issue.record("\(input): connected")
            } catch {
                shown += ["\(error)", String(reflecting: error), (error as? PGError)?.message ?? ""]
            }
        } catch let error as PGError {
            #expect(error.kind == .invalidConfiguration)
            #expect(says.map { error.message.contains($0) } ?? false, "\(input): \(error.message)")
            let position = try #require(error.position, "\(input): \(error.message)")
            #expect(error.message.contains("at character \(position):"), "\(error.message)")
            shown += [error.message, "\(error)", String(reflecting: error)]
        }
        shown += handler.entries.map(\.text)
        for text in shown {
            for piece in pieces(of: password) {
                #expect(!text.contains(piece), "\(input): \"\(piece)\" shows in \(text)")
            }
        }
    }

    /// The grammar check takes what libpq takes: these parse as before.
    @Test func wellFormedStringsStillParse() throws {
        let valid = [
            "postgresql://", "postgres://", "postgres:///db", "postgres://h", "postgres://u@h", "postgres://@h/db",
            "postgres://u:p@h:5432/db", "postgres://:5432/db", "postgres://h1:5432,h2:5433/db?target_session_attrs=any",
            "postgres://h1,h2,/db", "postgres://[::1]:5432/db", "postgres://u@[fe80::1%25eth0]/db", "postgres://[::1],h:1/db",
            "postgres://h/db?sslmode=require&", "postgres://h/db?ssl=true", "postgres://h/db?application_name=a%20b",
            "postgres://h/db?", "postgres://h/d%C3%A9", "postgres://u:a%3Ab@h/db", "postgres://u:pa?ss@h/db",
            "postgres://h/db?options=-c%20search_path%3Dx",
            "", "   ", "host=h", " host = h  dbname = 'd b' ", "host=h password=a\\ b", "host=h password='it\\'s'",
            "host=h options='-c search_path=x'", "dbname=postgresql://h/db", "host=h\tport=5432\ndbname=d",
            "host='' dbname=d", "host=h password=a=b",
        ]
        for text in valid {
            #expect(throws: Never.self, "\(text)") { _ = try PGConfiguration(conninfo: text) }
        }
        #expect(try PGConfiguration(conninfo: "host=h password=a\\ b")["password"] == "a b")
        #expect(try PGConfiguration(conninfo: "host=h password='it\\'s'")["password"] == "it's")
        #expect(try PGConfiguration(url: "postgres://u:pa?ss@h/db")["password"] == "pa?ss")
        #expect(try PGConfiguration(url: "postgres://h/db?ssl=true")["sslmode"] == "require")
        #expect(try PGConfiguration(url: "postgres://h/d%C3%A9").database == "dé")
        #expect(try PGConfiguration(url: "postgres://[::1],h:1/db").host == "::1,h")
    }

    /// The issue's URL, through the three doors: the message, `description` and `String(reflecting:)`.
    @Test func theIssuesURLNamesThePositionOnly() throws {
        let error = #expect(throws: PGError.self) { try PGConfiguration(url: "postgres//u:Sup3rS3cret@host/db") }
        #expect(error?.kind == .invalidConfiguration)
        #expect(error?.position == 9)
        #expect(
            error?.message
                == "malformed PostgreSQL URL at character 9: expected the URL to begin with postgresql:// or postgres://")
        #expect(error.map { "\($0)" } == "PGError.invalidConfiguration: \(error?.message ?? "")")
    }
}

/// The server's `DETAIL` quotes the values of a row (`Key (email)=(…) already exists.`): descriptions and logs
/// show it with the values redacted, and `detail` keeps the server's text for code that needs it.
@Suite("Server DETAIL redaction")
struct ServerDetailRedactionTests {
    @Test func knownShapesKeepTheirWordsAndLoseTheirValues() {
        let cases: [(state: String, detail: String, shown: String)] = [
            ("23505", "Key (email)=(ann@example.com) already exists.", "Key (email)=(<redacted>) already exists."),
            ("23505", "Key (lower(email))=(ann) is duplicated.", "Key (lower(email))=(<redacted>) is duplicated."),
            ("23505", "Key (a, b)=(1, x) already exists) already exists.", "Key (a, b)=(<redacted>) already exists."),
            (
                "23503", "Key (user_id)=(42) is not present in table \"users\".",
                "Key (user_id)=(<redacted>) is not present in table \"users\"."
            ),
            (
                "23503", "Key (id)=(7) is still referenced from table \"orders\".",
                "Key (id)=(<redacted>) is still referenced from table \"orders\"."
            ),
            (
                "23P01",
                "Key (room, during)=(1, [2024-01-01,2024-01-02)) conflicts with existing key (room, during)=(1, [2024-01-01,2024-01-03)).",
                "Key (room, during)=(<redacted>) conflicts with existing key (room, during)=(<redacted>)."
            ),
            ("23505", "Key (email)=(ann) was odd.", "Key (email)=(<redacted>) <redacted>"),
            ("23502", "Failing row contains (1, null, ann).", "Failing row contains (<redacted>)."),
            ("23514", "Failing row contains (1, ann, 2024-01-01).", "Failing row contains (<redacted>)."),
            (
                "23514", "Partition key of the failing row contains (region) = (eu).",
                "Partition key of the failing row contains (region) = (<redacted>)."
            ),
            ("22P02", "Token \"ann\" is invalid.", "Token \"<redacted>\" is invalid."),
            ("23503", "Key is not present in table \"users\".", "Key is not present in table \"users\"."),
            // A translated server (lc_messages): no shape matches, so the whole detail goes.
            ("23505", "Schlüssel »(email)=(ann@example.com)« existiert bereits.", "<redacted>"),
            // PL/pgSQL's RAISE … USING DETAIL: whatever the function put there.
            ("P0001", "customer ann@example.com is blocked", "<redacted>"),
            ("XX000", "ann", "<redacted>"),
            // Classes whose details name objects, not values: as they are.
            ("2BP01", "view v depends on table t", "view v depends on table t"),
            (
                "40P01", "Process 1 waits for ShareLock on transaction 2; blocked by process 3.",
                "Process 1 waits for ShareLock on transaction 2; blocked by process 3."
            ),
            ("55006", "There is 1 other session using the database.", "There is 1 other session using the database."),
        ]
        for (state, detail, shown) in cases {
            let error = PGError(kind: .server, sqlState: SQLState(state), message: "m", detail: detail)
            #expect(error.redactedDetail == shown, "\(state) \(detail)")
            #expect(error.detail == detail)
            #expect(String(reflecting: error).contains("detail: \(shown)"), "\(String(reflecting: error))")
        }
        #expect(PGError(kind: .server, message: "m").redactedDetail == nil)
    }

    /// Against the server: unique, NOT NULL, CHECK, foreign-key and JSON errors. The distinctive values show in
    /// `detail` and nowhere else: not in the message, `description`, `String(reflecting:)`, nor in any log line.
    @Test(.timeLimit(.minutes(1)))
    func constraintViolationsShowNoRowValue() async throws {
        let marker = "Qz9v\(UUID().uuidString.prefix(6))"
        let email = "\(marker)@example.com"
        let missingUser = 7_351_973
        let (logger, handler) = RecordingLogHandler.logger()
        try await TestServer.withSchema("detail") { schema in
            try await TestServer.withConnection { setup in
                _ = try await setup.execute(script: """
                    CREATE TABLE \(quoteIdentifier(schema)).users (
                        id int PRIMARY KEY, email text UNIQUE, note text NOT NULL CHECK (length(note) < 5));
                    CREATE TABLE \(quoteIdentifier(schema)).orders (id int PRIMARY KEY, user_id int REFERENCES \(quoteIdentifier(schema)).users);
                    """)
            }
            let connection = try await PGConnection.connect(to: TestServer.configuration, logger: logger)
            try await withCleanup {
                let users = [schema, "users"]
                try await connection.query("INSERT INTO \(qualified: users) VALUES (1, \(email), 'ok')")
                var errors: [(PGError?, SQLState, String)] = []
                errors.append((await #expect(throws: PGError.self) {
                    try await connection.query("INSERT INTO \(qualified: users) VALUES (2, \(email), 'ok')")
                }, .uniqueViolation, "Key (email)=(<redacted>) already exists."))
                errors.append((await #expect(throws: PGError.self) {
                    try await connection.query("INSERT INTO \(qualified: users) VALUES (3, \(marker), NULL)")
                }, SQLState("23502"), "Failing row contains (<redacted>)."))
                errors.append((await #expect(throws: PGError.self) {
                    try await connection.query("INSERT INTO \(qualified: users) VALUES (4, 'x', \(marker))")
                }, SQLState("23514"), "Failing row contains (<redacted>)."))
                errors.append((await #expect(throws: PGError.self) {
                    try await connection.query("INSERT INTO \(qualified: [schema, "orders"]) VALUES (1, \(missingUser))")
                }, SQLState("23503"), "Key (user_id)=(<redacted>) is not present in table \"users\"."))
                errors.append((await #expect(throws: PGError.self) {
                    try await connection.query("SELECT \(marker)::jsonb")
                }, SQLState("22P02"), "Token \"<redacted>\" is invalid."))
                for (error, state, shown) in errors {
                    let error = try #require(error)
                    #expect(error.sqlState == state)
                    #expect(error.redactedDetail == shown, "\(error.detail ?? "")")
                    // The caller still has the server's detail in code.
                    let value = state == SQLState("23503") ? "\(missingUser)" : marker
                    #expect(error.detail?.contains(value) == true, "\(error.detail ?? "")")
                    for text in [error.message, "\(error)", String(reflecting: error)] {
                        #expect(!text.contains(marker) && !text.contains("\(missingUser)"), "\(text)")
                    }
                }
            } cleanup: {
                await connection.close()
            }
        }
        #expect(!handler.entries.isEmpty)
        for text in handler.entries.map(\.text) {
            #expect(!text.contains(marker) && !text.contains("\(missingUser)"), "\(text)")
        }
    }
}
