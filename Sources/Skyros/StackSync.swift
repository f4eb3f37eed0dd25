import Foundation
import Logging
import SkyrosPostgres
import SkyrosStore
import SkyrosStack
import SkyrosObservation
import SkyrosSync

/// A stack's link to every other writer on its schema: installs the change capture, names this stack as the
/// writer of its commit transactions (as the commit queue's ``CommitTransactionHook``), runs the ``ChangeFeed``,
/// evicts other writers' rows from the main context, and wakes observers.
final class StackSync: CommitTransactionHook, ChangeFeedSink, Sendable {
    /// This stack's id in the change log (its own entries are ignored when read back).
    let origin = UUID()
    /// ``origin`` as the change log's statements bind it.
    private let originText: String
    let observers = ObserverRegistry()
    let configuration: ChangeFeedConfiguration
    private let feed = Locked<ChangeFeed?>(nil)
    /// The current main context's core (replaced when the store is rebuilt).
    private let core = Locked<StackCore?>(nil)

    /// Where the feed's and the relay's metrics go (the stack's dimensions).
    private let metrics: MetricsScope

    init(configuration: ChangeFeedConfiguration, metrics: MetricsScope = MetricsScope()) {
        self.configuration = configuration
        self.metrics = metrics
        self.originText = self.origin.uuidString.lowercased()
    }

    /// Points the sync at the stack's current core: its local saves wake the observers, and its commit
    /// transactions write the change log once the feed runs.
    func attach(_ core: StackCore) {
        self.core.withLock { $0 = core }
        core.setRewritingTables(self.rewritingTables.withLock { $0 })
        core.saves.set { [observers] slots in observers.changed(ObservedChanges(saved: slots)) }
        if self.changeFeed != nil { core.setCommitHook(self) }
    }

    /// Installs the change capture on `tables` (with the log), then starts listening (PostgreSQL stores with the
    /// feed enabled) on `session`, unless the feed's configuration names a listener of its own. With the logical
    /// source, also makes the schema's relay (see ``loops``).
    /// - Parameter lock: the migrations' history schema and table, whose advisory lock serialises installers.
    func start(
        pool: PGConnectionPool, session: PGConfiguration, schema: String?, tables: [String],
        lock: (schema: String, table: String), logger: Logger
    ) async throws {
        guard self.configuration.isEnabled else { return }
        var log = ChangeLog(schema: schema)
        let (source, standsForElection, fresh) = try await self.chooseSource(pool: pool, log: log, replication: session, logger: logger)
        log.namesOriginInWAL = source == .logicalDecoding
        let installer: CaptureInstaller =
            source == .logicalDecoding ? .logical(LogicalCapture(log: log), replication: session) : .triggers(ChangeCapture(log: log))
        self.capture.withLock { $0 = (installer, tables, lock, []) }
        self.pool.withLock { $0 = pool }
        self.logger.withLock { $0 = logger }
        var slot: (slot: String, schema: String)?
        do {
            slot = try await self.installCapture(pool: pool, logger: logger)
        } catch let error as CaptureError where error.slotCreationTimedOut && self.configuration.captureSource == .automatic {
            // A fresh schema whose slot could not be created in time, by this stack or by the one that had begun
            // creating it (which then removed the publication it made): the trigger source, as where decoding is
            // not allowed.
            let abandoned = try await pool.withConnection { try await !LogicalCapture(log: log).isInstalled(on: $0) }
            guard fresh || abandoned else { throw error }
            logger.warning(
                "change capture source chosen",
                metadata: ["skyros.capture.source": "triggers", "skyros.capture.reason": "\(error.message)"])
            log.namesOriginInWAL = false
            self.capture.withLock { $0?.installer = .triggers(ChangeCapture(log: log)) }
            try await self.installCapture(pool: pool, logger: logger)
        }
        let feed = ChangeFeed(
            log: log, origin: self.origin, pool: pool, session: session,
            configuration: self.configuration, logger: logger, sink: self, metrics: self.metrics)
        try await feed.start()
        self.feed.withLock { $0 = feed }
        if let slot, standsForElection {
            self.relay.withLock {
                $0 = ChangeRelay(
                    log: log, schema: slot.schema, slot: slot.slot, replication: session,
                    applicationName: "skyros-relay-\(self.originText)", pool: pool, logger: logger,
                    hintWindow: self.configuration.hintWindow, metrics: self.metrics)
            }
        }
        self.core.withLock { $0 }?.setCommitHook(self)
    }

