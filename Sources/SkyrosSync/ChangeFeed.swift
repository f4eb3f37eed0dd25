import DequeModule
import Foundation
import Logging
import SkyrosPostgres
import SkyrosStore
import SkyrosStack

/// Counters of a stack's change feed, read with `DataStack.changeFeedStatistics` (all zero without a feed). The same
/// figures go to swift-metrics (`skyros.feed.*`).
///
/// ```swift
/// let feed = stack.changeFeedStatistics
/// logger.info("change feed", metadata: ["other_rows": "\(feed.otherRows)", "apply_lag": "\(feed.latestApplyLag)"])
/// ```
public struct ChangeFeedStatistics: Sendable, Hashable {
    /// Log reads done.
    public package(set) var reads = 0
    /// Entries from other stacks delivered (counted once the stack has applied them).
    public package(set) var remoteEntries = 0
    /// Of those, entries that arrived in their hint (no log read).
    public package(set) var hintEntries = 0
    /// Times the listener reconnected and caught up from the log.
    public package(set) var catchUps = 0
    /// Times a gap (pruned, unseen entries) forced a cache flush.
    public package(set) var flushes = 0
    /// Cached rows refreshed from an announced row, or from the row read again on the listener's connection,
    /// instead of evicted.
    public package(set) var refreshedRows = 0
    /// Rows an observer of one row watches, read again on the listener's connection as their hint arrived.
    public package(set) var rowsReadByListener = 0
    /// Changed rows of the entries applied (``remoteEntries``): other stacks', and every writer's outside Skyros.
    public package(set) var otherRows = 0
    /// Changed rows of this stack's own entries (the capture named this stack as their writer), counted as their
    /// hints arrive.
    public package(set) var ownRows = 0
    /// Entries whose lag from commit to applied was measured: those whose hint or log row carries the commit time
    /// (the `skyros.feed.apply_lag` timer gets the same samples).
    public package(set) var applyLagSamples = 0
    /// The mean lag from commit to applied over ``applyLagSamples``.
    public package(set) var averageApplyLag = Duration.zero
    /// The lag from commit to applied of the latest measured entry.
    public package(set) var latestApplyLag = Duration.zero

    package init(
        reads: Int = 0, remoteEntries: Int = 0, hintEntries: Int = 0, catchUps: Int = 0, flushes: Int = 0,
        refreshedRows: Int = 0, rowsReadByListener: Int = 0, otherRows: Int = 0, ownRows: Int = 0,
        applyLagSamples: Int = 0, averageApplyLag: Duration = .zero, latestApplyLag: Duration = .zero
    ) {
        (self.reads, self.remoteEntries, self.hintEntries, self.catchUps) = (reads, remoteEntries, hintEntries, catchUps)
        (self.flushes, self.refreshedRows, self.rowsReadByListener) = (flushes, refreshedRows, rowsReadByListener)
        (self.otherRows, self.ownRows) = (otherRows, ownRows)
        (self.applyLagSamples, self.averageApplyLag, self.latestApplyLag) = (applyLagSamples, averageApplyLag, latestApplyLag)
    }
}

/// What the feed hands the stack.
package enum ChangeFeedDelivery: Sendable {
    /// Entries committed by other stacks, in position order, with rows read again since (see
    /// ``ChangeFeedSink/rowsToReadAgain(_:on:)``).
    case remote([ChangeLogEntry], readAgain: [RowKey: RemoteRefresh] = [:])
    /// Entries were lost: drop the cache and refetch everything.
    case flush
}

/// The stack's side of the remote path, as the change feed sees it: the feed triages hints and reads the log,
/// and hands what it decided to this. `StackSync` implements it, on top of `StackCore.applyRemote`/`flushRemote`
/// and the observers.
package protocol ChangeFeedSink: AnyObject, Sendable {
    /// The rows of another stack's entry to read again, on the listener's connection and thread, as the entry's
    /// hint arrives: those an observer of one row watches that are cached and not pending. Delivered with the
    /// entry, they refresh the cache instead of being evicted, so the observer's next read is served from
    /// memory: its event needs no pool connection, no hand-off to that connection's thread and back, and the
    /// listening backend that just sent the notification is the one that answers.
    func rowsToReadAgain(_ entry: ChangeLogEntry, on session: ListenerSession) -> [RowKey: RemoteRefresh]

    /// Applies a delivery to the stack (other writers' entries, or a flush after a gap), on the thread that
    /// calls it: the listener's for a hint it delivers, the event loop's otherwise.
    func deliver(_ delivery: ChangeFeedDelivery)
}

