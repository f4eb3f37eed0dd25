import Skyros
@testable import SkyrosPostgres
import Testing

/// URLs and conninfo strings whose password libpq would split or quote are rejected before libpq parses them,
/// with a message that quotes none of them; well-formed ones parse as before.
@Suite("Connection settings: malformed passwords")
struct MalformedPasswordTests {
    static let rejected: [(input: String, pieces: [String], says: String)] = [
        ("postgres://u:Qx7Sec@ret/Zk9Tail@127.0.0.1:55633/db", ["Qx7Sec", "ret", "Zk9Tail"], "more than one '@'"),
        ("postgres://app:s3cr3t/2024@db:5432/app", ["s3cr3t", "2024"], "more than one '@'"),
        ("postgresql://app:p@zq9@db/app", ["zq9"], "more than one '@'"),
        ("postgres://app:Hunter2 secretpart@db/app", ["Hunter2", "secretpart"], "holds a space"),
        ("postgres://app:Hunter%zz2secret@db/app", ["Hunter", "zz2secret"], "'%' that is not followed"),
        ("postgres://app:Hunter%00x@db/app", ["Hunter"], "'%' that is not followed"),
        ("postgres://app@db/app?password=Hunter%zzsecret", ["Hunter", "zzsecret"], "query parameter password"),
        ("postgres://app@db/app?sslpassword=a=b", ["a=b"], "query parameter sslpassword"),
        ("host=db user=app password=abc def dbname=app", ["abc", "def"], "quote it"),
        ("host=db user=app password=abc xyz=def dbname=app", ["abc", "xyz"], "quote it"),
        ("host=db user=app password=abc def", ["abc", "def"], "quote it"),
    ]

    @Test(arguments: 0..<rejected.count)
    func isRejectedWithoutQuotingIt(_ index: Int) throws {
        let (input, pieces, says) = Self.rejected[index]
        let error = #expect(throws: PGError.self) { try PGConfiguration(conninfo: input) }
        #expect(error?.kind == .invalidConfiguration)
        let text = error.map { "\($0) \(String(reflecting: $0))" } ?? ""
        #expect(text.contains(says), "\(text)")
        for piece in pieces {
            #expect(!text.contains(piece), "\"\(piece)\" shows in \(text)")
        }
        if input.hasPrefix("postgres") {
            #expect(text.contains("'@' as %40, '/' as %2F"), "\(text)")
        }
    }

    @Test func wellFormedSettingsStillParse() throws {
        let encoded = try PGConfiguration(url: "postgres://app:p%40ss%2Fword@db:5432/app")
        #expect(encoded["password"] == "p@ss/word")
        #expect(encoded.host == "db" && encoded.port == 5432 && encoded.database == "app")
        // libpq takes everything from the first ':' to the '@' as the password, ':' included.
        #expect(try PGConfiguration(url: "postgres://app:a:b@db/app")["password"] == "a:b")
        #expect(try PGConfiguration(url: "postgres:///app?host=/var/run/postgresql").host == "/var/run/postgresql")
        #expect(try PGConfiguration(url: "postgres://app@[::1]:5433/app").port == 5433)
        #expect(try PGConfiguration(url: "postgres://app:pw@h1:5432,h2:5433/app?target_session_attrs=read-write").host == "h1,h2")
        #expect(try PGConfiguration(url: "postgres://db/app?application_name=a@b").database == "app")
        let quoted = try PGConfiguration(conninfo: "host=db user=app password='abc def' dbname=app")
        #expect(quoted["password"] == "abc def")
        #expect(try PGConfiguration(conninfo: "host=db password=abc dbname=app").database == "app")
    }

    @Test func onlyPasswordFieldsAreMasked() throws {
        let config = try PGConfiguration(url: "postgres://skyros:skyros@server:5432/skyros?sslpassword=server")
        #expect(config.description.contains("user=skyros"))
        #expect(config.description.contains("host=server"))
        #expect(config.description.contains("dbname=skyros"))
        #expect(config.description.contains("password=********"))
        #expect(config.description.contains("sslpassword=********"))
        // A value equal to a password that libpq parsed whole is quoted as it is.
        let error = #expect(throws: PGError.self) {
            try PGConfiguration(url: "postgres://skyros:skyros@db/skyros?connect_timeout=skyros")
        }
        #expect(error?.message == "invalid connect_timeout \"skyros\": expected an integer")
    }
}

