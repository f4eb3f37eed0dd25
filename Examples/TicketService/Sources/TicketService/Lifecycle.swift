import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Skyros
import Synchronization
import UnixSignals

/// Where the service is in its life, as `/health` reports it and as routes see it: the HTTP server listens from
/// the first moment, so that a load balancer or an orchestrator can ask while the stack is still starting.
final class Lifecycle: Sendable {
    enum Phase: Sendable {
        /// The stack is starting (waiting for PostgreSQL, migrating, validating): `/health` 503, routes 503.
        case starting
        /// The stack is open: `/health` 200, routes serve.
        case ready(DataStack)
        /// SIGTERM arrived: `/health` 503 so that load balancers stop sending traffic; routes still serve (the
        /// stack, when it had started) until the server stops.
        case draining(DataStack?)
    }

    private let phase = Mutex(Phase.starting)

    var current: Phase { self.phase.withLock { $0 } }

    /// The word `/health` answers: `starting`, `ready` or `draining`.
    var status: String {
        switch self.current {
        case .starting: "starting"
        case .ready: "ready"
        case .draining: "draining"
        }
    }

    /// The stack, for a route.
    /// - Throws: ``ServiceNotReady`` (503) until it started.
    func stack() throws -> DataStack {
        switch self.current {
        case .ready(let stack), .draining(.some(let stack)): return stack
        case .starting, .draining(.none): throw ServiceNotReady()
        }
    }

    /// Moves to `ready` unless draining began meanwhile (the stack is then kept for the routes still running).
    func started(_ stack: DataStack) {
        self.phase.withLock {
            if case .draining = $0 { $0 = .draining(stack) } else { $0 = .ready(stack) }
        }
    }

    /// Moves to `draining`; returns whether the stack had started (whether there is traffic to drain).
    func beginDraining() -> Bool {
        self.phase.withLock {
            switch $0 {
            case .ready(let stack): $0 = .draining(stack); return true
            case .starting: $0 = .draining(nil); return false
            case .draining(let stack): return stack != nil
            }
        }
    }
}

/// A route was called before the stack started: 503 `{"error": "starting", …}`.
struct ServiceNotReady: Error {}

/// Starts the data stack and runs it (with the ticket feed) as one service. It is the first service of the
/// group, so on SIGTERM it stops last: after the server has answered its last request and closed its event
/// streams, the stack commits what is queued and closes its pool.
struct StackService: Service {
    let configuration: DataStackConfiguration
    let lifecycle: Lifecycle
    let feed: TicketFeed
    let logger: Logger

    /// An error that ends the service (and the process with status 1): the stack could not start.
    struct StartFailed: Error, CustomStringConvertible {
        var underlying: any Error
        // Skyros's errors never hold the password (nor a piece of a malformed URL's).
        var description: String { "cannot start the data stack: \(self.underlying)" }
    }

    func run() async throws {
        let stack: DataStack
        do {
            let configuration = self.configuration
            let logger = self.logger
            // SIGTERM while still waiting for PostgreSQL: stop waiting, exit cleanly.
            stack = try await cancelWhenGracefulShutdown { try await DataStack.start(configuration, logger: logger) }
        } catch is CancellationError {
            self.feed.finish()
            self.logger.notice("stopped before the data stack had started")
            return
        } catch {
            self.feed.finish()
            throw StartFailed(underlying: error)
        }
        self.lifecycle.started(stack)
        self.logger.info("data stack started: ready")
        await withDiscardingTaskGroup { group in
            // Both end at graceful shutdown: the feed's observation ends, then the stack drains and closes.
            group.addTask { await self.feed.run(stack: stack, logger: self.logger) }
            group.addTask {
                do { try await stack.run() } catch { self.logger.error("data stack shutdown failed", metadata: ["error": "\(error)"]) }
            }
        }
    }
}

/// The last service of the group, so the first to hear SIGTERM: `/health` turns to 503 `draining` at once,
/// then for `DRAIN_SECONDS` the server still takes requests (a load balancer needs a few probe intervals to
/// take the instance out of rotation); then the server stops, then the stack. A second SIGTERM or SIGINT ends
/// the delay early.
struct DrainGate: Service {
    let lifecycle: Lifecycle
    let delay: Duration
    let logger: Logger

    func run() async throws {
        // Trapped before shutdown begins, so the signal that starts it is the first element: the second one
        // ends the delay.
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        do {
            try await gracefulShutdown()
        } catch {
            return   // cancelled: the group stops on an error (the stack could not start), nothing to drain
        }
        let serving = self.lifecycle.beginDraining()
        guard serving, self.delay > .zero else {
            self.logger.notice("draining: stopping")
            return
        }
        self.logger.notice("draining: /health answers 503; serving for \(self.delay) more (a second signal skips it)")
        let delay = self.delay
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: delay) }
            group.addTask {
                var received = 0
                for await _ in signals {
                    received += 1
                    if received == 2 { return }
                }
            }
            await group.next()
            group.cancelAll()
        }
        self.logger.notice("draining: stopping")
    }
}
