import Foundation
import Logging
import Skyros
import Synchronization

/// The open tickets as a numbered sequence of events, shared by every event stream of this process: one
/// observation of ``Ticket/open``, each of its results numbered (1, 2, 3, …) and its JSON kept for the last
/// ``capacity`` changes, so that a client that reconnects with `Last-Event-ID` gets what it missed.
///
/// An event id is `<boot>.<sequence>`: `boot` is random per process, so an id from another instance or from
/// before a restart is recognised as foreign (the client gets a snapshot) instead of being taken for a number
/// of this history.
///
/// Each client pulls at its own pace (``next(after:heartbeat:)``): a slow client never builds a backlog here;
/// when it falls more than ``capacity`` changes behind, it gets a snapshot instead.
final class TicketFeed: Sendable {
    /// One server-sent event.
    struct Frame: Sendable {
        /// `snapshot` (replace everything you have: `values` is the state, its `diff` inserts every row) or
        /// `change` (apply `diff` to the state of the previous event; `values` is the state after it).
        var event: String
        var id: String
        var data: Data
    }

    /// What a stream does next.
    enum Step: Sendable {
        case frames([Frame])
        /// Nothing changed for a heartbeat interval.
        case heartbeat
        /// The feed ended (the service is shutting down, or the stack never started).
        case finished
    }

    private struct Change: Sendable {
        var sequence: UInt64
        var data: Data
    }

    private struct State: Sendable {
        /// The number of the newest result; 0 before the first.
        var sequence: UInt64 = 0
        /// The newest result, for snapshots.
        var current: [Ticket] = []
        /// The last changes, oldest first, contiguous, ending at `sequence`; emptied when the observation
        /// restarts (no diff links the two histories).
        var recent: [Change] = []
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
        var finished = false
    }

    /// The changes kept for resuming clients.
    let capacity: Int
    /// This process's prefix of event ids.
    let boot: String
    private let state = Mutex(State())

    init(capacity: Int = 256) {
        self.capacity = capacity
        self.boot = String(UInt32.random(in: 0...UInt32.max), radix: 36)
    }

    /// The position of a client that sent `Last-Event-ID: lastEventID`: the sequence it has seen, or `nil`
    /// (none, malformed, or from another process or run) for a client that needs a snapshot.
    func cursor(lastEventID: String?) -> UInt64? {
        guard let lastEventID, let dot = lastEventID.lastIndex(of: "."),
            lastEventID[..<dot] == self.boot[...], let sequence = UInt64(lastEventID[lastEventID.index(after: dot)...])
        else { return nil }
        return sequence
    }

    /// Consumes the observation until the service shuts down gracefully; restarts it after an error (the
    /// database went away), the clients then get a snapshot. Finishes the feed when it returns.
    func run(stack: DataStack, logger: Logger) async {
        defer { self.finish() }
        let encoder = JSONEncoder()
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                var first = true
                for try await result in stack.observe(Ticket.open) {
                    self.publish(result, restart: first, data: try encoder.encode(result))
                    first = false
                }
                return   // ended: graceful shutdown, cancellation, or the stack shut down
            } catch {
                logger.warning("ticket observation failed; restarting it in 1 s", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    private func publish(_ result: ObservedResult<Ticket>, restart: Bool, data: Data) {
        let waiters = self.state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.sequence += 1
            state.current = result.values
            if restart {
                state.recent.removeAll()
            } else {
                state.recent.append(Change(sequence: state.sequence, data: data))
                if state.recent.count > self.capacity { state.recent.removeFirst(state.recent.count - self.capacity) }
            }
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Ends every stream (at its next step).
    func finish() {
        let waiters = self.state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.finished = true
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// What a client that has seen up to `cursor` gets next: the changes after it, or a snapshot when it has
    /// seen nothing, is too far behind or comes from another history; waits for a change up to `heartbeat`.
    /// Returns the frames and the client's new cursor.
    /// - Throws: `CancellationError` when the task is cancelled.
    func next(after cursor: UInt64?, heartbeat: Duration) async throws -> (Step, UInt64?) {
        if let ready = self.available(after: cursor) { return ready }
        let changed = await withTaskGroup(of: Bool.self) { group in
            group.addTask { await self.waitForChange(after: cursor); return true }
            group.addTask {
                try? await Task.sleep(for: heartbeat)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        try Task.checkCancellation()
        if changed, let ready = self.available(after: cursor) { return ready }
        return (.heartbeat, cursor)
    }

    private func available(after cursor: UInt64?) -> (Step, UInt64?)? {
        self.state.withLock { state in
            if state.finished { return (.finished, cursor) }
            if state.sequence == 0 || cursor == state.sequence { return nil }
            if let cursor, cursor < state.sequence, let oldest = state.recent.first?.sequence, oldest <= cursor + 1 {
                let frames = state.recent.drop(while: { $0.sequence <= cursor }).map {
                    Frame(event: "change", id: "\(self.boot).\($0.sequence)", data: $0.data)
                }
                return (.frames(frames), state.sequence)
            }
            let snapshot = Frame(event: "snapshot", id: "\(self.boot).\(state.sequence)", data: Self.snapshot(state.current))
            return (.frames([snapshot]), state.sequence)
        }
    }

    /// Returns when the sequence moved past `cursor`, the feed finished, or the task was cancelled.
    private func waitForChange(after cursor: UInt64?) async {
        let id = self.state.withLock { state -> Int in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = self.state.withLock { state -> Bool in
                    if state.finished || Task.isCancelled || (state.sequence != 0 && state.sequence != cursor) { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = self.state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }

    /// A snapshot's data: the same shape as an `ObservedResult` (`values` and a `diff` from nothing).
    private static func snapshot(_ values: [Ticket]) -> Data {
        struct Insertion: Encodable { var offset: Int; var value: Ticket }
        struct Diff: Encodable {
            var deleted: [Insertion] = []
            var inserted: [Insertion]
            var moved: [Insertion] = []
            var updated: [Insertion] = []
        }
        struct Snapshot: Encodable { var values: [Ticket]; var diff: Diff }
        let snapshot = Snapshot(values: values, diff: Diff(inserted: values.enumerated().map { Insertion(offset: $0, value: $1) }))
        return (try? JSONEncoder().encode(snapshot)) ?? Data(#"{"values":[]}"#.utf8)
    }
}
