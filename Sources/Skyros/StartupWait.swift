import Logging
import SkyrosPostgres
import SkyrosStack

/// How ``DataStack/start(_:logger:)`` waits for PostgreSQL to accept connections: it opens (and closes) one
/// connection until one opens, retrying with backoff while the failure is one that time can fix (the server
/// refuses, does not answer, is starting up, has no free slot), up to a deadline.
///
/// A stack deployed together with its database (docker compose, a Kubernetes pod whose database restarts)
/// often starts first: without this wait it would fail at once, and the orchestrator would restart it in a
/// loop. Authentication failures, a missing database, TLS and configuration errors fail at once: waiting
/// cannot fix them.
struct StartupWait {
    /// How long to keep trying (``DataStackConfiguration/waitForDatabase``); `.zero`: one attempt.
    var deadline: Duration
    /// The pauses between attempts: 250 ms, doubling after each one up to 2 s.
    var retries = RetryPolicy(initialDelay: .milliseconds(250), maximumDelay: .seconds(2))

    /// Returns once a connection to `postgres` opened.
    /// - Throws: ``DataStackError`` `.storeUnreachable` wrapping the last `PGError`: at once for an
    ///   error that waiting cannot fix, or after the deadline (naming it and the number of attempts);
    ///   `CancellationError` when the task is cancelled.
    func waitForDatabase(_ postgres: PGConfiguration, logger: Logger) async throws {
        let clock = ContinuousClock()
        let started = clock.now
        let end = started + self.deadline
        var attempt = 0
        while true {
            attempt += 1
            do {
                try await Self.connectOnce(self.probe(postgres, remaining: end - clock.now), until: self.deadline > .zero ? end : nil, logger: logger)
                if attempt > 1 {
                    logger.info(
                        "PostgreSQL accepts connections",
                        metadata: [LogKey.attempts: "\(attempt)", LogKey.target: "\(DataStack.describe(postgres))"])
                }
                return
            } catch let error as PGError where error.isRetryableConnectFailure {
                // An attempt is abandoned at the deadline (libpq's own timeout is whole seconds, at least 2), and
                // one starts only with at least 100 ms left, so the wait ends at the deadline.
                let remaining = end - clock.now
                let retrying = remaining >= .milliseconds(100)
                let pause = min(self.retries.delay(afterAttempt: attempt), remaining - .milliseconds(100))
                logger.warning(
                    "cannot connect to PostgreSQL yet",
                    metadata: [
                        LogKey.target: "\(DataStack.describe(postgres))",
                        LogKey.attempt: "\(attempt)",
                        LogKey.error: "\(error.message)",
                        LogKey.retryIn: retrying ? "\(pause)" : "no retry: deadline passed",
                    ])
                guard retrying else {
                    throw DataStackError(
                        code: .storeUnreachable,
                        message: "PostgreSQL at \(DataStack.describe(postgres)) did not accept a connection within "
                            + "\(self.deadline) (\(attempt) attempt\(attempt == 1 ? "" : "s"); "
                            + "DataStackConfiguration.waitForDatabase)",
                        underlying: error)
                }
                try await Task.sleep(for: pause, clock: clock)
            } catch let error as CancellationError {
                throw error
            } catch {
                throw DataStackError(
                    code: .storeUnreachable, message: "cannot connect to PostgreSQL at \(DataStack.describe(postgres))",
                    underlying: error)
            }
        }
    }

    /// Opens and closes one connection, giving up at `end` (when set) even if libpq is still connecting: the
    /// attempt then goes on, on its connection's own thread, until its `connect_timeout` (at most 2 s later),
    /// and a connection it still opens is closed at once.
    /// - Throws: the attempt's `PGError`, or a retryable `.connectionFailed` "no answer before the
    ///   deadline" when `end` came first.
    private static func connectOnce(_ probe: PGConfiguration, until end: ContinuousClock.Instant?, logger: Logger) async throws {
        guard let end else {
            await (try await PGConnection.connect(to: probe, logger: logger)).close()
            return
        }
        // The continuation is stored before either task starts, so the first to finish always finds it.
        let first = Locked<CheckedContinuation<Result<Void, any Error>, Never>?>(nil)
        var timer: Task<Void, Never>?
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                first.withLock { $0 = continuation }
                // Runs to its own end; nothing waits for it (see above).
                Task {
                    let result: Result<Void, any Error>
                    do {
                        let connection = try await PGConnection.connect(to: probe, logger: logger)
                        await connection.close()
                        result = .success(())
                    } catch {
                        result = .failure(error)
                    }
                    first.withLock { $0.take() }?.resume(returning: result)
                }
                timer = Task {
                    // Cancelled once the attempt answered: then nothing is resumed here.
                    guard (try? await Task.sleep(until: end, clock: .continuous)) != nil else { return }
                    let timedOut = PGError(
                        kind: .connectionFailed, message: "timeout expired: the start-up deadline came before the server answered")
                    first.withLock { $0.take() }?.resume(returning: .failure(timedOut))
                }
            }
        } onCancel: {
            first.withLock { $0.take() }?.resume(returning: .failure(CancellationError()))
        }
        timer?.cancel()
        try result.get()
    }

    /// `postgres` with its `connect_timeout` cut to what is left of the wait (libpq's at least 2 s), so that
    /// an attempt against a server that never answers ends near the deadline.
    private func probe(_ postgres: PGConfiguration, remaining: Duration) -> PGConfiguration {
        guard remaining > .zero else { return postgres }   // a deadline of zero: one attempt as configured
        var probe = postgres
        let limit = postgres.effectiveConnectTimeout.map { min($0, remaining) } ?? remaining
        probe["connect_timeout"] = String(PGConfiguration.libpqSeconds(limit))
        return probe
    }

    /// Metadata keys of the wait's log records.
    enum LogKey {
        static let target = "skyros.postgres.target"
        static let attempt = "skyros.start.attempt"
        static let attempts = "skyros.start.attempts"
        static let retryIn = "skyros.start.retry_in"
        static let error = "skyros.error"
    }
}
