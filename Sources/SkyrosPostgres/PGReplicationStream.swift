import CLibPQ
import Foundation
import Logging

/// The COPY BOTH phase of a logical replication connection: the messages a slot streams after
/// `START_REPLICATION`, and the standby status updates that tell the server how far the consumer has come.
///
/// ``PGReplicationConnection/startReplication(slot:from:publications:messages:options:)`` makes one. The stream
/// runs on a thread of its own (like ``PGListener``): it reads the server's messages with `PQgetCopyData`,
/// waiting on the socket with a timeout so that ``stop()`` is honoured within 100 ms, and delivers them, in
/// order, through ``messages``. The server's errors end ``messages`` with a ``PGError`` that keeps their SQLSTATE
/// (57P01 when the backend was terminated); a dropped connection ends it with kind `.connectionLost`. So does a
/// walsender terminated while it is blocked in the middle of sending a message to a consumer that is behind:
/// PostgreSQL then closes the connection without its error (which would follow a partial message), and the
/// stream ends with no SQLSTATE.
///
/// The slot's `confirmed_flush_lsn` follows only what the consumer confirms with ``confirm(flushedThrough:)``:
/// the stream reports that position as flushed, never one beyond it, so the server keeps every transaction
/// the consumer has not made durable, and streams it again after a restart. (What it received, it reports as
/// written.) It sends a status update at once when the server asks for one, within
/// ``Options/minimumStatusInterval`` of a new confirmation or of new data, and every ``Options/statusInterval``
/// otherwise (which keeps `wal_sender_timeout` from ending the connection while the consumer is busy).
///
/// ```swift
/// let stream = try await connection.startReplication(slot: "skyros_changes", publications: ["skyros_changes"])
/// for try await message in stream.messages {
///     guard case .data(let data) = message else { continue }
///     if try store(data.payload) == .committed {     // durable now
///         stream.confirm(flushedThrough: data.walStart)   // a pgoutput Commit's walStart is its end LSN
///     }
/// }
/// await stream.stop()
/// ```
///
/// Messages wait in a buffer between the thread and the consumer; when it holds more than
/// ``Options/bufferLimit`` bytes the thread stops reading (the server then waits) until the consumer catches up,
/// and keeps sending status updates meanwhile.
///
/// ## Topics
/// - ``messages``
/// - ``confirm(flushedThrough:)``
/// - ``stop()``
/// - ``Options``
package final class PGReplicationStream: Sendable {
    /// When status updates go out, and how much the stream buffers.
    package struct Options: Sendable, Hashable {
        /// The longest time between two status updates (default 10 s). Keep it well under the server's
        /// `wal_sender_timeout` (60 s by default), which ends a connection silent for that long.
        package var statusInterval: Duration
        /// The shortest time between two status updates that report new positions (default 100 ms): a consumer
        /// that confirms every transaction does not send one update per transaction.
        package var minimumStatusInterval: Duration
        /// How many bytes of messages may wait for the consumer before the stream stops reading (default 16 MiB;
        /// each message counts its payload plus 64 bytes). A single larger message still passes.
        package var bufferLimit: Int
        /// How long ``PGReplicationStream/stop()`` waits for the server to end streaming cleanly (and release the
        /// slot) before it closes the connection anyway (default 5 s).
        package var stopTimeout: Duration

        /// Options with these values.
        package init(
            statusInterval: Duration = .seconds(10), minimumStatusInterval: Duration = .milliseconds(100),
            bufferLimit: Int = 16 << 20, stopTimeout: Duration = .seconds(5)
        ) {
            self.statusInterval = statusInterval
            self.minimumStatusInterval = minimumStatusInterval
            self.bufferLimit = bufferLimit
            self.stopTimeout = stopTimeout
        }
    }

    /// The server's messages, in order; iterate from one task only. Ends (returns `nil`) after ``stop()``, or
    /// throws the ``PGError`` that ended streaming.
    package let messages: Messages
    private let continuation: AsyncThrowingStream<PGReplicationMessage, any Error>.Continuation
    /// What was yielded to ``messages`` and not yet taken by the consumer.
    private let buffer: Buffer
    private let state: Locked<State>
    private let options: Options
    private let logger: Logger

    /// What the stream's thread and its callers share.
    private struct State {
        /// ``stop()`` was called, or the consumer dropped ``messages``.
        var stopRequested = false
        /// The highest position the consumer confirmed (never above ``received``).
        var confirmed = LSN.invalid
        /// The highest position the server sent: a message's `walEnd`, a keepalive's `walEnd`, or the start.
        var received: LSN
        /// The flush position of the last status update sent.
        var reportedFlush = LSN.invalid
        /// The thread ended (its connection closed), and who waits for that.
        var ended = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private init(start: LSN, options: Options, logger: Logger) {
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: PGReplicationMessage.self, throwing: (any Error).self, bufferingPolicy: .unbounded)
        self.buffer = Buffer(limit: options.bufferLimit)
        self.messages = Messages(base: stream, buffer: self.buffer)
        self.continuation = continuation
        self.state = Locked(State(received: start))
        self.options = options
        self.logger = logger
    }

    /// Starts the stream's thread on a connection in COPY BOTH mode.
    static func start(session: Handover, start: LSN, options: Options, logger: Logger) -> PGReplicationStream {
        let stream = PGReplicationStream(start: start, options: options, logger: logger)
        stream.continuation.onTermination = { [weak stream] _ in stream?.requestStop() }
        let thread = Thread { stream.run(session.take()) }
        thread.name = "skyros-replication"
        thread.stackSize = 1 << 20
        thread.start()
        return stream
    }

    /// Moves a session from the connection's thread, which gives it up, to the stream's thread.
    final class Handover: @unchecked Sendable {
        // @unchecked Sendable: set once by the thread that gives the session up and never touches it again, taken
        // once by the stream's thread, which `Thread.start` orders after that.
        private var session: PGSession?
        init(_ session: PGSession) { self.session = session }
        func take() -> PGSession? {
            defer { self.session = nil }
            return self.session
        }
    }

    // MARK: The consumer's side

    /// Records that the consumer made every change up to `lsn` durable: the next status update reports it as
    /// flushed, and the server may then advance the slot's `confirmed_flush_lsn` to it.
    ///
    /// Confirm a transaction's end: the `walStart` of its `pgoutput` Commit message (its end LSN). A restart from
    /// a confirmed position streams only transactions that commit after it. Positions only go forward: a lower
    /// one is ignored, and one beyond what the server has sent is held to that.
    ///
    /// ```swift
    /// stream.confirm(flushedThrough: commit.endLSN)
    /// ```
    /// - Parameter lsn: the end of the last durable transaction (or a keepalive's `walEnd`, once every
    ///   transaction delivered before it is durable).
    package func confirm(flushedThrough lsn: LSN) {
        self.state.withLock { state in
            state.confirmed = max(state.confirmed, min(lsn, state.received))
        }
    }

    /// The highest position the consumer confirmed (as held by ``confirm(flushedThrough:)``).
    package var confirmedFlush: LSN { self.state.withLock { $0.confirmed } }

    /// The flush position of the last status update sent to the server.
    package var reportedFlush: LSN { self.state.withLock { $0.reportedFlush } }

    /// Asks the stream's thread to stop, without waiting (see ``stop()``).
    package func requestStop() {
        self.state.withLock { $0.stopRequested = true }
    }

    /// Stops streaming and waits until the stream's thread has ended and closed its connection.
    ///
    /// The stream sends a last status update with the confirmed position, ends COPY mode and waits (up to
    /// ``Options/stopTimeout``) for the server to end streaming, so that the slot is free for the next
    /// `START_REPLICATION` when this returns. ``messages`` then ends, after the messages it still holds.
    ///
    /// ```swift
    /// await stream.stop()
    /// ```
    package func stop() async {
        self.requestStop()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ended = self.state.withLock { state -> Bool in
                if state.ended { return true }
                state.waiters.append(continuation)
                return false
            }
            if ended { continuation.resume() }
        }
    }

    // MARK: The stream's thread

    private func run(_ taken: PGSession?) {
        var session = taken
        var failure: PGError?
        if let current = session {
            failure = self.stream(on: current)
        } else {
            failure = PGError(kind: .connectionClosed, message: "the replication connection is gone")
        }
        // The connection closes before the end is reported: after `stop()` returns, nothing of it remains.
        session = nil
        if let failure {
            self.logger.debug("replication ended", metadata: [PGLogKey.error: "\(failure)"])
            self.continuation.finish(throwing: failure)
        } else {
            self.logger.debug("replication stopped")
            self.continuation.finish()
        }
        let waiters = self.state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.ended = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Streams until a stop is requested (then ends COPY mode cleanly and returns `nil`) or streaming fails.
    private func stream(on session: PGSession) -> PGError? {
        let connection = session.handle
        let clock = ContinuousClock()
        var lastStatus = clock.now
        var reported = (written: LSN.invalid, flushed: LSN.invalid)
        var replyRequested = false
        while true {
            let (stopRequested, confirmed, received) = self.state.withLock { ($0.stopRequested, $0.confirmed, $0.received) }
            if stopRequested {
                self.endCopy(session, written: max(received, confirmed), flushed: confirmed, clock: clock)
                return nil
            }
            let sinceStatus = clock.now - lastStatus
            let progressed = confirmed > reported.flushed || received > reported.written
            if replyRequested || sinceStatus >= self.options.statusInterval
                || (progressed && sinceStatus >= self.options.minimumStatusInterval)
            {
                if self.sendStatus(connection, written: max(received, confirmed), flushed: confirmed) != nil {
                    return self.connectionFailed(session)
                }
                lastStatus = clock.now
                reported = (max(received, confirmed), confirmed)
                replyRequested = false
            }
            // The next status update falls due at most this far ahead: the waits below end in time for it.
            let untilStatus =
                progressed
                ? self.options.minimumStatusInterval - sinceStatus : self.options.statusInterval - sinceStatus
            let waitLimit = Self.milliseconds(min(.milliseconds(100), max(untilStatus, .milliseconds(1))))

            if !self.buffer.waitForRoom(timeoutMilliseconds: waitLimit) {
                // The consumer is behind: read nothing more until it catches up (status updates still go out).
                continue
            }
            var frame: UnsafeMutablePointer<CChar>?
            let length = PQgetCopyData(connection, &frame, 1)
            if length > 0, let frame {
                let delivered = self.deliver(frame, length: length)
                PQfreemem(frame)
                switch delivered {
                case .failure(let error): return error
                case .success(let requested): replyRequested = replyRequested || requested
                }
                continue
            }
            if length == 0 {
                // Nothing complete in libpq's buffer: wait for the socket, then read what came.
                if LibPQ.wait(connection, read: true, write: false, timeoutMilliseconds: waitLimit),
                    PQconsumeInput(connection) == 0
                {
                    return self.connectionFailed(session)
                }
                continue
            }
            // -1: the server ended COPY mode (an error, or its shutdown); -2: the connection failed.
            return self.serverEnded(session)
        }
    }

    /// Parses one CopyData frame and hands it to the consumer; `true` when the server asked for a status update.
    private func deliver(_ frame: UnsafeMutablePointer<CChar>, length: Int32) -> Result<Bool, PGError> {
        let message: PGReplicationMessage
        do {
            message = try PGReplicationMessage(frame: UnsafeRawBufferPointer(start: frame, count: Int(length)))
        } catch {
            return .failure(error)
        }
        self.state.withLock { state in
            switch message {
            case .data(let data): state.received = max(state.received, data.walStart, data.walEnd)
            case .keepalive(let keepalive): state.received = max(state.received, keepalive.walEnd)
            }
        }
        self.buffer.add(message.bufferedSize)
        self.continuation.yield(message)
        if case .keepalive(let keepalive) = message { return .success(keepalive.replyRequested) }
        return .success(false)
    }

    /// The connection failed while the stream wrote or read. A server that ends the connection (a terminated
    /// walsender) sends its error before closing, and an earlier read may have left that error, and data before
    /// it, unparsed in libpq's buffer: both are read first, so the stream ends with the server's SQLSTATE rather
    /// than the socket's failure.
    private func connectionFailed(_ session: PGSession) -> PGError {
        let connection = session.handle
        let socketFailure = LibPQ.error(result: nil, connection: connection)
        while true {
            var frame: UnsafeMutablePointer<CChar>?
            let length = PQgetCopyData(connection, &frame, 1)
            if length > 0, let frame {
                let delivered = self.deliver(frame, length: length)
                PQfreemem(frame)
                if case .failure(let error) = delivered { return error }
                continue
            }
            guard length == -1 else { return socketFailure }
            let ended = self.serverEnded(session)
            return ended.sqlState == nil ? socketFailure : ended
        }
    }

    /// Sends a standby status update: `written` as written, `flushed` as flushed and applied.
    private func sendStatus(_ connection: OpaquePointer, written: LSN, flushed: LSN) -> PGError? {
        let bytes = PGStandbyStatusUpdate(written: written, flushed: flushed, applied: flushed, clientTime: .now).bytes
        let queued = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { PQputCopyData(connection, $0.baseAddress, Int32($0.count)) }
        }
        guard queued == 1, PQflush(connection) == 0 else { return LibPQ.error(result: nil, connection: connection) }
        self.state.withLock { $0.reportedFlush = flushed }
        self.logger.trace("replication status update", metadata: [PGLogKey.replicationLSN: "\(flushed)"])
        return nil
    }

    /// Why the server ended COPY mode: its error (with SQLSTATE), or the connection's.
    private func serverEnded(_ session: PGSession) -> PGError {
        let connection = session.handle
        var failure: PGError?
        while let result = session.replyWait.nextResult(on: connection) {
            let status = PQresultStatus(result)
            if failure == nil, status == PGRES_FATAL_ERROR || status == PGRES_BAD_RESPONSE || status == PGRES_NONFATAL_ERROR {
                failure = LibPQ.error(result: result, connection: connection)
            }
            PQclear(result)
            if session.isBroken { break }
        }
        if let failure { return failure }
        if session.isBroken { return LibPQ.error(result: nil, connection: connection) }
        return PGError(kind: .connectionLost, message: "the server ended replication")
    }

    /// Ends streaming on request: a last status update, `CopyDone`, then what the server still sends (dropped: it
    /// was not confirmed, so it comes again after a restart) up to its `CommandComplete`, at most
    /// ``Options/stopTimeout``. Errors end it early: the connection closes next anyway.
    private func endCopy(_ session: PGSession, written: LSN, flushed: LSN, clock: ContinuousClock) {
        let connection = session.handle
        guard self.sendStatus(connection, written: written, flushed: flushed) == nil,
            PQputCopyEnd(connection, nil) == 1, PQflush(connection) == 0
        else { return }
        let deadline = clock.now + self.options.stopTimeout
        func waitForInput() -> Bool {
            let remaining = deadline - clock.now
            guard remaining > .zero else { return false }
            LibPQ.wait(connection, read: true, write: false, timeoutMilliseconds: Self.milliseconds(remaining))
            return PQconsumeInput(connection) != 0
        }
        while true {
            var frame: UnsafeMutablePointer<CChar>?
            let length = PQgetCopyData(connection, &frame, 1)
            if let frame { PQfreemem(frame) }
            if length > 0 { continue }
            if length < 0 { break }
            guard waitForInput() else { return }
        }
        while true {
            if PQisBusy(connection) == 0 {
                guard let result = PQgetResult(connection) else { return }
                PQclear(result)
                continue
            }
            guard waitForInput() else { return }
        }
    }

    /// A duration in whole milliseconds, rounded up, as `poll(2)` takes it.
    private static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: max(0, milliseconds))
    }

    /// The messages of a ``PGReplicationStream``, in the order the server sent them. One task iterates it.
    package struct Messages: AsyncSequence, Sendable {
        /// One server message.
        package typealias Element = PGReplicationMessage
        /// A ``PGError`` in practice.
        package typealias Failure = any Error

        fileprivate let base: AsyncThrowingStream<PGReplicationMessage, any Error>
        fileprivate let buffer: Buffer

        /// The iterator: one per stream.
        package func makeAsyncIterator() -> Iterator {
            Iterator(base: self.base.makeAsyncIterator(), buffer: self.buffer)
        }

        /// Takes messages from the stream's buffer, making room for the stream's thread to read more.
        package struct Iterator: AsyncIteratorProtocol {
            fileprivate var base: AsyncThrowingStream<PGReplicationMessage, any Error>.Iterator
            fileprivate let buffer: Buffer

            /// The next message; `nil` after ``PGReplicationStream/stop()``.
            /// - Throws: ``PGError`` that ended streaming.
            package mutating func next() async throws -> PGReplicationMessage? {
                guard let message = try await self.base.next() else { return nil }
                self.buffer.take(message.bufferedSize)
                return message
            }
        }
    }

    /// Counts the bytes of messages yielded and not yet taken (``PGReplicationMessage/bufferedSize``), and wakes
    /// the stream's thread when the consumer made room below ``Options/bufferLimit`` while it waited.
    final class Buffer: Sendable {
        private let limit: Int
        private let state = Locked((bytes: 0, waiting: false))
        private let room = DispatchSemaphore(value: 0)

        init(limit: Int) { self.limit = limit }

        /// A message was yielded.
        func add(_ size: Int) { self.state.withLock { $0.bytes += size } }

        /// The consumer took a message.
        func take(_ size: Int) {
            let wake = self.state.withLock { state -> Bool in
                state.bytes -= size
                guard state.waiting, state.bytes < self.limit else { return false }
                state.waiting = false
                return true
            }
            if wake { self.room.signal() }
        }

        /// Whether there is room for another message: at once when there is, else after waiting up to
        /// `timeoutMilliseconds` for the consumer to make some. (A wake-up that comes after the wait ended only
        /// makes a later wait return early.)
        func waitForRoom(timeoutMilliseconds: Int32) -> Bool {
            let full = self.state.withLock { state -> Bool in
                state.waiting = state.bytes >= self.limit
                return state.waiting
            }
            guard full else { return true }
            _ = self.room.wait(timeout: .now() + .milliseconds(Int(timeoutMilliseconds)))
            return self.state.withLock { state in
                state.waiting = false
                return state.bytes < self.limit
            }
        }
    }
}
