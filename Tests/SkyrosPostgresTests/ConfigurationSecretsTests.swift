import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Every keyword whose name contains `password` (`password`, `sslpassword`) is a secret: masked in `description`
/// and scrubbed from errors.
@Suite("Configuration secrets")
struct ConfigurationSecretsTests {
    @Test func everyPasswordKeywordIsMaskedInTheDescription() throws {
        let fromURL = try PGConfiguration(url: "postgres://app:pw-one@db:5432/app?sslpassword=key-pass-two&sslmode=require")
        let fromConninfo = try PGConfiguration(
            conninfo: "host=db user=app password='pw one' sslpassword = 'key pass two' dbname=app")
        for config in [fromURL, fromConninfo] {
            let description = config.description
            #expect(!description.contains("one"), "\(description)")
            #expect(!description.contains("two"), "\(description)")
            #expect(description.contains("sslpassword=********"))
            #expect(description.contains("password=********"))
            #expect(description.contains("user=app"))
        }
        #expect(fromURL["password"] == "pw-one")
        #expect(fromConninfo["sslpassword"] == "key pass two")
    }

    /// Only the password fields are masked: a value that happens to equal the password shows as it is.
    @Test func onlyThePasswordFieldsAreMasked() throws {
        let config = try PGConfiguration(url: "postgres://skyros:skyros@db:5432/skyros?application_name=skyros")
        #expect(config.description.contains("user=skyros"), "\(config.description)")
        #expect(config.description.contains("dbname=skyros"), "\(config.description)")
        #expect(config.description.contains("password=********"), "\(config.description)")
    }

    /// Connecting with an `sslpassword` (unused without a client key) works, and no error or description
    /// shows it.
    @Test func anSSLPasswordNeverShows() async throws {
        var config = try TestServer.configuration
        let secret = "Key-Pass-\(UUID().uuidString.prefix(8))"
        config["sslpassword"] = secret
        let connection = try await PGConnection.connect(to: config)
        await connection.close()
        #expect(!config.description.contains(secret))
        #expect(!String(reflecting: config).contains(secret))
    }
}

/// A password that is not percent-encoded makes libpq split the URL (or conninfo) elsewhere than meant, so parts
/// of it end up in another field (port, host, database) or in libpq's parse error. None of it may show in an
/// error, nor in `description`.
@Suite("Configuration secrets: passwords that are not percent-encoded")
struct UnencodedPasswordTests {
    static let cases: [(input: String, fragments: [String])] = [
        ("postgres://app:s3cr3t/2024@db:5432/app", ["s3cr3t", "2024"]),
        ("postgres://app:123/s3cr3t@h:5432/app", ["s3cr3t", "123"]),
        ("postgres://app:p@zq9@127.0.0.1:1/app", ["zq9"]),
        ("host=127.0.0.1 port=1 user=app password=abc def dbname=app", ["abc", "def"]),
        ("host=127.0.0.1 port=1 user=app password=abc xyz=def dbname=app", ["abc", "xyz", "def"]),
        ("postgres://u:Qx7Sec@ret/Zk9Tail@127.0.0.1:55633/db", ["Qx7Sec", "ret", "Zk9Tail"]),
        // libpq's URL decoder quotes a component with a bad escape or a space whole.
        ("postgres://app:Hunter%zz2secret@127.0.0.1:1/app", ["Hunter", "zz2secret"]),
        ("postgres://app:Hunter2 secretpart@127.0.0.1:1/app", ["Hunter2", "secretpart"]),
        ("postgres://app@127.0.0.1:1/app?password=Hunter%zzsecret", ["Hunter", "zzsecret"]),
        ("postgres://app@127.0.0.1:1/app?sslpassword=Hunter secret", ["Hunter", "secret"]),
    ]

    @Test(.timeLimit(.minutes(1)), arguments: 0..<cases.count)
    func noFragmentOfThePasswordShows(_ index: Int) async throws {
        let (input, fragments) = Self.cases[index]
        var shown: [String] = []
        do {
            let config = try PGConfiguration(conninfo: input)
            shown.append(config.description)
            shown.append(String(reflecting: config))
            do {
                var quick = config
                quick["connect_timeout"] = "2"
                let connection = try await PGConnection.connect(to: quick)
                await connection.close()
            } catch {
                shown += ["\(error)", String(reflecting: error)]
            }
        } catch {
            shown += ["\(error)", String(reflecting: error)]
        }
        for text in shown {
            for fragment in fragments {
                #expect(!text.contains(fragment), "\(input): \"\(fragment)\" shows in \(text)")
            }
        }
    }

    /// A password libpq parsed whole (here one with an unencoded `:`) adds no pieces: nothing else is redacted.
    @Test func aPasswordParsedWholeRedactsNothingElse() throws {
        for url in ["postgres://app:a:b%2F@db:5432/app", "postgres://app:a:b@db:5432/app?sslpassword=k%2F"] {
            let config = try PGConfiguration(url: url)
            #expect(config.description.contains("application_name=skyros"), "\(config.description)")
            #expect(config.description.contains("host=db"), "\(config.description)")
            #expect(config.description.contains("dbname=app"), "\(config.description)")
        }
    }

    @Test func aPercentEncodedPasswordStillWorks() async throws {
        let config = try PGConfiguration(url: "postgres://app:s3cr3t%2F2024%40x@db:5432/app")
        #expect(config["password"] == "s3cr3t/2024@x")
        #expect(config.host == "db")
        #expect(config.port == 5432)
        #expect(config.database == "app")
        #expect(config.description.contains("host=db"))
        #expect(config.description.contains("dbname=app"))
        #expect(!config.description.contains("s3cr3t"))
        // And connecting with a percent-encoded URL to the test server still works.
        let connection = try await PGConnection.connect(to: TestServer.configuration)
        await connection.close()
    }
}

/// What libpq and the server say about a failed connection never holds the password, so their messages are kept
/// whole: only the password fields of a configuration are masked, never a word that happens to equal it.
@Suite("Configuration secrets: messages are not scrubbed")
struct UnscrubbedMessageTests {
    /// `TestServer.configuration` with another user and password (the server rejects them the same way whether
    /// or not the role exists).
    static func configuration(user: String, password: String) throws -> PGConfiguration {
        var config = try TestServer.configuration
        config["user"] = user
        config["password"] = password
        return config
    }

    @Test func aWrongPasswordEqualToTheUserNameLeavesTheUserNamed() async throws {
        let config = try Self.configuration(user: "skyros", password: "skyros")
        let error = await #expect(throws: PGError.self) { _ = try await PGConnection.connect(to: config) }
        let text = error.map { "\($0) \(String(reflecting: $0))" } ?? ""
        #expect(error?.kind == .authenticationFailed, "\(text)")
        #expect(text.contains("for user \"skyros\""), "\(text)")
        #expect(!text.contains("********"), "\(text)")
        #expect(!text.contains("password=skyros") && !text.contains(":skyros@"), "\(text)")
    }

    @Test func aPasswordThatIsACommonWordLeavesTheWordElsewhere() async throws {
        let config = try Self.configuration(user: "skyros_nobody", password: "server")
        let error = await #expect(throws: PGError.self) { _ = try await PGConnection.connect(to: config) }
        let text = error.map { "\($0) \(String(reflecting: $0))" } ?? ""
        #expect(error?.kind == .authenticationFailed, "\(text)")
        #expect(text.contains("connection to server at"), "\(text)")
        #expect(!text.contains("********"), "\(text)")
        #expect(config.description.contains("password=********"))
    }
}