    /// The source configured, resolved (``ChangeCaptureSource/automatic``) against what the schema has installed
    /// and what the server and role allow; whether this stack may relay; whether nothing was installed yet
    /// (`fresh`). Logs the choice and why.
    /// - Throws: ``CaptureError`` when the configured source cannot run: the schema is captured the other way,
    ///   or logical decoding is not allowed.
    private func chooseSource(
        pool: PGConnectionPool, log: ChangeLog, replication: PGConfiguration, logger: Logger
    ) async throws -> (source: ChangeCaptureSource, relays: Bool, fresh: Bool) {
        let wantsLogical = self.configuration.captureSource != .triggers
        let (logical, triggers, settings) = try await pool.withConnection { connection in
            (
                try await LogicalCapture(log: log).isInstalled(on: connection),
                try await ChangeCapture(log: log).inspect(tables: [], on: connection).installedVersion != nil,
                wantsLogical ? try await LogicalCapture.unavailableReason(on: connection) : nil
            )
        }
        // The server and the role may allow decoding while the connection does not (a transaction-pooling proxy).
        var unavailable = settings
        if unavailable == nil, !triggers, wantsLogical {
            unavailable = await LogicalCapture.replicationRefusal(replication, logger: logger)
        }
        let choice: (ChangeCaptureSource, Bool, String)
        switch self.configuration.captureSource {
        case .triggers:
            if logical {
                throw CaptureError(
                    message: "the schema is captured by logical decoding (its publication exists); configure .logicalDecoding "
                        + "or .automatic, or remove it with `migrate capture drop`")
            }
            choice = (.triggers, false, "configured")
        case .logicalDecoding:
            if let unavailable, !logical {
                throw CaptureError(message: "logical decoding cannot run: \(unavailable); configure .triggers or .automatic")
            }
            choice = (.logicalDecoding, unavailable == nil, unavailable.map { "configured; this role may not relay: \($0)" } ?? "configured")
        case .automatic:
            if triggers {
                choice = (.triggers, false, "the schema is captured by triggers")
            } else if logical {
                choice = (.logicalDecoding, unavailable == nil, unavailable.map { "the schema is captured by logical decoding; this role may not relay: \($0)" }
                    ?? "the schema is captured by logical decoding")
            } else if let unavailable {
                choice = (.triggers, false, unavailable)
            } else {
                choice = (.logicalDecoding, true, "the server and role allow it")
            }
        }
        logger.info(
            "change capture source chosen",
            metadata: ["skyros.capture.source": "\(choice.0 == .logicalDecoding ? "logical decoding" : "triggers")", "skyros.capture.reason": "\(choice.2)"])
        return (choice.0, choice.1, !logical && !triggers)
    }

    /// How this stack installs capture, and what it installs it on.
    private enum CaptureInstaller: Sendable {
        case triggers(ChangeCapture)
        case logical(LogicalCapture, replication: PGConfiguration)
    }

    /// The capture this stack installs, its tables and the lock it installs under.
    /// `installed`: the tables known to be captured.
    private let capture = Locked<(installer: CaptureInstaller, tables: [String], lock: (schema: String, table: String), installed: Set<String>)?>(nil)

    /// The schema's relay (logical source), when this stack stands for election.
    private let relay = Locked<ChangeRelay?>(nil)

    /// The logical source's relay of this stack, if it stands for election.
    package var changeRelay: ChangeRelay? { self.relay.withLock { $0 } }

    /// The feed's loops and the relay's election loop: the stack runs them as children of its background work.
    var loops: [@Sendable () async -> Void] {
        guard let feed = self.changeFeed else { return [] }
        guard let relay = self.changeRelay else { return feed.loops }
        return feed.loops + [{ await relay.run() }]
    }

    /// Installs or upgrades the capture (see ``ChangeCapture`` and ``LogicalCapture``) and tells the stack which
    /// tables' rows the database may rewrite (their own writes are read back, not cached as sent).
    /// - Returns: the slot and its schema (logical source).
    @discardableResult
    private func installCapture(pool: PGConnectionPool, logger: Logger) async throws -> (slot: String, schema: String)? {
        guard let (installer, tables, lock, _) = self.capture.withLock({ $0 }) else { return nil }
        let rewriting: Set<String>
        let missing: Set<String>
        var slot: (slot: String, schema: String)?
        switch installer {
        case .triggers(let capture):
            let inspection = try await pool.withConnection { try await capture.install(tables: tables, lock: lock, on: $0) }
            logger.debug(
                "change capture ready",
                metadata: [
                    "skyros.capture.version": "\(inspection.installedVersion ?? 0)", "skyros.capture.tables": "\(tables.count)",
                ])
            (rewriting, missing) = (inspection.rewritingTables, inspection.missingTables)
        case .logical(let capture, let replication):
            let inspection = try await pool.withConnection { connection in
                slot = try await capture.install(tables: tables, lock: lock, replication: replication, on: connection, logger: logger)
                return try await ChangeCapture(log: capture.log).inspect(tables: tables, on: connection)
            }
            logger.debug("change capture ready", metadata: ["skyros.capture.slot": "\(slot?.slot ?? "")", "skyros.capture.tables": "\(tables.count)"])
            (rewriting, missing) = (inspection.rewritingTables, inspection.missingTables)
        }
        self.core.withLock { $0 }?.setRewritingTables(rewriting)
        self.rewritingTables.withLock { $0 = rewriting }
        self.capture.withLock { $0?.installed.formUnion(Set(tables).subtracting(missing)) }
        return slot
    }