/// Listens for change-log hints and reads the log (catching up after reconnects), delivering other stacks'
/// commits in order.
package final class ChangeFeed: Sendable {
    private struct State: Sendable {
        var cursor = ChangeCursor()
        var listener: PGListener?
        /// When to read the log (hints since the last read, horizon and trailing reads).
        var scheduler: ChangeFeedScheduler
        /// Hints on the log's channel handed to the event loop and not yet handled there: while there are any,
        /// the listener's thread hands it the next ones too, so hints are handled in the order they arrived.
        var forwardedHints = 0
        /// The keys that authenticate hints carrying their entry, from the last read (see ``HintKey``).
        var hintKey: HintKey?
    }

    package let log: ChangeLog
    package let origin: UUID
    private let pool: PGConnectionPool
    private let configuration: ChangeFeedConfiguration
    private let listenerConfiguration: PGConfiguration
    private let logger: Logger
    /// The stack's side: what to read again as a hint arrives, and where deliveries go. Weak: the stack owns
    /// the feed.
    private weak let sink: (any ChangeFeedSink)?
    private let state: Locked<State>
    /// Requests for a read that advances the horizon (one of ``loops`` serves them).
    private let horizonReads: (stream: AsyncStream<Void>, continuation: AsyncStream<Void>.Continuation)
    /// Starts of the trailing read's timer (one of ``loops`` serves them).
    private let trailingTimers: (stream: AsyncStream<Void>, continuation: AsyncStream<Void>.Continuation)
    package let metrics: ChangeFeedMetrics
    /// Failed log reads at `warning` (rate-limited) and the recovery at `notice`.
    private let readOutage: OutageLog
    /// Serialises log reads (one reader at a time; the cursor is advanced in order).
    private let reader = ReadGate()

    package init(
        log: ChangeLog, origin: UUID, pool: PGConnectionPool, session: PGConfiguration,
        configuration: ChangeFeedConfiguration, logger: Logger, sink: any ChangeFeedSink, metrics: MetricsScope = MetricsScope()
    ) {
        self.metrics = ChangeFeedMetrics(metrics)
        self.readOutage = OutageLog(logger: logger, event: "change log read")
        self.sink = sink
        self.log = log
        self.origin = origin
        self.pool = pool
        self.configuration = configuration
        var listener = configuration.listener ?? session
        listener["application_name"] = configuration.applicationName ?? "skyros-listener-\(origin.uuidString.lowercased())"
        self.listenerConfiguration = listener
        self.logger = logger
        self.state = Locked(State(scheduler: ChangeFeedScheduler(
            hintsPerHorizonRead: configuration.hintsPerHorizonRead, horizonReadInterval: configuration.horizonReadInterval,
            now: .now)))
        self.horizonReads = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.trailingTimers = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// The listener's `application_name`.
    package var applicationName: String { self.listenerConfiguration["application_name"] ?? "" }

    package var statistics: ChangeFeedStatistics { self.metrics.statistics }

    /// Whether a log read started after the last hint arrived (see ``ChangeFeedScheduler/hasReadSinceLastHint``).
    package var hasReadSinceLastHint: Bool { self.state.withLock { $0.scheduler.hasReadSinceLastHint } }

    /// The keys that authenticate hints, as the last read found them.
    var hintKey: HintKey? { self.state.withLock { $0.hintKey } }

    /// Creates the log, takes the starting horizon, starts listening, and checks that a notification sent
    /// through the pool reaches the listener. The feed then works while its ``loops`` run.
    /// - Throws: ``DataStackError`` `.changeFeedUnavailable` when none arrives in time (a listener behind a
    ///   transaction-pooling proxy), or the error that stopped the log's creation or first read.
    package func start() async throws {
        try await self.createLog()
        try await self.read()
        let probeChannel = "skyros_probe_\(self.origin.uuidString.lowercased())"
        let channel = self.log.channel
        let (probes, probeArrived) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let handles: @Sendable (PGNotification, ListenerSession) -> Bool = { [weak self] note, session in
            if note.channel == probeChannel {
                probeArrived.yield()
                return true
            }
            guard note.channel == channel, let self else { return false }
            if self.handle(note.payload, on: session) { return true }
            self.state.withLock { $0.forwardedHints += 1 }
            return false
        }
        let listener = try await PGListener.start(
            configuration: self.listenerConfiguration, channels: [channel, probeChannel], logger: self.logger,
            handles: handles)
        self.state.withLock { $0.listener = listener }
        guard await self.receives(probes, sentOn: probeChannel) else {
            await self.stopAndWait()
            throw DataStackError(
                code: .changeFeedUnavailable,
                message: "the change feed's listener received no notification within \(self.configuration.deliveryCheckTimeout): "
                    + "if the store's URL goes through a transaction-pooling proxy (PgBouncer pool_mode = transaction), "
                    + "give the stack a direct URL (configuration.directConnection)")
        }
    }

    /// The feed's background work, each a loop that runs until its task is cancelled: the event loop (hints the
    /// listener's thread handed on, catch-up after a reconnect), the reads that advance the horizon, the
    /// trailing read after a run of hints, and pruning. The stack runs them as child tasks of its background
    /// work and cancels them at shutdown. Empty before ``start()``.
    package var loops: [@Sendable () async -> Void] {
        guard let listener = self.state.withLock({ $0.listener }) else { return [] }
        return [
            { await self.handleEvents(of: listener) }, { await self.readHorizonWhenDue() }, { await self.readAfterHints() },
            { await self.pruneEveryInterval() },
        ]
    }

    /// Handles what the listener yields (in order): forwarded hints, and reconnects (the log is read to catch up).
    private func handleEvents(of listener: PGListener) async {
        for await event in listener.events {
            switch event {
            case .listening: continue
            case .notification(let note):
                await self.handleForwarded(note.payload)
                self.state.withLock { $0.forwardedHints -= 1 }
            case .reconnected:
                self.metrics.catchUps.increment()
                self.logger.debug("change feed listener reconnected; catching up from the change log")
                await self.readUntilDone()
            }
        }
    }

    /// Serves requests for a read that advances the horizon (one at a time; the scheduler marks it running).
    private func readHorizonWhenDue() async {
        for await _ in self.horizonReads.stream {
            await self.readUntilDone()
            self.state.withLock { $0.scheduler.horizonReadFinished() }
        }
    }

    /// Runs the trailing read's timer each time a run of hints starts it: every
    /// ``ChangeFeedConfiguration/horizonReadInterval`` until a read has started after the last hint.
    private func readAfterHints() async {
        let interval = self.configuration.horizonReadInterval
        for await _ in self.trailingTimers.stream {
            timer: while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                if Task.isCancelled { return }
                switch self.state.withLock({ $0.scheduler.trailingTimerFired(now: .now) }) {
                case .end: break timer
                case .wait: continue
                case .read:
                    await self.readUntilDone()
                    self.state.withLock { $0.scheduler.horizonReadFinished() }
                }
            }
        }
    }

    /// Prunes the log every ``ChangeFeedConfiguration/pruneInterval``.
    private func pruneEveryInterval() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: self.configuration.pruneInterval)
            if Task.isCancelled { return }
            await self.prune()
        }
    }

    /// Whether a notification sent on `channel` through the pool arrives in `probes` within
    /// ``ChangeFeedConfiguration/deliveryCheckTimeout`` (sent again every 250 ms: the first may precede the
    /// listener's `LISTEN`). Behind a transaction-pooling proxy the `LISTEN` stays on whichever server
    /// connection ran it, and nothing arrives: stale caches and silent observers, unless caught here.
    private func receives(_ probes: AsyncStream<Void>, sentOn channel: String) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await _ in probes { return true }
                return false
            }
            group.addTask { [configuration] in
                try? await Task.sleep(for: configuration.deliveryCheckTimeout)
                return false
            }
            group.addTask { [pool, logger] in
                while !Task.isCancelled {
                    do {
                        try await pool.withConnection { _ = try await $0.query("SELECT pg_notify(\(channel), '')") }
                    } catch {
                        logger.debug("change feed delivery check: sending failed", metadata: ["skyros.error": "\(error)"])
                    }
                    try? await Task.sleep(for: .milliseconds(250))
                }
                return false
            }
            let received = await group.next() ?? false
            group.cancelAll()
            return received
        }
    }

    /// Creates the change log tables unless they exist.
    package func createLog() async throws {
        try await self.pool.withConnection { try await self.log.createIfNeeded(on: $0) }
    }

    /// Sends a hint that makes every other stack read the log now (position 0: never an entry). After a
    /// destroy and rebuild their next read finds a new log and flushes what they cache. Best effort: the
    /// rebuild has happened either way, and other stacks also notice the new log at any later commit's hint.
    package func announceNewLog() async {
        let payload = "0 \(self.origin.uuidString.lowercased())"
        do {
            try await self.pool.withConnection { _ = try await $0.query("SELECT pg_notify(\(self.log.channel), \(payload))") }
        } catch {
            self.logger.warning("could not announce the rebuilt change log", metadata: ["skyros.error": "\(error)"])
        }
    }

    /// Stops listening and ends its ``loops``; returns once the listener's thread has closed its connection.
    package func stopAndWait() async {
        let listener = self.state.withLock { $0.listener }
        self.stop()
        await listener?.stopAndWait()
    }

    /// Stops listening and ends its ``loops``.
    package func stop() {
        let listener = self.state.withLock { state in
            state.scheduler.stop()
            defer { state.listener = nil }
            return state.listener
        }
        listener?.stop()
        self.horizonReads.continuation.finish()
        self.trailingTimers.continuation.finish()
    }

    /// Handles a hint on the listener's thread as it arrives, unless the event loop must (returns `false`).
    ///
    /// - This stack's own hint is skipped: no task wakes up for it while its writer resumes.
    /// - Another stack's hint carrying its entry, with a tag that verifies (``HintKey``), is delivered here,
    ///   unless hints handed to the event loop wait
    ///   ahead of it. Before delivering, the rows of it that observers of one row watch are read again on the
    ///   listener's connection (unless other notifications wait behind this one: a burst is not held up, and
    ///   its rows are evicted as usual). An observer's event then waits for one task to wake, its own, instead
    ///   of the event loop's first.
    /// - A hint that needs the log read goes to the event loop, which reads it off this thread.
    private func handle(_ payload: String, on session: ListenerSession) -> Bool {
        guard let hint = ChangeLog.Hint(payload) else { return false }
        self.scheduleTrailingRead()
        if hint.origin == self.origin {
            // Every own transaction's hint passes here once (a hint is not sent again); its rows, as captured.
            if let rows = hint.rows, rows > 0 { self.metrics.ownRows.increment(by: rows) }
            return self.needsNoRead(hint)
        }
        guard let key = self.state.withLock({ $0.forwardedHints == 0 && !$0.scheduler.stopped ? $0.hintKey : nil }),
            let entry = hint.entry(verifiedWith: key)
        else { return false }
        return self.needsNoRead(hint) || self.take(entry, committedAt: hint.committedAt, readingAgainOn: session)
    }

    /// Handles a hint the listener's thread handed on, on the event loop.
    private func handleForwarded(_ payload: String) async {
        guard let hint = ChangeLog.Hint(payload) else {
            await self.readUntilDone()
            return
        }
        if self.needsNoRead(hint) { return }
        if let entry = hint.entry(verifiedWith: self.hintKey), self.take(entry, committedAt: hint.committedAt, readingAgainOn: nil) {
            return
        }
        await self.readUntilDone()
    }

    /// Acts on an entry that arrived in its hint: delivers another stack's (with the rows read again for it on
    /// `session`, when given and no notification waits behind it), records this stack's own, skips one
    /// delivered already. Hints arrive in commit order while the listener is connected, and a reconnect
    /// triggers a read that catches up; the read that comes every so often (to advance the horizon) skips what
    /// hints delivered.
    /// `committedAt`: the entry's commit time, microseconds since 1970 by the server's clock, when the hint
    /// carried it (for ``ChangeFeedMetrics``' lag).
    /// - Returns: `false` when the log must be read instead (too many hints without a read).
    private func take(_ entry: ChangeLogEntry, committedAt: Int64?, readingAgainOn session: ListenerSession?) -> Bool {
        switch self.takeFromHint(entry) {
        case .deliver(let advanceHorizon):
            var rows: [RowKey: RemoteRefresh] = [:]
            if let session, session.backlog == 0, let sink = self.sink {
                rows = sink.rowsToReadAgain(entry, on: session)
                if !rows.isEmpty { self.metrics.rowsReadByListener.increment(by: rows.count) }
            }
            self.sink?.deliver(.remote([entry], readAgain: rows))
            // Counted once applied: a reader of the counter then sees the stack's cache updated.
            self.metrics.applied(CollectionOfOne(entry)) { _ in committedAt }
            self.metrics.entries.increment()
            self.metrics.hintEntries.increment()
            if advanceHorizon { self.startHorizonRead() }
            return true
        case .recordOwn(let advanceHorizon):
            if advanceHorizon { self.startHorizonRead() }
            return true
        case .skip:
            return true
        case .read:
            return false
        }
    }

    /// Whether a hint can be skipped: its entry was delivered already, or it is this stack's own (up to
    /// ``ChangeFeedConfiguration/hintsPerHorizonRead`` in a row; a read in the background advances the horizon
    /// when one is due). Own hints are checked on the listener's thread as they arrive (see ``start()``), so
    /// that no task wakes up for them while their writer resumes; the event loop checks the others.
    private func needsNoRead(_ hint: ChangeLog.Hint) -> Bool {
        let (skip, advance) = self.state.withLock { state -> (Bool, Bool) in
            if state.cursor.hasDelivered(hint.position) { return (true, false) }
            guard hint.origin == self.origin, let advance = state.scheduler.skipOwnHint(now: .now) else { return (false, false) }
            return (true, advance)
        }
        if advance { self.startHorizonRead() }
        return skip
    }

    private enum HintAction {
        /// Deliver the entry; `advanceHorizon`: also start a read in the background (see
        /// ``ChangeFeedScheduler``).
        case deliver(advanceHorizon: Bool)
        /// This stack's own entry: recorded by the cursor (so the next read skips it), never delivered — the
        /// stack applied its own commit already.
        case recordOwn(advanceHorizon: Bool)
        case skip
        /// Too many hint entries without a read (reads keep failing): read now, in line.
        case read
    }

    /// Makes sure a read follows the last hint of a run, about ``ChangeFeedConfiguration/horizonReadInterval``
    /// after it (see ``ChangeFeedScheduler``): starts the trailing read's timer (one of ``loops``) unless it runs.
    private func scheduleTrailingRead() {
        if self.state.withLock({ $0.scheduler.hintArrived(now: .now) }) { self.trailingTimers.continuation.yield() }
    }

    /// Has one of ``loops`` read the log off the listener's loop (so the next hint is not held up by it).
    private func startHorizonRead() {
        self.horizonReads.continuation.yield()
    }

    /// Records an entry that arrived in its hint.
    private func takeFromHint(_ entry: ChangeLogEntry) -> HintAction {
        self.state.withLock { state in
            guard state.scheduler.takesHintEntries else { return .read }
            guard state.cursor.deliverFromHint(position: entry.position, xid: entry.xid) else { return .skip }
            let advance = state.scheduler.tookHintEntry(now: .now)
            // An own entry gets here once `hintsPerHorizonRead` own hints in a row were skipped without a read
            // (see `needsNoRead`); delivering it as remote would evict the stack's own rows.
            if entry.origin == self.origin { return .recordOwn(advanceHorizon: advance) }
            return .deliver(advanceHorizon: advance)
        }
    }

    /// Reads the log until a read succeeds (the pool may be reconnecting) or the feed stops.
    private func readUntilDone() async {
        var attempt = 0
        while !Task.isCancelled {
            do {
                try await self.read()
                self.readOutage.recovered()
                return
            } catch {
                attempt += 1
                let delay = Self.readRetries.jitteredDelay(afterAttempt: attempt)
                self.readOutage.failed(error, retryIn: delay)
                try? await Task.sleep(for: delay)
            }
        }
    }

    /// The pauses between failed log reads: 20 ms doubling up to 1 s.
    static let readRetries = RetryPolicy(initialDelay: .milliseconds(20), maximumDelay: .seconds(1))

    /// Reads the entries the cursor has not seen (its ``ChangeCursor/window``) and delivers the new ones from
    /// other stacks.
    func read() async throws {
        try await self.reader.run {
            let window = self.state.withLock { state in
                state.scheduler.readStarted(now: .now)
                return state.cursor.window
            }
            let (entries, committed, snapshot, pruned, logID, hintKey) = try await self.pool.withConnection {
                try await self.log.read(after: window, excluding: self.origin, on: $0)
            }
            let outcome = self.state.withLock { state -> ChangeCursor.Outcome in
                state.hintKey = hintKey
                state.scheduler.readSucceeded(now: .now)
                return state.cursor.advance(entries: entries, snapshot: snapshot, prunedThrough: pruned, logID: logID)
            }
            self.metrics.logReads.increment()
            if hintKey == nil {
                // The state table lacks the hint keys: it was created again by an earlier version (a rebuild
                // during a rolling deploy), and commits that tag their hint fail until the keys are back. A failure
                // here (a role without the right to alter the table) must not stop the feed's reads.
                self.logger.info("the change log's state table has no hint keys; adding them")
                do {
                    try await self.createLog()
                } catch {
                    self.logger.warning("could not add the hint keys to the change log's state table", metadata: ["skyros.error": "\(error)"])
                }
            }
            switch outcome {
            case .gap:
                self.metrics.flushes.increment()
                self.logger.info("change log entries were pruned before this stack read them, or the log was replaced; flushing the cache")
                self.sink?.deliver(.flush)
            case .entries(let fresh):
                let remote = fresh.filter { $0.origin != self.origin }
                guard !remote.isEmpty else { return }
                self.sink?.deliver(.remote(remote))
                self.metrics.applied(remote) { committed[$0.position] }
                self.metrics.entries.increment(by: remote.count)
            }
        }
    }

    /// Prunes the log now.
    package func prune(olderThan age: Duration, keepingAtMost maxEntries: Int) async throws -> Int {
        try await self.pool.withConnection { try await self.log.prune(olderThan: age, keepingAtMost: maxEntries, on: $0) }
    }

    private func prune() async {
        do {
            let deleted = try await self.prune(olderThan: self.configuration.retention, keepingAtMost: self.configuration.maximumEntries)
            if deleted > 0 { self.logger.debug("change log pruned", metadata: ["skyros.sync.pruned": "\(deleted)"]) }
        } catch {
            self.logger.debug("change log pruning failed", metadata: ["skyros.error": "\(error)"])
        }
    }
}

/// An async mutual exclusion: one `run` body at a time, in arrival order.
final class ReadGate: Sendable {
    private let state = Locked<(busy: Bool, waiters: Deque<CheckedContinuation<Void, Never>>)>((false, []))

    func run<R>(_ body: () async throws -> R) async throws -> R {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let acquired = self.state.withLock { state -> Bool in
                if state.busy {
                    state.waiters.append(continuation)
                    return false
                }
                state.busy = true
                return true
            }
            if acquired { continuation.resume() }
        }
        defer {
            let next = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
                if state.waiters.isEmpty {
                    state.busy = false
                    return nil
                }
                return state.waiters.removeFirst()
            }
            next?.resume()
        }
        return try await body()
    }
}
