import Foundation
import Logging

/// A notification received on a `LISTEN` channel.
public struct PGNotification: Sendable, Hashable {
    /// The channel named in `NOTIFY`.
    public var channel: String
    /// The payload of `NOTIFY channel, 'payload'` (empty when none was given).
    public var payload: String
    /// The backend process id of the notifying session.
    public var senderPID: Int32
}

/// LISTEN/NOTIFY on a dedicated connection, delivered as an `AsyncSequence` of ``Event``s.
///
/// The listener reconnects by itself when its connection drops (server restart, `pg_terminate_backend`,
/// network) and then yields ``Event/reconnected``: notifications sent while it was disconnected are lost,
/// so a cache fed by it should re-read what it holds.
///
/// ```swift
/// let listener = try await PGListener.start(configuration: config, channels: ["orders"])
/// for await event in listener.events {
///     switch event {
///     case .notification(let n): print(n.channel, n.payload)
///     case .reconnected: flushCaches()
///     case .listening: break
///     }
/// }
/// ```
///
/// Behind PgBouncer in transaction mode, give the listener a direct URL to PostgreSQL: LISTEN needs a
/// session.
///
/// A listener only reads, so a server that vanished without closing the connection (a host crash, a network
/// partition) would go unnoticed for as long as the operating system keeps a silent connection (hours). So its
/// connection gets TCP keepalives (`keepalives=1`, `keepalives_idle=30`, `keepalives_interval=10`,
/// `keepalives_count=3`, and on Linux `tcp_user_timeout=60000`) for each of these options the configuration
/// does not set itself, and after 30 seconds without a word from the server it sends an empty statement: when
/// no reply comes within 20 seconds it reconnects (and yields ``Event/reconnected``) as for a dropped
/// connection.
public final class PGListener: Sendable {
    /// What the listener reports, in order.
    public enum Event: Sendable, Hashable {
        /// LISTEN is active (yielded once, first).
        case listening
        /// A notification, in the order PostgreSQL delivered it.
        case notification(PGNotification)
        /// The connection was re-established after a drop: notifications may have been missed.
        case reconnected
    }

