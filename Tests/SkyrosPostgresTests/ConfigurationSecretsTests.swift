import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Every keyword whose name contains `password` (`password`, `sslpassword`) is a secret: masked in `description`
/// and scrubbed from errors.
@Suite("Configuration secrets")
struct ConfigurationSecretsTests {
    @Test func everyPasswordKeywordIsMaskedInTheDescription() throws {
        let fromURL = try PostgresConfiguration(url: "postgres://app:pw-one@db:5432/app?sslpassword=key-pass-two&sslmode=require")
        let fromConninfo = try PostgresConfiguration(
            conninfo: "host=db user=app password='pw one' sslpassword = 'key pass two' dbname=app")
        for config in [fromURL, fromConninfo] {
            let description = config.description
            #expect(!description.contains("one"), "\(description)")
            #expect(!description.contains("two"), "\(description)")
            #expect(description.contains("sslpassword=********"))
            #expect(description.contains("password=********"))
            #expect(description.contains("user=app"))
        }
        #expect(Set(fromURL.secrets) == ["pw-one", "key-pass-two"])
        #expect(Set(fromConninfo.secrets) == ["pw one", "key pass two"])
    }

    /// A message from the server that would contain the `sslpassword` value (here the refusal of a time zone
    /// with the same text) shows `********` instead.
    @Test func anSSLPasswordIsRedactedFromConnectionErrors() async throws {
        var config = try TestServer.configuration
        let secret = "Key-Pass-\(UUID().uuidString.prefix(8))"
        config["sslpassword"] = secret
        config.sessionTimeZone = secret
        let error = await #expect(throws: PostgresError.self) { _ = try await Connection.connect(to: config) }
        #expect(error?.kind == .invalidConfiguration)
        #expect(error.map { "\($0) \($0.debugDescription)".contains(secret) } == false)
        #expect(error?.message.contains("********") == true)
        #expect(!config.description.contains(secret))
    }
}
