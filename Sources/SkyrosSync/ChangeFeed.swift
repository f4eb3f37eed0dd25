import Foundation
import Logging
import SkyrosPostgres
import SkyrosStore
import SkyrosStack

/// Counters of a stack's change feed.
package struct ChangeFeedStatistics: Sendable, Hashable {
    /// Log reads done.
    package var reads = 0
    /// Entries from other stacks delivered (counted once the stack has applied them).
    package var remoteEntries = 0
    /// Of those, entries that arrived in their hint (no log read).
    package var hintEntries = 0
    /// Times the listener reconnected and caught up from the log.
    package var catchUps = 0
    /// Times a gap (pruned, unseen entries) forced a cache flush.
    package var flushes = 0
    /// Cached rows refreshed from an announced row, or from the row read again on the listener's connection,
    /// instead of evicted.
    package var refreshedRows = 0
    /// Rows an observer of one row watches, read again on the listener's connection as their hint arrived.
    package var rowsReadByListener = 0

    package init(
        reads: Int = 0, remoteEntries: Int = 0, hintEntries: Int = 0, catchUps: Int = 0, flushes: Int = 0,
        refreshedRows: Int = 0, rowsReadByListener: Int = 0
    ) {
        (self.reads, self.remoteEntries, self.hintEntries, self.catchUps) = (reads, remoteEntries, hintEntries, catchUps)
        (self.flushes, self.refreshedRows, self.rowsReadByListener) = (flushes, refreshedRows, rowsReadByListener)
    }
}

/// What the feed hands the stack.
package enum ChangeFeedDelivery: Sendable {
    /// Entries committed by other stacks, in position order, with rows read again since (see
    /// ``ChangeFeed/ReadAgain``).
    case remote([ChangeLogEntry], readAgain: [RowKey: RemoteRefresh] = [:])
    /// Entries were lost: drop the cache and refetch everything.
    case flush
}