    /// The events; a single consumer should iterate it. Ends when ``stop()`` is called.
    public let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let stopped = Locked(false)
    /// The loop's thread ended (its connection closed), and who waits for it.
    private let ended = Locked<(done: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    private let configuration: PGConfiguration
    private let channels: [String]
    private let logger: Logger
    /// The delays between reconnect attempts: from the `reconnectDelay` given, doubling up to 2 s, with jitter
    /// (many listeners cut off by one server restart do not all come back at once).
    private let reconnects: RetryPolicy
    /// Reconnect failures at `warning`, rate-limited, and the recovery at `notice`.
    private let outage: OutageLog
    private let handles: (@Sendable (PGNotification, ListenerSession) -> Bool)?
    private let idleCheck: IdleCheck

    /// When the listener checks that its server still answers: after `after` without a word from it, it sends an
    /// empty statement, and reconnects when no reply comes within `replyTimeout`.
    package struct IdleCheck: Sendable {
        package var after: Duration
        package var replyTimeout: Duration
        package init(after: Duration, replyTimeout: Duration) {
            self.after = after
            self.replyTimeout = replyTimeout
        }
        package static let standard = IdleCheck(after: .seconds(30), replyTimeout: .seconds(20))
    }

    /// The libpq options that make a silent dead peer fail the connection; each applies unless the
    /// configuration sets it.
    static var keepaliveOptions: [(keyword: String, value: String)] {
        var options = [("keepalives", "1"), ("keepalives_idle", "30"), ("keepalives_interval", "10"), ("keepalives_count", "3")]
        #if os(Linux)
        // Unacknowledged data (the idle check's statement) fails the connection after a minute, instead of
        // after the ~15 minutes of retransmissions.
        options.append(("tcp_user_timeout", "60000"))
        #endif
        return options
    }

    private init(
        configuration: PGConfiguration, channels: [String], logger: Logger, reconnectDelay: Duration,
        idleCheck: IdleCheck, handles: (@Sendable (PGNotification, ListenerSession) -> Bool)?
    ) {
        (self.events, self.continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
        var configuration = configuration
        for (keyword, value) in Self.keepaliveOptions where configuration[keyword] == nil {
            configuration[keyword] = value
        }
        self.configuration = configuration
        self.channels = channels
        self.logger = logger
        self.reconnects = RetryPolicy(initialDelay: reconnectDelay, maximumDelay: max(reconnectDelay, .seconds(2)), jitter: 0.2)
        self.outage = OutageLog(logger: logger, event: "listener reconnect")
        self.idleCheck = idleCheck
        self.handles = handles
    }

    /// Connects, issues `LISTEN` for each channel, and starts delivering notifications.
    /// - Parameters:
    ///   - configuration: a direct (not transaction-pooled) connection to PostgreSQL.
    ///   - channels: channel names; each is quoted.
    ///   - reconnectDelay: the first retry delay after a drop; doubles up to two seconds (each shortened by up
    ///     to a fifth at random).
    ///   - logger: receives reconnects and dropped connections (failed reconnects at `warning`, at most one line
    ///     per 10 s, and the recovery at `notice`); the password is never logged.
    /// - Throws: ``PGError`` when the first connection or `LISTEN` fails.
    public static func start(
        configuration: PGConfiguration, channels: [String],
        logger: Logger = Logger(label: "skyros.listener", factory: { _ in SwiftLogNoOpLogHandler() }),
        reconnectDelay: Duration = .milliseconds(50)
    ) async throws -> PGListener {
        try await self.start(configuration: configuration, channels: channels, logger: logger, reconnectDelay: reconnectDelay, handles: nil)
    }

    /// ``start(configuration:channels:logger:reconnectDelay:)``, with `handles` run on the listener's thread for
    /// each notification as it arrives, before it is yielded: a notification it returns `true` for (handled
    /// there) is not yielded (no task wakes up for it). It may read from the database through the ``ListenerSession`` it is
    /// given (the listener's own connection, awake since it just delivered the notification); otherwise it
    /// must be quick and must not block: later notifications wait behind it.
    package static func start(
        configuration: PGConfiguration, channels: [String], logger: Logger, reconnectDelay: Duration = .milliseconds(50),
        idleCheck: IdleCheck = .standard, handles: (@Sendable (PGNotification, ListenerSession) -> Bool)?
    ) async throws -> PGListener {
        let listener = PGListener(
            configuration: configuration, channels: channels, logger: logger, reconnectDelay: reconnectDelay,
            idleCheck: idleCheck, handles: handles)
        try await withCheckedThrowingContinuation { (ready: CheckedContinuation<Void, any Error>) in
            let thread = Thread { listener.loop(ready: ready) }
            thread.name = "skyros-listener"
            thread.start()
        }
        listener.continuation.onTermination = { [weak listener] _ in listener?.stop() }
        return listener
    }

    /// Stops listening and ends ``events``.
    public func stop() {
        self.stopped.withLock { $0 = true }
        self.continuation.finish()
    }

    private var isStopped: Bool { self.stopped.withLock { $0 } }

    /// Stops listening and waits until the listener's thread has closed its connection and ended: after it
    /// returns, the listener opens no connection and runs no libpq call.
    package func stopAndWait() async {
        self.stop()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = self.ended.withLock { ended -> Bool in
                if ended.done { return true }
                ended.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// Marks the loop's thread as ended and resumes who waits for it.
    private func markEnded() {
        let waiters = self.ended.withLock { ended -> [CheckedContinuation<Void, Never>] in
            ended.done = true
            defer { ended.waiters = [] }
            return ended.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// A new connection with LISTEN active on every channel.
    private func connect() -> Result<ListenerSession, PGError> {
        do {
            // Dates read through the listener's session decode as those of a ``PGConnection``: the session time
            // zone is set on both alike.
            let session = try PGSession.open(self.configuration, statements: .listener)
            for channel in self.channels {
                _ = try session.execute("LISTEN \(quoteIdentifier(channel))")
            }
            return .success(ListenerSession(session))
        } catch {
            return .failure(error as? PGError ?? PGError(kind: .server, message: "\(error)"))
        }
    }

    private func loop(ready: CheckedContinuation<Void, any Error>) {
        defer { self.markEnded() }
        var session: ListenerSession?
        switch self.connect() {
        case .success(let opened):
            session = opened
            self.continuation.yield(.listening)
            ready.resume()
        case .failure(let error):
            ready.resume(throwing: error)
            return
        }
        // The connection is closed (its session released) before the loop reports that it ended.
        defer { session = nil }
        var failedAttempts = 0
        let clock = ContinuousClock()
        var lastHeard = clock.now
        while !self.isStopped {
            guard let current = session else {
                switch self.connect() {
                case .success(let opened):
                    session = opened
                    lastHeard = clock.now
                    failedAttempts = 0
                    self.outage.recovered()
                    self.logger.debug("listener reconnected")
                    self.continuation.yield(.reconnected)
                case .failure(let error):
                    failedAttempts += 1
                    let delay = self.reconnects.jitteredDelay(afterAttempt: failedAttempts)
                    self.outage.failed(error, retryIn: delay)
                    // In slices, so that a stop is not held up by the delay.
                    let until = clock.now.advanced(by: delay)
                    while !self.isStopped, clock.now < until { Thread.sleep(forTimeInterval: 0.02) }
                }
                continue
            }
            var alive = true
            if current.session.waitForInput(timeoutMilliseconds: 100) {
                lastHeard = clock.now
            } else if clock.now - lastHeard >= self.idleCheck.after {
                // Silence: make sure the server is still there (a dead peer never closes the connection).
                alive = current.session.answers(within: self.idleCheck.replyTimeout)
                lastHeard = clock.now
            }
            if !alive || !current.session.consumeInput() {
                self.logger.debug(alive ? "listener connection lost" : "listener connection lost: no reply to the idle check")
                // The connection is finished as its session goes.
                session = nil
                continue
            }
            let received = current.session.notifications()
            for (index, notification) in received.enumerated() {
                current.backlog = received.count - index - 1
                if let handles = self.handles, handles(notification, current) { continue }
                self.continuation.yield(.notification(notification))
            }
        }
    }
}

/// A ``PGListener``'s connection, lent to the handler that sees each notification on the listener's
/// thread (one session per connection: a reconnect makes a new one). Not `Sendable`: it is only valid on that
/// thread, during the call.
package final class ListenerSession {
    /// The listener's libpq connection.
    fileprivate let session: PGSession
    /// How many notifications received with this one wait behind it: a handler that reads may leave the read
    /// out while they do, so a burst is not held up (notifications that arrive during a read are not counted).
    package fileprivate(set) var backlog = 0
    /// Whether this connection's statement and lock timeouts were set (before its first read).
    private var limited = false
    /// The longest a read may wait for a lock, or run: every notification behind it waits too (a migration
    /// holding a table's `ACCESS EXCLUSIVE` lock would otherwise stall the listener for as long).
    static let timeouts = "SET lock_timeout = '100ms'; SET statement_timeout = '1s'"

    fileprivate init(_ session: PGSession) {
        self.session = session
    }

    /// The libpq options this connection was opened with (`PQconninfo`), passwords left out.
    package var connectionOptions: [String: String] { self.session.connectionOptions }

    /// Runs one statement on the listener's connection and returns its rows, as ``PGConnection/query(_:)`` does
    /// (statements with parameters are prepared once per connection; one that a migration outdated is prepared
    /// again and run once more), within the ``timeouts`` set on the connection before its first read.
    /// Notifications that arrive meanwhile are kept by libpq and handled after the current one.
    /// - Throws: ``PGError``; a failed connection is noticed (and re-established) by the listener's loop.
    package func query(_ query: PGQuery) throws -> PGRows {
        if let encodingError = query.encodingError {
            throw PGError(kind: .encoding, message: encodingError)
        }
        if !self.limited {
            _ = try self.session.execute(Self.timeouts)
            self.limited = true
        }
        return try self.session.run(query)
    }
}

@available(*, unavailable)
extension ListenerSession: Sendable {}
