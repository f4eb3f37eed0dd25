import Foundation
import Glibc
import Logging
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// `DataStack.start` waits for PostgreSQL: it retries while the server refuses or does not answer, logs each
/// failed attempt at `warning`, and after ``DataStackConfiguration/waitForDatabase`` throws one clear error.
@Suite("Start-up wait (run alone: it times its deadline)", .timeLimit(.minutes(2)))
struct StartupWaitIsolatedTests {
    /// A logger recording every level.
    static func recordingLogger() -> (Logger, RecordingLogHandler) { RecordingLogHandler.logger() }

    @Test("A server that accepts TCP and never answers: start fails after waitForDatabase, one warning per attempt")
    func silentServerFailsAfterTheDeadline() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let password = "Pw-\(UUID().uuidString.prefix(8))"
        var postgres = try PGConfiguration(url: "postgres://skyros:\(password)@127.0.0.1:\(listener.port)/app")
        postgres.connectTimeout = .seconds(2)
        var configuration = DataStackConfiguration(store: .postgres(postgres))
        configuration.waitForDatabase = .seconds(6)
        let (logger, handler) = Self.recordingLogger()

        let clock = ContinuousClock()
        let started = clock.now
        let error = await thrownError { _ = try await DataStack.start(configuration, logger: logger) }
        let elapsed = clock.now - started

        #expect(elapsed >= .milliseconds(4_800) && elapsed <= .milliseconds(7_200), "took \(elapsed)")
        let stackError = try #require(error as? DataStackError)
        #expect(stackError.code == .storeUnreachable)
        #expect(stackError.message.contains("did not accept a connection within 6.0 seconds"), "\(stackError)")
        #expect(stackError.message.contains("127.0.0.1:\(listener.port)/app"), "\(stackError)")
        let underlying = try #require(stackError.underlying as? PGError)
        #expect(underlying.message.contains("timeout expired"), "\(underlying)")