/// Listens for change-log hints and reads the log (catching up after reconnects), delivering other stacks'
/// commits in order.
package final class ChangeFeed: Sendable {
    private struct State: Sendable {
        var cursor = ChangeCursor()
        var listener: PostgresListener?
        var tasks: [Task<Void, Never>] = []
        /// How many of this stack's own hints were skipped since the last read (bounded, so the re-read window
        /// does not grow without end).
        var skippedSinceRead = 0
        /// Entries delivered from hints since the last read (bounded like `skippedSinceRead`).
        var hintsSinceRead = 0
        /// When the last read succeeded (hints since then advance the horizon with a read at most once per
        /// ``ChangeFeedConfiguration/horizonReadInterval``).
        var lastRead = ContinuousClock.now
        /// A background read started to advance the horizon is running.
        var horizonReadRunning = false
        var horizonRead: Task<Void, Never>?
        /// The read that follows the last of a run of hints is scheduled (see `scheduleTrailingRead()`).
        var trailingRead: Task<Void, Never>?
        /// When the last hint arrived, and when the last read started: a read that started after the last hint
        /// moved the horizon past its entry.
        var lastHint = ContinuousClock.now
        var lastReadStarted = ContinuousClock.now
        var stopped = false
        /// Hints on the log's channel handed to the event loop and not yet handled there: while there are any,
        /// the listener's thread hands it the next ones too, so hints are handled in the order they arrived.
        var forwardedHints = 0
        /// The keys that authenticate hints carrying their entry, from the last read (see ``HintKey``).
        var hintKey: HintKey?
    }

    /// Reads again, on the listener's connection and thread, the rows of another stack's entry that an observer
    /// of one row watches, as the entry's hint arrives (the stack supplies it: which rows are observed, cached
    /// and not pending). Delivered with the entry, they refresh the cache instead of being evicted, so the
    /// observer's next read is served from memory: its event needs no pool connection, no hand-off to that
    /// connection's thread and back, and the listening backend that just sent the notification is the one that
    /// answers.
    package typealias ReadAgain = @Sendable (ChangeLogEntry, ListenerSession) -> [RowKey: RemoteRefresh]

    package let log: ChangeLog
    package let origin: UUID
    private let pool: ConnectionPool
    private let configuration: ChangeFeedConfiguration
    private let listenerConfiguration: PostgresConfiguration
    private let logger: Logger
    /// Applies a delivery to the stack, on the thread that calls it (the listener's, or the event loop's).
    private let deliver: @Sendable (ChangeFeedDelivery) -> Void
    private let readsAgain: ReadAgain?
    private let state = Locked(State())
    package let metrics = ChangeFeedMetrics()
    /// Serialises log reads (one reader at a time; the cursor is advanced in order).
    private let reader = ReadGate()

    package init(
        log: ChangeLog, origin: UUID, pool: ConnectionPool, session: PostgresConfiguration,
        configuration: ChangeFeedConfiguration, logger: Logger, readAgain: ReadAgain? = nil,
        deliver: @escaping @Sendable (ChangeFeedDelivery) -> Void
    ) {
        self.readsAgain = readAgain
        self.log = log
        self.origin = origin
        self.pool = pool
        self.configuration = configuration
        var listener = configuration.listener ?? session
        listener["application_name"] = configuration.applicationName ?? "skyros-listener-\(origin.uuidString.lowercased())"
        self.listenerConfiguration = listener
        self.logger = logger
        self.deliver = deliver
    }

    /// The listener's `application_name`.
    package var applicationName: String { self.listenerConfiguration["application_name"] ?? "" }

    package var statistics: ChangeFeedStatistics { self.metrics.statistics }

    /// The keys that authenticate hints, as the last read found them.
    var hintKey: HintKey? { self.state.withLock { $0.hintKey } }

    /// Creates the log, takes the starting horizon, starts listening, and checks that a notification sent
    /// through the pool reaches the listener.
    /// - Throws: ``DataStackError`` `.changeFeedUnavailable` when none arrives in time (a listener behind a
    ///   transaction-pooling proxy), or the error that stopped the log's creation or first read.
    package func start() async throws {
        try await self.createLog()
        try await self.read()
        let probeChannel = "skyros_probe_\(self.origin.uuidString.lowercased())"
        let channel = self.log.channel
        let handles: @Sendable (PostgresNotification, ListenerSession) -> Bool = { [weak self] note, session in
            guard note.channel == channel, let self else { return false }
            if self.handle(note.payload, on: session) { return true }
            self.state.withLock { $0.forwardedHints += 1 }
            return false
        }
        let listener = try await PostgresListener.start(
            configuration: self.listenerConfiguration, channels: [channel, probeChannel], logger: self.logger,
            handles: handles)
        let (probes, probeArrived) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let events = Task { [weak self] in
            for await event in listener.events {
                guard let self else { return }
                switch event {
                case .listening: continue
                case .notification(let note) where note.channel == probeChannel:
                    probeArrived.yield()
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
        let pruning = Task { [weak self, configuration] in
            while !Task.isCancelled {
                try? await Task.sleep(for: configuration.pruneInterval)
                guard let self, !Task.isCancelled else { return }
                await self.prune()
            }
        }
        self.state.withLock {
            $0.listener = listener
            $0.tasks = [events, pruning]
        }
        guard await self.receives(probes, sentOn: probeChannel) else {
            self.stop()
            throw DataStackError(
                code: .changeFeedUnavailable,
                message: "the change feed's listener received no notification within \(self.configuration.deliveryCheckTimeout): "
                    + "if the store's URL goes through a transaction-pooling proxy (PgBouncer pool_mode = transaction), "
                    + "give the stack a direct URL (configuration.directConnection)")
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

    /// Stops listening.
    package func stop() {
        let (listener, tasks) = self.state.withLock { state in
            defer {
                state.listener = nil
                state.tasks = []
                state.horizonRead = nil
                state.trailingRead = nil
                state.stopped = true
            }
            return (state.listener, state.tasks + [state.horizonRead, state.trailingRead].compactMap { $0 })
        }
        listener?.stop()
        tasks.forEach { $0.cancel() }
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
        if hint.origin == self.origin { return self.needsNoRead(hint) }
        guard let key = self.state.withLock({ $0.forwardedHints == 0 && !$0.stopped ? $0.hintKey : nil }),
            let entry = hint.entry(verifiedWith: key)
        else { return false }
        return self.needsNoRead(hint) || self.take(entry, readingAgainOn: session)
    }

    /// Handles a hint the listener's thread handed on, on the event loop.
    private func handleForwarded(_ payload: String) async {
        guard let hint = ChangeLog.Hint(payload) else {
            await self.readUntilDone()
            return
        }
        if self.needsNoRead(hint) { return }
        if let entry = hint.entry(verifiedWith: self.hintKey), self.take(entry, readingAgainOn: nil) { return }
        await self.readUntilDone()
    }

    /// Acts on an entry that arrived in its hint: delivers another stack's (with the rows read again for it on
    /// `session`, when given and no notification waits behind it), records this stack's own, skips one
    /// delivered already. Hints arrive in commit order while the listener is connected, and a reconnect
    /// triggers a read that catches up; the read that comes every so often (to advance the horizon) skips what
    /// hints delivered.
    /// - Returns: `false` when the log must be read instead (too many hints without a read).
    private func take(_ entry: ChangeLogEntry, readingAgainOn session: ListenerSession?) -> Bool {
        switch self.takeFromHint(entry) {
        case .deliver(let advanceHorizon):
            var rows: [RowKey: RemoteRefresh] = [:]
            if let session, session.backlog == 0, let readAgain = self.readsAgain {
                rows = readAgain(entry, session)
                if !rows.isEmpty { self.metrics.rowsReadByListener.increment(by: rows.count) }
            }
            self.deliver(.remote([entry], readAgain: rows))
            // Counted once applied: a reader of the counter then sees the stack's cache updated.
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
            guard hint.origin == self.origin, state.skippedSinceRead < self.configuration.hintsPerHorizonRead else { return (false, false) }
            state.skippedSinceRead += 1
            return (true, self.claimHorizonRead(&state))
        }
        if advance { self.startHorizonRead() }
        return skip
    }

    /// Whether a read to advance the horizon is due (and marks one as running): hints arrived, and the last
    /// read is ``ChangeFeedConfiguration/horizonReadInterval`` old or
    /// ``ChangeFeedConfiguration/hintsPerHorizonRead`` hints ago.
    ///
    /// Hints are acted on without reading the log; this read keeps a catch-up after a reconnect starting from
    /// recent entries and the cursor's set of positions delivered from hints small. Once a second, not every
    /// hundred hints (as before): that cost each process a query per hundred commits anywhere, and its CPU on
    /// the server delayed the commits around it (the slowest 1% of the observer benchmark's events).
    private func claimHorizonRead(_ state: inout State) -> Bool {
        guard !state.horizonReadRunning else { return false }
        let hints = state.hintsSinceRead + state.skippedSinceRead
        guard hints > 0,
            hints >= self.configuration.hintsPerHorizonRead || ContinuousClock.now - state.lastRead >= self.configuration.horizonReadInterval
        else { return false }
        state.horizonReadRunning = true
        return true
    }

    private enum HintAction {
        /// Deliver the entry; `advanceHorizon`: also start a read in the background (see
        /// `claimHorizonRead(_:)`).
        case deliver(advanceHorizon: Bool)
        /// This stack's own entry: recorded by the cursor (so the next read skips it), never delivered — the
        /// stack applied its own commit already.
        case recordOwn(advanceHorizon: Bool)
        case skip
        /// Too many hint entries without a read (reads keep failing): read now, in line.
        case read
    }

    /// Makes sure a read follows the last hint of a run, about ``ChangeFeedConfiguration/horizonReadInterval``
    /// after it (and at most one read per interval while hints keep coming, counting the reads hints start).
    ///
    /// Hints deliver entries without moving the horizon; only reads move it. Without this read, the horizon
    /// stayed below the last entries of a burst until the next hint, and when the next hint came after the
    /// log's retention, pruning those entries (delivered long ago) looked like entries lost: every stack
    /// flushed its cache and re-ran its observers.
    private func scheduleTrailingRead() {
        let interval = self.configuration.horizonReadInterval
        self.state.withLock { state in
            state.lastHint = .now
            guard state.trailingRead == nil, !state.stopped else { return }
            state.trailingRead = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    guard let self, !Task.isCancelled else { return }
                    let due = self.state.withLock { state -> Bool? in
                        guard state.lastReadStarted <= state.lastHint else {
                            state.trailingRead = nil
                            return nil
                        }
                        guard !state.horizonReadRunning, ContinuousClock.now - state.lastRead >= interval else { return false }
                        state.horizonReadRunning = true
                        return true
                    }
                    guard let due else { return }
                    if due {
                        await self.readUntilDone()
                        self.state.withLock { $0.horizonReadRunning = false }
                    }
                }
            }
        }
    }

    /// Reads the log off the listener's loop (so the next hint is not held up by it); ``stop()`` cancels it.
    private func startHorizonRead() {
        let task = Task { [weak self] in
            await self?.readUntilDone()
            self?.state.withLock { $0.horizonReadRunning = false }
        }
        self.state.withLock { state in
            if state.stopped { task.cancel() } else { state.horizonRead = task }
        }
    }

    /// Records an entry that arrived in its hint.
    private func takeFromHint(_ entry: ChangeLogEntry) -> HintAction {
        self.state.withLock { state in
            guard state.hintsSinceRead < 2 * self.configuration.hintsPerHorizonRead else { return .read }
            guard state.cursor.deliverFromHint(position: entry.position, xid: entry.xid) else { return .skip }
            state.hintsSinceRead += 1
            let advance = self.claimHorizonRead(&state)
            // An own entry gets here once `hintsPerHorizonRead` own hints in a row were skipped without a read
            // (see `needsNoRead`); delivering it as remote would evict the stack's own rows.
            if entry.origin == self.origin { return .recordOwn(advanceHorizon: advance) }
            return .deliver(advanceHorizon: advance)
        }
    }

    /// Reads the log until a read succeeds (the pool may be reconnecting) or the feed stops.
    private func readUntilDone() async {
        var delay = Duration.milliseconds(20)
        while !Task.isCancelled {
            do {
                try await self.read()
                return
            } catch {
                self.logger.debug("change log read failed; retrying", metadata: ["skyros.error": "\(error)"])
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(1))
            }
        }
    }

    /// Reads the entries the cursor has not seen (its ``ChangeCursor/window``) and delivers the new ones from
    /// other stacks.
    func read() async throws {
        try await self.reader.run {
            let window = self.state.withLock { state in
                state.lastReadStarted = .now
                return state.cursor.window
            }
            let (entries, snapshot, pruned, logID, hintKey) = try await self.pool.withConnection {
                try await self.log.read(after: window, excluding: self.origin, on: $0)
            }
            let outcome = self.state.withLock { state -> ChangeCursor.Outcome in
                state.hintKey = hintKey
                state.skippedSinceRead = 0
                state.hintsSinceRead = 0
                state.lastRead = .now
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
                self.deliver(.flush)
            case .entries(let fresh):
                let remote = fresh.filter { $0.origin != self.origin }
                guard !remote.isEmpty else { return }
                self.deliver(.remote(remote))
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
    private let state = Locked<(busy: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

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
