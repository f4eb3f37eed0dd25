import DequeModule
import Foundation
import Logging
import Metrics
import SkyrosPostgres
import SkyrosStore

/// The relay of a schema's logical-decoding capture: one stack at a time streams the schema's slot, turns each
/// committed transaction into a change-log entry (``RelayAssembler``), writes the entries in commit order and
/// sends one hint per batch, and only then confirms the slot's position.
///
/// **Election.** Every stack on the schema runs ``run()``: it tries a session advisory lock on a connection of
/// its own every ``electionInterval`` and relays while it holds it. A relay that dies (its process killed, its
/// connection cut) releases the lock with its session, and the next stack to try takes over from the slot's
/// confirmed position. The slot is the guarantee behind the lock: PostgreSQL lets one connection stream a slot
/// at a time.
///
/// **Nothing lost, nothing twice.** The slot's `confirmed_flush_lsn` moves only after a batch's entries have
/// committed, so a relay that dies leaves the unconfirmed transactions to its successor. The log's state row
/// holds the end of the last transaction written (`relayed_through`, updated in the same transaction as the
/// entries, under a row lock): a transaction the successor receives again is skipped, not logged twice.
///
/// **Batches.** A transaction that arrives while the relay is idle is written and hinted at once. Under a steady
/// stream, the writer takes everything that arrived since its last batch, at most once per ``hintWindow`` (sooner
/// when a whole batch, ``RelayQueue/batchLimit``, is waiting): one transaction and one hint carry a window's
/// commits, so the cost of hints to every listening stack follows windows, not commits.
package final class ChangeRelay: Sendable {
    let log: ChangeLog
    /// The schema the relayed tables are in (the assembler keeps only those).
    let schema: String
    let slot: String
    let replication: PGConfiguration
    let pool: PGConnectionPool
    let logger: Logger
    /// How often a stack that does not relay tries the relay's lock (plus up to 100 ms of jitter).
    let electionInterval: Duration
    /// Under a steady stream of commits, the least time between the starts of two batches (see "Batches").
    let hintWindow: Duration

    private let state = Locked(State())
    private let transactions: Counter
    private let failures: Counter
    private let slotsRecreated: Counter
    private let lagBytes: Gauge
    /// Failures at `warning` (rate-limited), and the relay's recovery at `notice`.
    private let outage: OutageLog
    /// The pauses between elections after a failure: 100 ms doubling up to 5 s, with jitter (the stacks of a
    /// schema, cut off by one restart, do not all try at once).
    static let restarts = RetryPolicy(initialDelay: .milliseconds(100), maximumDelay: .seconds(5), jitter: 0.2)

    private struct State {
        var lastLagWarning: ContinuousClock.Instant?
    }

    /// Retained WAL past which the relay logs a warning (at most once a minute).
    static let lagWarningBytes: Int64 = 256 << 20

    /// - Parameter applicationName: the replication connection's `application_name` (operators find the relaying
    ///   process by it in `pg_stat_replication`).
    package init(
        log: ChangeLog, schema: String, slot: String, replication: PGConfiguration, applicationName: String, pool: PGConnectionPool,
        logger: Logger, electionInterval: Duration = .milliseconds(400), hintWindow: Duration = .milliseconds(10),
        metrics: MetricsScope = MetricsScope()
    ) {
        self.transactions = metrics.counter("skyros.relay.transactions")
        self.failures = metrics.counter("skyros.relay.failures")
        self.slotsRecreated = metrics.counter("skyros.relay.slots_recreated")
        self.lagBytes = metrics.gauge("skyros.relay.lag_bytes")
        self.outage = OutageLog(logger: logger, event: "change relay")
        var replication = replication
        replication["application_name"] = applicationName
        (self.log, self.schema, self.slot, self.replication, self.pool) = (log, schema, slot, replication, pool)
        self.logger = logger
        self.electionInterval = electionInterval
        self.hintWindow = hintWindow
    }


    /// Stands for election and relays while elected, until the task is cancelled. A failure (the server
    /// restarted, the slot was dropped) is counted (`skyros.relay.failures`), logged at `warning` (the first,
    /// then at most one line per 10 s with the count; the recovery at `notice`, see ``OutageLog``), and retried
    /// with backoff up to 5 s (``restarts``).
    package func run() async {
        var attempt = 0
        while !Task.isCancelled {
            do {
                try await self.standForElection()
                attempt = 0
            } catch {
                if Task.isCancelled { return }
                self.failures.increment()
                attempt += 1
                let delay = Self.restarts.jitteredDelay(afterAttempt: attempt)
                self.outage.failed(error, retryIn: delay, metadata: ["skyros.capture.slot": "\(self.slot)"])
                try? await Task.sleep(for: delay)
            }
        }
    }

    /// Takes the relay's lock on a connection of its own, then relays while it holds it. While another stack
    /// holds it, the lock is tried again every ``electionInterval`` (with jitter), the connection idle in
    /// between: a session blocked in `pg_advisory_lock` would sit in a statement whose snapshot holds back
    /// vacuum's horizon and every `CREATE INDEX CONCURRENTLY` of the database for as long as it waits. A relay
    /// that dies (its process killed, its connection cut) releases the lock with its session. The slot stays the
    /// guarantee: only one connection may stream it.
    private func standForElection() async throws {
        let lock = try await PGConnection.connect(to: self.replication, logger: self.logger)
        do {
            while !Task.isCancelled {
                let held = try await lock.query("SELECT pg_try_advisory_lock(hashtextextended(\("skyros relay " + self.slot), 0))")
                    .first?.decode(Bool.self, at: 0) ?? false
                self.outage.recovered()
                if held {
                    try await self.relayOnce()
                    break
                }
                try? await Task.sleep(for: self.electionInterval + .milliseconds(Int64.random(in: 0...100)))
            }
        } catch {
            await lock.close()
            throw error
        }
        await lock.close()
    }

    /// Streams the slot until an error or cancellation. The previous relay's server process may still hold the
    /// slot for a moment after its lock was released (55006): that is retried for 10 s.
    private func relayOnce() async throws {
        try await self.recreateSlotIfLost()
        let connection = try await PGReplicationConnection.connect(to: LogicalCapture.replicationSession(self.replication), logger: self.logger)
        let stream: PGReplicationStream
        do {
            let deadline = ContinuousClock.now + .seconds(10)
            while true {
                do {
                    stream = try await connection.startReplication(slot: self.slot, publications: [self.slot], messages: true)
                    break
                } catch let error as PGError where error.sqlState == .objectInUse && ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
        } catch {
            await connection.close()
            throw error
        }
        self.logger.info("this stack relays its schema's changes from the WAL", metadata: ["skyros.capture.slot": "\(self.slot)"])
        let queue = RelayQueue()
        defer {
            queue.finish()
        }
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await self.read(stream, into: queue) }
                group.addTask { try await self.write(from: queue, confirmingOn: stream) }
                try await group.next()
                group.cancelAll()
            }
        } catch {
            await stream.stop()
            throw error
        }
        await stream.stop()
    }

    /// Replaces a slot that PostgreSQL invalidated (`wal_status = 'lost'`: it kept more WAL than
    /// `max_slot_wal_keep_size` allows, so changes were removed before they were relayed) or that was dropped
    /// while the schema's publication remains. The changes committed in between cannot be read any more, so once
    /// the new slot exists the relay writes one entry marking every published table as truncated: every stack
    /// drops its cached rows of those tables and its observers of them run their queries again, as after a
    /// `TRUNCATE`. Logged at `error` and counted (`skyros.relay.slots_recreated`). Without the publication (the
    /// capture was removed, `migrate capture drop`) nothing is recreated: the relay keeps failing until the
    /// stacks restart and install the capture again.
    private func recreateSlotIfLost() async throws {
        let capture = LogicalCapture(log: self.log)
        let lost = try await self.pool.withConnection { connection -> (status: String, confirmed: String?)? in
            let row = try await connection.query("""
                SELECT s.wal_status, s.confirmed_flush_lsn::text, EXISTS (SELECT FROM pg_publication WHERE pubname = \(self.slot)),
                    s.slot_name IS NOT NULL
                FROM (SELECT) AS one
                LEFT JOIN pg_replication_slots AS s ON s.slot_name = \(self.slot) AND s.database = current_database()
                """)[0]
            // A slot another session is still creating has no `wal_status` yet: it is not lost (streaming it
            // fails as "in use" until it is ready, and is retried).
            let status = try row.decode(Bool.self, at: 3) ? try row.decode(String?.self, at: 0) ?? "creating" : "missing"
            guard try row.decode(Bool.self, at: 2), status == "lost" || status == "missing" else { return nil }
            return (status, try row.decode(String?.self, at: 1))
        }
        guard let lost else { return }
        let (position, tables) = try await self.pool.withConnection { connection -> (LSN, [String]) in
            if lost.status == "lost" {
                _ = try await connection.query("""
                    SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
                    WHERE slot_name = \(self.slot) AND database = current_database() AND wal_status = 'lost' AND NOT active
                    """)
            }
            // Everything committed before this position may be lost; the new slot starts after it.
            let position = try await connection.query("SELECT pg_current_wal_lsn()")[0].decode(LSN.self, at: 0)
            try await LogicalCapture.ensureSlot(self.slot, replication: self.replication, on: connection, logger: self.logger)
            return (position, try await capture.publishedTables(self.slot, schema: self.schema, on: connection))
        }
        self.slotsRecreated.increment()
        self.logger.error(
            "the change capture's replication slot was lost; recreated it, and every stack drops its cached rows of the schema's tables",
            metadata: [
                "skyros.capture.slot": "\(self.slot)",
                "skyros.capture.slot_status": "\(lost.status == "lost" ? "invalidated (max_slot_wal_keep_size)" : "dropped")",
                "skyros.capture.relayed_through": "\(lost.confirmed ?? "unknown")", "skyros.capture.resumed_after": "\(position)",
            ])
        let marker = RelayedTransaction(
            endLSN: position, committedAt: PGTimestamp(Date()), origin: ChangeCapture.foreignOrigin,
            changes: tables.map { LoggedRowChange(table: $0, type: PGType.text.rawValue, id: "", kind: "t", version: nil) })
        if !marker.changes.isEmpty { try await self.write([marker]) }
    }

    /// Decodes the stream into transactions for the writer; confirms a keepalive's position when nothing is
    /// open, queued or being written (the slot then advances past WAL that holds none of its tables' changes).
    private func read(_ stream: PGReplicationStream, into queue: RelayQueue) async throws {
        var assembler = RelayAssembler(schema: self.schema)
        for try await message in stream.messages {
            switch message {
            case .data(let data):
                if let transaction = try assembler.apply(try PgOutputMessage(data.payload)) { queue.append(transaction) }
            case .keepalive(let keepalive):
                // Every transaction committed before the keepalive's position is queued or written by now (the
                // stream sends in commit order): its position may be confirmed once they are all written. A
                // keepalive that comes while they are not is kept for the writer, which confirms it when the
                // queue empties: the server sends the next one only much later once its last ping was answered.
                if !assembler.isInTransaction, let idle = queue.idleOrKeep(keepalive.walEnd) { stream.confirm(flushedThrough: idle) }
                self.recordLag(Int64(bitPattern: keepalive.walEnd.rawValue &- stream.confirmedFlush.rawValue))
            }
            if Task.isCancelled { return }
        }
    }

    /// Writes each batch the reader queued, then confirms its end. A batch after one that found more queued
    /// behind it waits until ``hintWindow`` has passed since that one started (see "Batches").
    private func write(from queue: RelayQueue, confirmingOn stream: PGReplicationStream) async throws {
        let clock = ContinuousClock()
        var pacing = RelayPacing(window: self.hintWindow)
        for await _ in queue.signals {
            while true {
                if let due = pacing.nextBatchDue(queued: queue.count), due > clock.now {
                    try await Task.sleep(until: due, clock: clock)
                }
                guard let batch = queue.takeBatch() else { break }
                pacing.started(at: clock.now)
                // Logical messages are not filtered by publication: every stack's commit in the database names its
                // writer, and one in another schema arrives here as a transaction with no change of this schema's.
                // Such a batch needs no write, only its position confirmed.
                if batch.contains(where: { !$0.changes.isEmpty }) { try await self.write(batch) }
                let kept = queue.finishedBatch()
                pacing.finished(queuedBehind: queue.count)
                if let end = batch.last?.endLSN { stream.confirm(flushedThrough: end) }
                if let kept { stream.confirm(flushedThrough: kept) }
            }
        }
    }

    /// One batch: the entries not yet relayed, in commit order, the new `relayed_through`, and its hints, in one
    /// transaction of two round trips (pipelines). The first locks the relay's state row, reads
    /// `relayed_through` and inserts the entries past it (a relay that lost its election may have written some of
    /// them: the insert's own filter, under the row lock, skips those); the second sends the hints, which carry
    /// the positions the insert returned, moves `relayed_through` and commits.
    ///
    /// A commit reaches the WAL, and so the relay, a moment before other sessions' snapshots see it: the writing
    /// backend flushes its commit record, then marks the transaction committed for snapshots. A stack that reads
    /// a row again when a hint arrives could read it as it was before that commit, and take the hint as handled.
    /// So the first pipeline also asks whether any of the batch's writers is still in progress for a new
    /// snapshot, and the hints wait until none is.
    func write(_ batch: [RelayedTransaction]) async throws {
        guard let end = batch.last?.endLSN else { return }
        let state = self.log.stateTableQualified
        let candidates = batch.filter { !$0.changes.isEmpty }
        let json = candidates.map { LoggedRowChange.json($0.changes) }
        var binds: [PGValue] = []
        var rows: [String] = []
        for (index, transaction) in candidates.enumerated() {
            let p = index * 4
            rows.append("(\(index), $\(p + 1)::pg_lsn, $\(p + 2)::uuid, $\(p + 3), to_timestamp($\(p + 4)::float8 / 1000000))")
            binds += [
                PGValue(type: .text, text: transaction.endLSN.description),
                PGValue(type: .text, text: transaction.origin.uuidString.lowercased()), PGValue(type: .text, text: json[index]),
                PGValue(type: .text, text: String(Self.unixMicroseconds(transaction.committedAt))),
            ]
        }
        let written = try await self.pool.withConnection { connection -> Int in
            do {
                let writers = Array(Set(candidates.filter { $0.xid != 0 }.map { Int64($0.xid) }))
                var first: [PGQuery] = ["BEGIN", "SELECT relayed_through FROM \(unsafeRaw: state) FOR UPDATE", Self.writersInProgress(writers)]
                if !candidates.isEmpty {
                    first.append(
                        PGQuery(
                            unsafeSQL: "INSERT INTO \(self.log.logTable) (origin, changes, changed_at) SELECT b.origin, b.changes, b.changed_at "
                                + "FROM (VALUES \(rows.joined(separator: ", "))) AS b(ord, lsn, origin, changes, changed_at) "
                                + "WHERE b.lsn > (SELECT relayed_through FROM \(state)) ORDER BY b.ord RETURNING position, xid::text",
                            binds: binds))
                }
                let read = try await connection.pipeline(first)
                let relayed = try read[1].first?.decode(LSN.self, at: 0) ?? .invalid
                var inProgress = try read[2].first?.decode(Int64.self, at: 0) ?? 0
                // A writer is marked committed a moment after its commit record is flushed: polled from 200 µs,
                // doubling to 10 ms. A wait past a second is not that moment: it is logged (once per batch).
                let waitStarted = ContinuousClock.now
                var pause = Duration.microseconds(200)
                var warned = false
                while inProgress > 0 {
                    try await Task.sleep(for: pause)
                    pause = min(pause * 2, .milliseconds(10))
                    inProgress = try await connection.query(Self.writersInProgress(writers)).first?.decode(Int64.self, at: 0) ?? 0
                    if inProgress > 0, !warned, ContinuousClock.now - waitStarted > .seconds(1) {
                        warned = true
                        self.logger.warning(
                            "the relay has waited more than a second for writers whose commits it decoded to be visible",
                            metadata: ["skyros.capture.slot": "\(self.slot)", "skyros.capture.writers": "\(writers)"])
                    }
                }
                let fresh = candidates.indices.filter { candidates[$0].endLSN > relayed }
                var last: [PGQuery] = []
                if !fresh.isEmpty {
                    let inserted = read[3]
                    let positions = try inserted.map { try $0.decode(Int64.self, at: 0) }
                    guard positions.count == fresh.count, let xid = try inserted.first?.decode(String.self, at: 1) else {
                        throw CaptureError(message: "the relay's insert into \(self.log.logTable) returned \(positions.count) rows for \(fresh.count) entries")
                    }
                    last = self.hints(fresh.map { candidates[$0] }, json: fresh.map { json[$0] }, positions: positions, xid: xid)
                }
                last.append("UPDATE \(unsafeRaw: state) SET relayed_through = greatest(relayed_through, \(end))")
                last.append("COMMIT")
                _ = try await connection.pipeline(last)
                return fresh.count
            } catch {
                _ = try? await connection.rollback()
                throw error
            }
        }
        if written > 0 { self.transactions.increment(by: written) }
    }

    /// How many of `writers` (32-bit transaction ids) a new snapshot does not see committed yet. Each becomes the
    /// 64-bit id nearest the snapshot's `xmax` with those low 32 bits (a writer decoded just now is within 2^31
    /// of it), and `pg_visible_in_snapshot` decides: in progress is listed in the snapshot, or at or past its
    /// `xmax`, which is where the last writer to commit sits until it is marked committed.
    package static func writersInProgress(_ writers: [Int64]) -> PGQuery {
        """
        SELECT count(*)::int8 FROM (SELECT pg_current_snapshot() AS s) AS c, unnest(\(writers)::int8[]) AS w(x)
        WHERE NOT pg_visible_in_snapshot((pg_snapshot_xmax(c.s)::text::int8
            + ((((w.x - pg_snapshot_xmax(c.s)::text::int8 % 4294967296) % 4294967296) + 4294967296 + 2147483648) % 4294967296
               - 2147483648))::text::xid8, c.s)
        """
    }

    /// The hints of a batch, on the log's channel, all sent by the batch's one transaction (PostgreSQL delivers a
    /// transaction's notifications together: each listener wakes once per batch), as statements of its second
    /// pipeline.
    /// - A batch of one transaction gets the trigger source's hint: its entry and tag when small (see
    ///   ``ChangeLog/Hint``), so that other stacks act on it without reading the log.
    /// - A larger batch gets one hint for all its entries (its last position, commit time and rows, and the
    ///   writer when all share one, which then skips it), so that the other stacks read the log once per batch,
    ///   not once per transaction: the fan-out cost follows batches. Only its transactions that announce their
    ///   rows (a stack's updates with ``ChangeFeedConfiguration/includesRowsInHints``, at most
    ///   ``announcedHintsPerBatch``) also get a hint each, so that other stacks refresh those rows in place.
    private func hints(_ batch: [RelayedTransaction], json: [String], positions: [Int64], xid: String) -> [PGQuery] {
        guard let last = batch.last, let lastPosition = positions.last else { return [] }
        let foreign = ChangeCapture.foreignOrigin
        if batch.count == 1 {
            var hinted: String?
            if let announced = last.announced, last.origin != foreign, announced.utf8.count <= ChangeLog.announcedRowsHintLimit {
                hinted = announced
            } else if json[0].utf8.count <= ChangeLog.inlineHintLimit {
                hinted = json[0]
            }
            return [self.hint(position: lastPosition, of: last, rows: last.rowCount, carrying: hinted, xid: xid)]
        }
        var hints: [PGQuery] = []
        var announcing = 0
        for (index, transaction) in batch.enumerated() where announcing < Self.announcedHintsPerBatch {
            guard let announced = transaction.announced, transaction.origin != foreign,
                announced.utf8.count <= ChangeLog.announcedRowsHintLimit
            else { continue }
            announcing += 1
            hints.append(self.hint(position: positions[index], of: transaction, rows: transaction.rowCount, carrying: announced, xid: xid))
        }
        var summary = last
        summary.origin = batch.allSatisfy({ $0.origin == last.origin }) ? last.origin : foreign
        let rows = batch.contains { $0.rowCount < 0 } ? -1 : batch.reduce(0) { $0 + $1.rowCount }
        hints.append(self.hint(position: lastPosition, of: summary, rows: rows, carrying: nil, xid: xid))
        return hints
    }

    /// One hint: `<position> <origin> @<commit time>/<rows>`, and with `hinted`, the relay's transaction id, the
    /// tag and the entry (see ``ChangeLog/Hint``).
    private func hint(
        position: Int64, of transaction: RelayedTransaction, rows: Int, carrying hinted: String?, xid: String
    ) -> PGQuery {
        let channel = PGValue(type: .text, text: self.log.channel)
        let head = "\(position) \(transaction.origin.uuidString.lowercased()) @\(Self.unixMicroseconds(transaction.committedAt))/\(rows)"
        guard let hinted else {
            return PGQuery(unsafeSQL: "SELECT pg_notify($1, $2)", binds: [channel, PGValue(type: .text, text: head)])
        }
        return PGQuery(
            unsafeSQL: """
                SELECT pg_notify($1, $2 || ' ' || coalesce((SELECT encode(substring(sha256(s.hint_outer || sha256(s.hint_inner \
                || convert_to($2 || ' ' || $3, 'UTF8'))) FROM 1 FOR \(HintKey.tagBytes)), 'hex') FROM \(self.log.stateTableQualified) AS s), '-') \
                || ' ' || $3)
                """,
            binds: [channel, PGValue(type: .text, text: head + " " + xid), PGValue(type: .text, text: hinted)])
    }

    /// Transactions of one batch that announce their rows and get a hint each.
    static let announcedHintsPerBatch = 64

    /// Microseconds since 1970 (the hints' and the log's clock) of a WAL timestamp (microseconds since 2000).
    static func unixMicroseconds(_ time: PGTimestamp) -> Int64 { time.rawValue &+ 946_684_800_000_000 }

    private func recordLag(_ bytes: Int64) {
        let lag = max(0, bytes)
        self.lagBytes.record(lag)
        guard lag > Self.lagWarningBytes else { return }
        let now = ContinuousClock.now
        let due = self.state.withLock { state -> Bool in
            if let last = state.lastLagWarning, now - last < .seconds(60) { return false }
            state.lastLagWarning = now
            return true
        }
        if due {
            self.logger.warning(
                "the change capture's slot holds WAL the relay has not confirmed",
                metadata: ["skyros.capture.slot": "\(self.slot)", "skyros.capture.lag_bytes": "\(lag)"])
        }
    }
}