/// The default `connect_timeout`, and how an explicit one wins.
@Suite("Connection settings: connect timeout")
struct ConnectTimeoutTests {
    @Test func theDefaultIsAddedWhenTheURLSetsNone() throws {
        let config = try PGConfiguration(url: "postgres://app@db/app")
        #expect(config.connectTimeout == .seconds(10))
        #expect(config["connect_timeout"] == nil)
        #expect(config.connectOptions.last == .init(keyword: "connect_timeout", value: "10"))
        #expect(config.effectiveConnectTimeout == .seconds(10))
    }

    @Test func anExplicitConnectTimeoutWins() throws {
        var config = try PGConfiguration(url: "postgres://app@db/app?connect_timeout=3")
        config.connectTimeout = .seconds(20)
        #expect(config.connectOptions.filter { $0.keyword == "connect_timeout" }.map(\.value) == ["3"])
        #expect(config.effectiveConnectTimeout == .seconds(3))
        config["connect_timeout"] = "0"
        #expect(config.effectiveConnectTimeout == nil)
        config["connect_timeout"] = "1"
        #expect(config.effectiveConnectTimeout == .seconds(2))
    }

    @Test func noLimitAddsNothing() throws {
        var config = try PGConfiguration(url: "postgres://app@db/app")
        config.connectTimeout = nil
        #expect(!config.connectOptions.contains { $0.keyword == "connect_timeout" })
        #expect(config.effectiveConnectTimeout == nil)
    }

    @Test func durationsRoundUpToLibpqSeconds() {
        #expect(PGConfiguration.libpqSeconds(.seconds(7)) == 7)
        #expect(PGConfiguration.libpqSeconds(.milliseconds(7_001)) == 8)
        #expect(PGConfiguration.libpqSeconds(.milliseconds(1_500)) == 2)
        #expect(PGConfiguration.libpqSeconds(.zero) == 2)
    }

    @Test func theStackConfigurationSetsItOnItsConnections() throws {
        var configuration = DataStackConfiguration(store: .postgres(try PGConfiguration(url: "postgres://app@db/app")))
        configuration.directConnection = try PGConfiguration(url: "postgres://app@direct/app")
        #expect(configuration.connectTimeout == .seconds(10))
        #expect(configuration.waitForDatabase == .seconds(30))
        configuration.connectTimeout = .seconds(4)
        guard case .postgres(let store, _) = configuration.store else { Issue.record("not postgres"); return }
        #expect(store.connectTimeout == .seconds(4))
        #expect(configuration.directConnection?.connectTimeout == .seconds(4))
        #expect(DataStackConfiguration(store: .inMemory).connectTimeout == nil)
    }
}

/// Which failures to open a connection `DataStack.start` retries: the server not there yet, never a
/// configuration or credential error.
@Suite("Connection settings: retryable connect failures")
struct RetryableConnectFailureTests {
    static let retryable = [
        "connection to server at \"127.0.0.1\", port 1 failed: Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?",
        "connection to server at \"127.0.0.1\", port 5432 failed: timeout expired",
        "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  the database system is starting up",
        "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  sorry, too many clients already",
        "connection to server on socket \"/tmp/.s.PGSQL.5432\" failed: No such file or directory",
        "could not translate host name \"db\" to address: Temporary failure in name resolution",
    ]
    static let permanent = [
        "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  password authentication failed for user \"app\"",
        "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  database \"nope\" does not exist",
        "connection to server at \"localhost\", port 5432 failed: SSL error: certificate verify failed",
        "connection to server at \"localhost\", port 5432 failed: could not read root certificate file \"/x\": No such file or directory",
        "invalid sslmode value: \"sometimes\"",
    ]

    @Test func classification() {
        for message in Self.retryable {
            #expect(PGSession.connectError(message).isRetryableConnectFailure, "\(message)")
        }
        for message in Self.permanent {
            #expect(!PGSession.connectError(message).isRetryableConnectFailure, "\(message)")
        }
        #expect(PGSession.connectError(Self.retryable[2]).sqlState == .cannotConnectNow)
        #expect(PGSession.connectError(Self.retryable[3]).sqlState == .tooManyConnections)
        #expect(PGSession.connectError(Self.permanent[0]).kind == .authenticationFailed)
        #expect(PGSession.connectError(Self.permanent[1]).kind == .databaseNotFound)
    }
}