    private let pool = Locked<PGConnectionPool?>(nil)
    private let logger = Locked(Logger(label: "skyros.stack", factory: { _ in SwiftLogNoOpLogHandler() }))

    /// Tables whose rows the database may rewrite (for a core attached later).
    private let rewritingTables = Locked<Set<String>>([])

    /// The running feed, if any.
    var changeFeed: ChangeFeed? { self.feed.withLock { $0 } }

    /// Stops listening (returns once the listener's connection is closed) and ends every observation.
    func stop() async {
        await self.feed.withLock { $0 }?.stopAndWait()
        self.observers.finishAll(throwing: nil, closing: true)
    }

    /// Ends every observation with ``ObservationError/storeRebuilt``, attaches the new core, recreates the change
    /// log (the rebuild dropped it), and tells the other stacks (their next read finds a new log and flushes
    /// their caches).
    ///
    /// The new core is attached first (its commits are held until the caller releases them): other stacks'
    /// changes then reach its cache, and its saves reach observers, from the start. When the log cannot be
    /// created, its commits still carry the log's statements, so they fail instead of committing unannounced.
    func storeRebuilt(core: StackCore, pool: PGConnectionPool, logger: Logger) async throws {
        self.observers.finishAll(throwing: ObservationError.storeRebuilt)
        self.attach(core)
        if let feed = self.changeFeed {
            // The rebuild dropped the tables and their triggers: each is captured again before it is written.
            self.capture.withLock { $0?.installed = [] }
            try await feed.createLog()
            try await self.installCapture(pool: pool, logger: logger)
            await feed.announceNewLog()
        }
    }

    // MARK: CommitTransactionHook

    func willCommit(batch: [ChangeSetResult], on connection: PGConnection) async throws {
        guard let feed = self.changeFeed, let statement = feed.log.originStatement(batch.flatMap(\.changes), origin: self.originText)
        else { return }
        _ = try await connection.query(statement)
    }

    func pipelinedStatement(announcing changes: [RowChange]) throws -> PGQuery? {
        self.changeFeed?.log.originStatement(changes, origin: self.originText, includingRows: self.configuration.includesRowsInHints)
    }

    func tablesNeedingPreparation(_ tables: Set<String>) -> Set<String> {
        guard self.changeFeed != nil else { return [] }
        return self.capture.withLock { capture in
            guard let capture else { return [] }
            return tables.subtracting(capture.installed)
        }
    }

    /// Installs the capture on tables this stack writes that were not among its entities at start (see
    /// ``DataStackConfiguration/entities``), before the transaction that first writes them.
    func prepare(tables: Set<String>) async throws {
        guard let pool = self.pool.withLock({ $0 }) else { return }
        self.capture.withLock { capture in
            guard var current = capture else { return }
            current.tables += tables.subtracting(current.tables).sorted()
            capture = current
        }
        try await self.installCapture(pool: pool, logger: self.logger.withLock { $0 })
    }

    // MARK: Remote changes (ChangeFeedSink)

    /// The rows of another stack's entry to read again as its hint arrives: those it updated without announcing
    /// them whole, that an observer of one row watches, and that are cached and have no queued local change.
    func rowsToReadAgain(_ entry: ChangeLogEntry, on session: ListenerSession) -> [RowKey: RemoteRefresh] {
        guard self.observers.watchesRows else { return [:] }
        let updated = entry.changes.compactMap { $0.k == "u" && $0.r == nil ? $0.key : nil }
        guard !updated.isEmpty else { return [:] }
        let observed = self.observers.observedRows(among: updated)
        guard !observed.isEmpty, let core = self.core.withLock({ $0 }) else { return [:] }
        return core.readAgain(observed, on: session)
    }

    /// Applies other stacks' commits to the main context and wakes the observers they concern (on the listener's
    /// thread for a hint it delivers, see ``ChangeFeed``; on the event loop otherwise).
    func deliver(_ delivery: ChangeFeedDelivery) {
        let core = self.core.withLock { $0 }
        switch delivery {
        case .remote(let entries, let readAgain):
            let refreshed = core?.applyRemote(entries, readAgain: readAgain) ?? 0
            if refreshed > 0 { self.changeFeed?.metrics.refreshedRows.increment(by: refreshed) }
            self.observers.changed(ObservedChanges(remote: entries))
        case .flush:
            core?.flushRemote()
            self.observers.changedAll()
        }
    }
}