/// The transactions between the relay's reader and its writer: the reader appends, the writer takes everything
/// queued as one batch.
final class RelayQueue: Sendable {
    private let state = Locked((queued: Deque<RelayedTransaction>(), writing: false, keptKeepalive: LSN?.none))
    private let stream = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))

    var signals: AsyncStream<Void> { self.stream.stream }

    func append(_ transaction: RelayedTransaction) {
        self.state.withLock { $0.queued.append(transaction) }
        self.stream.continuation.yield()
    }

    /// Transactions one batch holds at most: its insert binds four parameters per entry, and PostgreSQL takes
    /// 65,535 per statement.
    static let batchLimit = 1000

    /// What is queued, up to ``batchLimit`` transactions, marked as being written; `nil` when nothing is.
    func takeBatch() -> [RelayedTransaction]? {
        self.state.withLock { state in
            guard !state.queued.isEmpty else { return nil }
            let batch = Array(state.queued.prefix(Self.batchLimit))
            state.queued.removeFirst(batch.count)
            state.writing = true
            return batch
        }
    }

    /// Marks the batch written; returns the position of a keepalive kept meanwhile (``idleOrKeep(_:)``) once
    /// nothing is queued: every transaction before it is written.
    func finishedBatch() -> LSN? {
        self.state.withLock { state in
            state.writing = false
            guard state.queued.isEmpty, let kept = state.keptKeepalive else { return nil }
            state.keptKeepalive = nil
            return kept
        }
    }

    /// `position` when nothing is queued or being written (it may be confirmed now); otherwise keeps it for
    /// ``finishedBatch()`` and returns `nil`. The caller has received every transaction committed before it.
    func idleOrKeep(_ position: LSN) -> LSN? {
        self.state.withLock { state in
            if state.queued.isEmpty && !state.writing { return position }
            state.keptKeepalive = max(state.keptKeepalive ?? position, position)
            return nil
        }
    }

    /// How many transactions are queued.
    var count: Int { self.state.withLock { $0.queued.count } }


    func finish() { self.stream.continuation.finish() }
}

/// When the relay's next batch is due: at once after an idle moment; under a steady stream, one ``window`` after
/// the previous batch started, so that listening stacks get at most one hint per window; at once again while a
/// whole batch (``RelayQueue/batchLimit``) is waiting, so that a backlog drains at the writer's speed.
struct RelayPacing: Sendable {
    let window: Duration
    private var lastStart: ContinuousClock.Instant?
    /// The previous batch found more transactions queued behind it when it finished.
    private var busy = false

    init(window: Duration) { self.window = window }

    /// The instant before which the next batch should not start, or `nil` for now.
    func nextBatchDue(queued: Int) -> ContinuousClock.Instant? {
        guard self.busy, queued < RelayQueue.batchLimit, let lastStart = self.lastStart else { return nil }
        return lastStart + self.window
    }

    mutating func started(at instant: ContinuousClock.Instant) { self.lastStart = instant }

    mutating func finished(queuedBehind: Int) { self.busy = queuedBehind > 0 }
}
