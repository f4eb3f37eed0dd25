import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Runs `body`, failing the test (instead of hanging it) when it does not finish within `deadline`: `nil` then.
/// The body runs in an unstructured task, so a call that never returns is left behind instead of awaited.
func withinDeadline<R: Sendable>(
    _ what: String, deadline: Duration = .seconds(10), _ body: @escaping @Sendable () async throws -> R
) async throws -> R? {
    let outcome = Locked<Result<R, any Error>?>(nil)
    let task = Task {
        let result: Result<R, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        outcome.withLock { $0 = result }
    }
    _ = task
    guard await eventually(within: deadline, every: .milliseconds(5), { outcome.withLock { $0 != nil } }) else {
        Issue.record("\(what) did not finish within \(deadline)")
        return nil
    }
    return try outcome.withLock { $0! }.get()
}

/// After `close()` the connection's thread is gone; every later call must still run (and throw
/// `.connectionClosed`, or report closed) instead of waiting for a thread that will never take it.
@Suite("Connection: calls after close")
struct ClosedConnectionTests {
    @Test(.timeLimit(.minutes(1))) func callsAfterCloseThrowConnectionClosedInsteadOfHanging() async throws {
        let connection = try await TestServer.connect()
        await connection.close()
        // Until the connection's thread has found its queue empty and exited (asked without a job on it).
        await expectEventually { connection.threadHasExited }
        for round in 0..<3 {
            #expect(try await withinDeadline("isClosed (\(round))") { await connection.isClosed } == true)
            let query = try await withinDeadline("query (\(round))") { () -> PGError? in
                do {
                    _ = try await connection.query("SELECT \(1)")
                    return nil
                } catch let error as PGError { return error }
            }
            #expect(query??.kind == .connectionClosed)
            let script = try await withinDeadline("execute (\(round))") { () -> PGError? in
                do {
                    _ = try await connection.execute(script: "SELECT 1")
                    return nil
                } catch let error as PGError { return error }
            }
            #expect(script??.kind == .connectionClosed)
            let pipeline = try await withinDeadline("pipeline (\(round))") { () -> PGError? in
                do {
                    _ = try await connection.pipeline(["SELECT \(1)"])
                    return nil
                } catch let error as PGError { return error }
            }
            #expect(pipeline??.kind == .connectionClosed)
            #expect(try await withinDeadline("isHealthy (\(round))") { await connection.isHealthy() } == false)
            #expect(try await withinDeadline("close again (\(round))") { await connection.close() } != nil)
        }
    }
}