        let warnings = handler.entries.filter { $0.level == .warning }
        // 2 s per attempt, a short backoff between them: three attempts in 6 s, two when a loaded machine
        // (the suite runs in parallel) stretches an attempt; one warning for each, numbered in order.
        #expect((2...3).contains(warnings.count), "\(warnings.map(\.text))")
        #expect(warnings.allSatisfy { $0.metadata["skyros.error"]?.description.contains("timeout expired") == true })
        #expect(warnings.map { $0.metadata["skyros.start.attempt"]?.description } == (1...warnings.count).map { String($0) })
        for text in handler.entries.map(\.text) + ["\(stackError)", String(reflecting: stackError)] {
            #expect(!text.contains(password), "\(text)")
        }
    }

    @Test("waitForDatabase .zero: one attempt, one warning, then the refusal as the error")
    func zeroDeadlineMakesOneAttempt() async throws {
        let port = try SilentListener.unusedPort()
        var configuration = DataStackConfiguration(store: .postgres(try PGConfiguration(url: "postgres://skyros:pw@127.0.0.1:\(port)/app")))
        configuration.waitForDatabase = .zero
        let (logger, handler) = Self.recordingLogger()
        let error = await thrownError { _ = try await DataStack.start(configuration, logger: logger) }
        let stackError = try #require(error as? DataStackError)
        #expect(stackError.code == .storeUnreachable)
        #expect((stackError.underlying as? PGError)?.message.contains("Connection refused") == true, "\(stackError)")
        #expect(handler.entries.filter { $0.level == .warning }.count == 1)
    }

    @Test("A wrong password fails start at once, without waiting")
    func authenticationFailureIsNotRetried() async throws {
        var postgres = try TestServer.configuration
        postgres["password"] = "not-the-password-\(UUID().uuidString.prefix(6))"
        var configuration = DataStackConfiguration(store: .postgres(postgres))
        configuration.waitForDatabase = .seconds(30)
        let (logger, handler) = Self.recordingLogger()
        let clock = ContinuousClock()
        let started = clock.now
        let error = await thrownError { _ = try await DataStack.start(configuration, logger: logger) }
        #expect(clock.now - started < .seconds(5))
        let stackError = try #require(error as? DataStackError)
        #expect(stackError.code == .storeUnreachable)
        #expect((stackError.underlying as? PGError)?.kind == .authenticationFailed, "\(stackError)")
        #expect(handler.entries.filter { $0.level == .warning }.isEmpty)
    }

    @Test(
        "A server started seconds after start was called: start waits and succeeds",
        .enabled(if: PostgresFixture.isAvailable, "starts its own server: run through scripts/test"))
    func serverStartedLaterIsWaitedFor() async throws {
        let fixture = try await PostgresFixture.start("stopped")
        try await withCleanup {
            var configuration = DataStackConfiguration(store: .postgres(try fixture.configuration("URL")))
            configuration.waitForDatabase = .seconds(60)
            let (logger, handler) = Self.recordingLogger()
            let clock = ContinuousClock()
            let called = clock.now
            async let starting = DataStack.start(configuration, logger: logger)
            // Start is trying (and failing: nothing listens yet) before the server exists.
            await expectEventually(within: .seconds(10)) { handler.entries.contains { $0.level == .warning } }
            // The deliberate delay: the server comes up ~4 s after start was called.
            try await Task.sleep(until: called + .seconds(4), clock: clock)
            try await fixture.run("start")
            let stack = try await starting
            let elapsed = clock.now - called
            await stack.shutdown()

            #expect(elapsed >= .seconds(4), "took \(elapsed)")
            let warnings = handler.entries.filter { $0.level == .warning }
            #expect(warnings.count >= 2, "\(warnings.map(\.text))")
            #expect(warnings.allSatisfy {
                let reason = $0.metadata["skyros.error"]?.description ?? ""
                return reason.contains("Connection refused") || reason.contains("the database system is starting up")
            }, "\(warnings.map(\.text))")
            #expect(handler.entries.contains { $0.level == .info && $0.message.description == "PostgreSQL accepts connections" })
        } cleanup: {
            await fixture.stop()
        }
    }

    @Test("A URL whose password holds an unencoded '@' and '/': a clear error, no piece of the password anywhere")
    func malformedURLLeaksNoPieceOfThePassword() async throws {
        let url = "postgres://u:Qx7Sec@ret/Zk9Tail@127.0.0.1:55633/db"
        let (logger, handler) = Self.recordingLogger()
        let error = await thrownError {
            _ = try await DataStack.start(DataStackConfiguration(store: .postgres(try PGConfiguration(url: url))), logger: logger)
        }
        let postgresError = try #require(error as? PGError)
        #expect(postgresError.kind == .invalidConfiguration)
        #expect(postgresError.message.contains("malformed PostgreSQL URL"))
        #expect(postgresError.message.contains("'@' as %40, '/' as %2F"))
        for text in handler.entries.map(\.text) + ["\(postgresError)", String(reflecting: postgresError)] {
            for piece in ["Qx7Sec", "ret", "Zk9Tail"] {
                #expect(!text.contains(piece), "\"\(piece)\" shows in \(text)")
            }
        }
    }
}

/// A TCP socket on 127.0.0.1 that listens and never accepts nor answers: the kernel completes each client's
/// handshake (the listen backlog), so a client connects and then waits for a reply that never comes.
struct SilentListener {
    let descriptor: Int32
    let port: Int

    init() throws {
        self.descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard self.descriptor >= 0 else { throw PGError(kind: .connectionFailed, message: "socket() failed") }
        self.port = try Self.bindLoopback(self.descriptor)
        guard listen(self.descriptor, 64) == 0 else {
            Glibc.close(self.descriptor)
            throw PGError(kind: .connectionFailed, message: "listen() failed")
        }
    }

    func close() { Glibc.close(self.descriptor) }

    /// A port on 127.0.0.1 where nothing listens (bound, then released): connecting to it is refused.
    static func unusedPort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { Glibc.close(descriptor) }
        return try self.bindLoopback(descriptor)
    }

    /// Binds `descriptor` to 127.0.0.1 on a port the kernel picks, and returns that port.
    private static func bindLoopback(_ descriptor: Int32) throws -> Int {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(descriptor, socketAddress, length) == 0 && getsockname(descriptor, socketAddress, &length) == 0
            }
        }
        guard bound else { throw PGError(kind: .connectionFailed, message: "bind() failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
