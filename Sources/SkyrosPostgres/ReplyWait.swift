import CLibPQ
import Foundation
import Synchronization

/// How a connection's thread waits for the server's reply to a statement it sent: it busy-polls the socket
/// for a short window (``PGConfiguration/busyPoll``), then sleeps in `poll(2)`.
///
/// A thread that sleeps for every reply pays a wake-up per round trip, and on an idle core (above all a
/// virtual CPU that halts when idle) that wake-up can cost as much as the statement itself (`Benchmarks/README.md`
/// has the measurements).
/// The same idea as Linux's `SO_BUSY_POLL`, in user space: it spends CPU to cut latency, so it is bounded by
/// time and switches itself off while replies take longer than twice the window (a remote server, slow
/// statements), where polling would only burn CPU; and at most half the cores poll at once, whatever the
/// number of connections waiting (the others sleep at once).
struct ReplyWait: Sendable {
    /// PGConnection threads polling right now, process-wide.
    private static let pollers = Atomic<Int>(0)
    /// The most that ever polled at once (for tests of the bound).
    private static let peakPollers = Atomic<Int>(0)
    /// How many threads may poll at once: half the cores, at least one (`activeProcessorCount` follows a
    /// container's CPU quota on Linux).
    static let maximumPollers = max(1, ProcessInfo.processInfo.activeProcessorCount / 2)
    /// The most connection threads that ever busy-polled at once in this process.
    static var peakConcurrentPollers: Int { Self.peakPollers.load(ordering: .relaxed) }

    /// The busy-poll window in nanoseconds (0: never poll, always sleep).
    let window: UInt64
    /// Whether the next wait polls first: off after a reply that took longer than twice the window.
    private(set) var pollsNext: Bool

    init(busyPoll: Duration) {
        let (seconds, attoseconds) = busyPoll.components
        let nanoseconds = max(0, seconds) * 1_000_000_000 + max(0, attoseconds) / 1_000_000_000
        self.window = UInt64(nanoseconds)
        self.pollsNext = nanoseconds > 0
    }

    /// Waits until a result can be read without blocking (`PQisBusy` is false) or the connection failed.
    /// - Returns: `false` when reading from the socket failed (the connection's error says why; `PQgetResult`
    ///   then returns it).
    mutating func awaitReply(_ connection: OpaquePointer) -> Bool {
        if PQisBusy(connection) == 0 { return true }
        let start = Self.now()
        // Poll only when the last reply came quickly and fewer than `maximumPollers` threads poll already.
        var polling = false
        if self.pollsNext {
            let pollers = Self.pollers.wrappingAdd(1, ordering: .relaxed).newValue
            polling = pollers <= Self.maximumPollers
            if polling {
                Self.peakPollers.max(pollers, ordering: .relaxed)
            } else {
                Self.pollers.wrappingSubtract(1, ordering: .relaxed)
            }
        }
        func stopPolling() {
            if polling { Self.pollers.wrappingSubtract(1, ordering: .relaxed) }
            polling = false
        }
        defer { stopPolling() }
        while true {
            if PQconsumeInput(connection) == 0 { return false }
            if PQisBusy(connection) == 0 { break }
            if polling, Self.now() - start < self.window {
                sched_yield()
            } else {
                stopPolling()
                LibPQ.wait(connection, read: true, write: false)
            }
        }
        self.pollsNext = self.window > 0 && Self.now() - start <= 2 * self.window
        return true
    }

    private static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}

extension ReplyWait {
    /// The last result of the statement sent on `connection`, as `PQexec` returns it, waiting for each with
    /// ``awaitReply(_:)`` (busy polling first) instead of libpq's sleeping wait.
    mutating func lastResult(on connection: OpaquePointer) -> OpaquePointer? {
        var last: OpaquePointer?
        while let result = self.nextResult(on: connection) {
            if let last { PQclear(last) }
            last = result
            if PQstatus(connection) == CONNECTION_BAD { break }
        }
        return last
    }

    /// The next result of the running statement(s) once it arrives (``awaitReply(_:)``), or `nil` when they
    /// are done; a `COPY` started this way is ended first (``endCopy(_:on:)``).
    mutating func nextResult(on connection: OpaquePointer) -> OpaquePointer? {
        while true {
            _ = self.awaitReply(connection)
            guard let result = PQgetResult(connection) else { return nil }
            if !Self.endCopy(result, on: connection) { return result }
        }
    }

    /// A statement run as a query that starts a `COPY` (the COPY API is ``copyFrom(table:columns:rows:)``):
    /// ends it with an error (`COPY FROM STDIN`) or reads and drops its data (`COPY TO STDOUT`), so the
    /// statement finishes and the connection stays usable. Frees `result`; `true` when it was such a result.
    fileprivate static func endCopy(_ result: OpaquePointer, on connection: OpaquePointer) -> Bool {
        switch PQresultStatus(result) {
        case PGRES_COPY_IN, PGRES_COPY_BOTH:
            PQclear(result)
            _ = PQputCopyEnd(
                connection, "COPY FROM STDIN is not supported by query and execute(script:); use copyFrom(table:columns:rows:)")
            return true
        case PGRES_COPY_OUT:
            PQclear(result)
            var buffer: UnsafeMutablePointer<CChar>?
            while PQgetCopyData(connection, &buffer, 0) >= 0 {
                if let buffer { PQfreemem(buffer) }
                buffer = nil
            }
            return true
        default:
            return false
        }
    }
}
