import Foundation
@testable import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// OpenSSL, libpq's TLS library here, is initialised without its `atexit` cleanup before the first connection
/// (`OpenSSLExit`): a connection thread still ending while the process exits would otherwise run OpenSSL's
/// thread-exit code on a freed lock and crash the exit.
@Suite("OpenSSL without an exit handler")
struct OpenSSLExitTests {
    @Test func theFirstConnectionInitialisesOpenSSLWithoutItsExitHandler() async throws {
        let connection = try await TestServer.connect()
        await connection.close()
        #expect(OpenSSLExit.prepared, "libpq links OpenSSL here (libssl.so.3), so OPENSSL_init_crypto must be found and succeed")
    }
}
