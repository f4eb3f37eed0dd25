import CLibPQ
import Foundation
import Logging

/// A logical replication connection (`replication=database`): the replication commands (`IDENTIFY_SYSTEM`,
/// `CREATE_REPLICATION_SLOT`, `DROP_REPLICATION_SLOT`), plain SQL, and `START_REPLICATION`, which hands the
/// connection over to a ``PGReplicationStream``.
///
/// Like ``PGConnection``, it is a libpq connection confined to a thread of its own: every method runs there, so
/// no blocking libpq call ever occupies Swift's cooperative pool. Cancelling the calling task cancels the
/// running command (`PQcancel`). A walsender accepts only the simple query protocol, so there are no bound
/// parameters: names and values are quoted into the command text.
///
/// ```swift
/// let connection = try await PGReplicationConnection.connect(to: configuration, logger: logger)
/// let slot = try await connection.createLogicalSlot("skyros_changes")
/// let stream = try await connection.startReplication(
///     slot: slot.name, from: slot.consistentPoint, publications: ["skyros_changes"])
/// for try await message in stream.messages { … }
/// ```
///
/// The role needs the `REPLICATION` attribute (or superuser): without it connecting fails with SQLSTATE 42501.
/// The server needs `wal_level = logical`, and a free `max_wal_senders` and `max_replication_slots` entry.
///
/// ## Topics
/// - ``connect(to:logger:)``
/// - ``identifySystem()``
/// - ``createLogicalSlot(_:temporary:plugin:snapshot:)``
/// - ``dropSlot(_:wait:)``
/// - ``simpleQuery(_:)``
/// - ``startReplication(slot:from:publications:messages:options:)``
/// - ``close()``
package actor PGReplicationConnection {
    private let executor: ThreadExecutor
    /// The connection's own thread, where every method runs.
    package nonisolated var unownedExecutor: UnownedSerialExecutor { self.executor.asUnownedSerialExecutor() }

    /// A process-unique number for logs (`skyros.connection.id`).
    package nonisolated let id: Int
    private let logger: Logger
    /// The libpq connection, confined to this actor's thread; `nil` after ``close()`` or once streaming.
    private var session: PGSession?
    private var canceller: QueryCanceller?
    /// Why ``session`` is gone: `true` once ``startReplication(slot:from:publications:messages:options:)`` handed
    /// it to its stream.
    private var handedOver = false

    private static let counter = Locked(0)

    private init(logger: Logger) {
        self.id = Self.counter.withLock { $0 += 1; return $0 }
        self.executor = ThreadExecutor(name: "skyros-replication-\(self.id)")
        var logger = logger
        logger[metadataKey: PGLogKey.connectionID] = "replication-\(self.id)"
        self.logger = logger
    }

    /// Opens a logical replication connection to the configuration's database.
    ///
    /// The connection adds `replication=database` to the configuration's libpq options, and TCP keepalives (as
    /// ``PGListener`` does) for each keepalive option the configuration does not set, so that a server that
    /// vanished is noticed while the stream waits. The session time zone
    /// (``PGConfiguration/sessionTimeZone``) is set as on any connection.
    ///
    /// ```swift
    /// let connection = try await PGReplicationConnection.connect(to: try PGConfiguration(url: url))
    /// ```
    /// - Parameters:
    ///   - configuration: where and how to connect; not through a transaction pooler.
    ///   - logger: receives connection events at debug level; the password is never logged.
    /// - Throws: ``PGError``: as ``PGConnection/connect(to:logger:usePreparedStatements:)``, and kind
    ///   `.connectionFailed` with SQLSTATE 42501 (`insufficientPrivilege`) when the role may not replicate. The
    ///   password never appears in it.
    package static func connect(
        to configuration: PGConfiguration,
        logger: Logger = Logger(label: "skyros.replication", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws -> PGReplicationConnection {
        let connection = PGReplicationConnection(logger: logger)
        try await connection.open(configuration)
        return connection
    }

    /// The configuration a replication connection opens with: `replication=database`, keepalives, and no time
    /// zone statement from ``PGSession/open(_:statements:)`` (it binds a parameter, which a walsender refuses).
    package static func replicationConfiguration(_ configuration: PGConfiguration) -> PGConfiguration {
        var configuration = configuration
        configuration["replication"] = "database"
        configuration.sessionTimeZone = nil
        for (keyword, value) in PGListener.keepaliveOptions where configuration[keyword] == nil {
            configuration[keyword] = value
        }
        return configuration
    }

    private func open(_ configuration: PGConfiguration) throws {
        do {
            let session = try PGSession.open(Self.replicationConfiguration(configuration), statements: .connection(preparing: false))
            try Self.setTimeZone(configuration.sessionTimeZone, on: session)
            self.session = session
            self.canceller = QueryCanceller(connection: session.handle)
            self.logger.debug(
                "replication connection opened",
                metadata: [PGLogKey.host: "\(session.host)", PGLogKey.database: "\(session.database)"])
        } catch var error as PGError {
            error = Self.classifyConnectError(error)
            self.logger.debug("replication connect failed", metadata: [PGLogKey.error: "\(error.message)"])
            self.executor.shutdown()
            throw error
        } catch {
            self.executor.shutdown()
            throw error
        }
    }

    /// A refusal to start a walsender comes before any result, so libpq only has its text: the SQLSTATE
    /// (42501) is told from PostgreSQL's messages (15 and earlier, 16 and later; English unless the server's
    /// `lc_messages` says otherwise).
    static func classifyConnectError(_ error: PGError) -> PGError {
        guard error.sqlState == nil,
            error.message.contains("replication role to start walsender")
                || error.message.contains("permission denied to start WAL sender")
        else { return error }
        var error = error
        error.sqlState = .insufficientPrivilege
        return error
    }

    /// Sets the session time zone as ``LibPQ/setSessionTimeZone(_:on:)`` does, but through the simple query
    /// protocol (the only one a walsender accepts), with the name quoted by libpq.
    private static func setTimeZone(_ zone: String?, on session: PGSession) throws {
        guard let zone else { return }
        let connection = session.handle
        if let reported = PQparameterStatus(connection, "TimeZone").map({ String(cString: $0) }),
            LibPQ.isSameTimeZone(reported, zone)
        {
            return
        }
        guard !LibPQ.containsNUL(zone), let escaped = PQescapeLiteral(connection, zone, zone.utf8.count) else {
            throw PGError(kind: .invalidConfiguration, message: "cannot set the session time zone (sessionTimeZone)")
        }
        let literal = String(cString: escaped)
        PQfreemem(escaped)
        do {
            _ = try session.execute("SELECT pg_catalog.set_config('TimeZone', \(literal), false)")
        } catch var error as PGError {
            guard session.isConnected else { throw error }
            error.kind = .invalidConfiguration
            error.message = "cannot set the session time zone (sessionTimeZone): " + error.message
            throw error
        }
    }

    /// The open session; `.connectionClosed` after ``close()`` or once its stream took it over.
    private func openSession() throws -> PGSession {
        guard let session else {
            throw PGError(
                kind: .connectionClosed,
                message: self.handedOver ? "the connection is streaming: use its PGReplicationStream" : "the connection is closed")
        }
        return session
    }

    /// Runs `body` on this thread so that cancelling the current task sends `PQcancel` for the running command.
    private func cancellable<R>(_ body: (PGSession) throws -> R) async throws -> R {
        let session = try self.openSession()
        guard let canceller = self.canceller else { throw PGError(kind: .connectionClosed, message: "the connection is closed") }
        canceller.begin()
        defer { canceller.end() }
        return try await withTaskCancellationHandler {
            // Captures the isolated `self`, so that the body runs on this actor's thread.
            try self.runUnlessCancelled { try body(session) }
        } onCancel: {
            canceller.cancel()
        }
    }

    private func runUnlessCancelled<R>(_ body: () throws -> R) throws -> R {
        if Task.isCancelled { throw PGError(kind: .queryCancelled, message: "the task was cancelled before the command ran") }
        return try body()
    }

    /// Runs one command or SQL statement through the simple query protocol.
    private func command(_ text: String) async throws -> PGRows {
        if LibPQ.containsNUL(text) { throw PGError(kind: .encoding, message: "command text contains a NUL (0x00) character") }
        self.logger.debug("replication command", metadata: [PGLogKey.sql: "\(text)"])
        return try await self.cancellable { try $0.execute(text) }
    }

    // MARK: Commands

    /// `IDENTIFY_SYSTEM`: the cluster's identity, timeline and current WAL position.
    ///
    /// ```swift
    /// let system = try await connection.identifySystem()
    /// print(system.walPosition)   // 0/1A2B3C8
    /// ```
    /// - Throws: ``PGError`` from the server or the connection.
    package func identifySystem() async throws -> PGSystemIdentification {
        let rows = try await self.command("IDENTIFY_SYSTEM")
        guard let row = rows.first, rows.columns.count >= 4 else {
            throw PGError(kind: .protocolViolation, message: "IDENTIFY_SYSTEM returned no row")
        }
        return PGSystemIdentification(
            systemID: try row.decode(String.self, at: 0), timeline: try row.decode(Int.self, at: 1),
            walPosition: try row.decode(LSN.self, at: 2), database: try row.decode(String?.self, at: 3))
    }

    /// What `CREATE_REPLICATION_SLOT` does with the snapshot at the slot's consistent point.
    package enum SnapshotAction: String, Sendable, Hashable {
        /// Export it until the next command on this connection (`snapshot_name`, for `SET TRANSACTION SNAPSHOT`
        /// on another connection: an initial copy that the stream continues exactly).
        case export
        /// Use it in the transaction open on this connection (which must have run nothing else yet).
        case use
        /// Neither (the default here): the slot only starts recording changes.
        case nothing
    }

    /// `CREATE_REPLICATION_SLOT <name> [TEMPORARY] LOGICAL <plugin> (SNAPSHOT '<action>')` (PostgreSQL 15 syntax).
    ///
    /// The slot keeps every change committed after its ``PGReplicationSlot/consistentPoint`` until a consumer
    /// confirms it, and holds back WAL recycling for as long: drop a slot that is no longer read.
    ///
    /// ```swift
    /// let slot = try await connection.createLogicalSlot("skyros_changes")
    /// ```
    /// - Parameters:
    ///   - name: the slot's name (PostgreSQL allows lower-case letters, digits and `_`, up to 63 bytes); quoted.
    ///   - temporary: drop the slot when this connection ends (it can only be streamed on this connection).
    ///   - plugin: the output plugin.
    ///   - snapshot: what to do with the snapshot at the consistent point.
    /// - Throws: ``PGError``: SQLSTATE 42710 (`duplicateObject`) when the slot exists, 42602 for an invalid
    ///   name, 55000 when `wal_level` is not `logical`, 53400 when every slot is in use.
    package func createLogicalSlot(
        _ name: String, temporary: Bool = false, plugin: String = "pgoutput", snapshot: SnapshotAction = .nothing
    ) async throws -> PGReplicationSlot {
        let rows = try await self.command(
            Self.createSlotCommand(name: name, temporary: temporary, plugin: plugin, snapshot: snapshot))
        guard let row = rows.first, rows.columns.count >= 4 else {
            throw PGError(kind: .protocolViolation, message: "CREATE_REPLICATION_SLOT returned no row")
        }
        return PGReplicationSlot(
            name: try row.decode(String.self, at: 0), consistentPoint: try row.decode(LSN.self, at: 1),
            snapshotName: try row.decode(String?.self, at: 2), outputPlugin: try row.decode(String?.self, at: 3))
    }

    /// `DROP_REPLICATION_SLOT <name> [WAIT]`.
    ///
    /// ```swift
    /// try await connection.dropSlot("skyros_changes", wait: true)
    /// ```
    /// - Parameters:
    ///   - name: the slot; quoted.
    ///   - wait: wait until the connection streaming from the slot ends instead of failing while it is active.
    /// - Throws: ``PGError``: SQLSTATE 42704 when there is no such slot, 55006 (``SQLState/objectInUse``) when
    ///   it is active and `wait` is `false`.
    package func dropSlot(_ name: String, wait: Bool = false) async throws {
        _ = try await self.command(Self.dropSlotCommand(name: name, wait: wait))
    }

    /// Runs SQL text through the simple query protocol (a logical walsender accepts SQL since PostgreSQL 10)
    /// and returns the last statement's rows, every value in text form.
    ///
    /// There are no bound parameters on a replication connection: never splice outside values into `sql`
    /// (quote names with ``quoteIdentifier(_:)``).
    ///
    /// ```swift
    /// let locked = try await connection.simpleQuery("SELECT pg_try_advisory_lock(42)")[0].decode(Bool.self, at: 0)
    /// ```
    /// - Throws: ``PGError`` of the first statement that failed.
    package func simpleQuery(_ sql: String) async throws -> PGRows {
        if LibPQ.containsNUL(sql) { throw PGError(kind: .encoding, message: "statement text contains a NUL (0x00) character") }
        self.logger.debug("replication query", metadata: [PGLogKey.sql: "\(sql)"])
        return try await self.cancellable { try $0.execute(script: sql) }
    }

    /// `START_REPLICATION SLOT <slot> LOGICAL <lsn> (proto_version '1', publication_names '…', messages '…')`:
    /// starts streaming `pgoutput` messages, and hands the connection over to the stream that delivers them.
    ///
    /// After it returns, this connection's methods throw `.connectionClosed`; ``PGReplicationStream/stop()``
    /// closes the connection.
    ///
    /// ```swift
    /// let stream = try await connection.startReplication(slot: "skyros_changes", publications: ["skyros_changes"])
    /// for try await message in stream.messages {
    ///     guard case .data(let data) = message else { continue }
    ///     …   // once the transaction is durable:
    ///     stream.confirm(flushedThrough: commitEndLSN)
    /// }
    /// ```
    /// - Parameters:
    ///   - slot: the slot to read; quoted.
    ///   - from: where to start; the server starts at the slot's `confirmed_flush_lsn` when this is earlier
    ///     (``LSN/invalid``: there). Transactions that committed before it are not sent.
    ///   - publications: the publications whose tables are streamed; each is quoted as an identifier.
    ///   - messages: also stream `pg_logical_emit_message` messages.
    ///   - options: status update timing and buffering.
    /// - Throws: ``PGError``: SQLSTATE 55006 (``SQLState/objectInUse``) when another connection streams from
    ///   the slot, 42704 when there is no such slot. (A publication that does not exist fails the stream
    ///   itself, when the first change is decoded.)
    package func startReplication(
        slot: String, from start: LSN = .invalid, publications: [String], messages: Bool = true,
        options: PGReplicationStream.Options = .init()
    ) async throws -> PGReplicationStream {
        let text = Self.startReplicationCommand(slot: slot, start: start, publications: publications, messages: messages)
        if LibPQ.containsNUL(text) { throw PGError(kind: .encoding, message: "command text contains a NUL (0x00) character") }
        self.logger.debug("replication command", metadata: [PGLogKey.sql: "\(text)"])
        try await self.cancellable { session in try Self.enterCopyBoth(text, on: session) }
        guard let session = self.session else { throw PGError(kind: .connectionClosed, message: "the connection is closed") }
        // The stream's thread takes the connection over; this actor's thread ends.
        self.session = nil
        self.canceller = nil
        self.handedOver = true
        self.executor.shutdown()
        var logger = self.logger
        logger[metadataKey: PGLogKey.replicationSlot] = "\(slot)"
        return PGReplicationStream.start(
            session: PGReplicationStream.Handover(session), start: start, options: options, logger: logger)
    }

    /// Sends `START_REPLICATION` and waits for the server to enter COPY BOTH mode.
    /// - Throws: the server's error (the connection then stays in command mode, usable).
    private static func enterCopyBoth(_ text: String, on session: PGSession) throws {
        let connection = session.handle
        guard PQsendQuery(connection, text) == 1, LibPQ.flush(connection) else {
            throw LibPQ.error(result: nil, connection: connection)
        }
        _ = session.replyWait.awaitReply(connection)
        guard let result = PQgetResult(connection) else { throw LibPQ.error(result: nil, connection: connection) }
        if PQresultStatus(result) == PGRES_COPY_BOTH {
            PQclear(result)
            return
        }
        // An error (or, from a server that misunderstood, rows): read what follows so the connection is idle.
        defer {
            while let next = session.replyWait.nextResult(on: connection) { PQclear(next) }
        }
        _ = try LibPQ.consume(result, connection: connection)
        throw PGError(kind: .protocolViolation, message: "START_REPLICATION did not start streaming")
    }

    /// Closes the connection and stops its thread (after streaming started, the stream owns the connection:
    /// this does nothing to it). Further calls throw `.connectionClosed`.
    package func close() {
        if self.session != nil { self.logger.debug("replication connection closed") }
        self.session = nil
        self.canceller = nil
        self.executor.shutdown()
    }

    deinit {
        self.executor.shutdown()
    }

    // MARK: Command text

    /// A string constant of the replication command grammar, and of SQL with `standard_conforming_strings` on:
    /// in single quotes, each quote doubled (backslashes are ordinary characters there).
    package static func quoteLiteral(_ value: String) -> String {
        "'" + value.replacingOccurrences(of: "'", with: "''") + "'"
    }

    /// `CREATE_REPLICATION_SLOT "<name>" [TEMPORARY] LOGICAL "<plugin>" (SNAPSHOT '<action>')`.
    package static func createSlotCommand(name: String, temporary: Bool, plugin: String, snapshot: SnapshotAction) -> String {
        "CREATE_REPLICATION_SLOT \(quoteIdentifier(name))\(temporary ? " TEMPORARY" : "") LOGICAL \(quoteIdentifier(plugin))"
            + " (SNAPSHOT \(Self.quoteLiteral(snapshot.rawValue)))"
    }

    /// `DROP_REPLICATION_SLOT "<name>" [WAIT]`.
    package static func dropSlotCommand(name: String, wait: Bool) -> String {
        "DROP_REPLICATION_SLOT \(quoteIdentifier(name))\(wait ? " WAIT" : "")"
    }

    /// `START_REPLICATION SLOT "<slot>" LOGICAL <lsn> (proto_version '1', publication_names '<list>', messages '<bool>')`.
    ///
    /// `pgoutput` reads `publication_names` as a comma-separated list of identifiers (folded to lower case unless
    /// double-quoted), so each name is quoted as an identifier, and the list then as a string constant: the
    /// publication `a'b,"c` is sent as `'"a''b,""c"'`.
    package static func startReplicationCommand(slot: String, start: LSN, publications: [String], messages: Bool) -> String {
        let names = publications.map(quoteIdentifier).joined(separator: ",")
        return "START_REPLICATION SLOT \(quoteIdentifier(slot)) LOGICAL \(start)"
            + " (proto_version '1', publication_names \(Self.quoteLiteral(names)), messages '\(messages)')"
    }
}

/// What `IDENTIFY_SYSTEM` returns.
package struct PGSystemIdentification: Sendable, Hashable {
    /// The cluster's unique identifier (`pg_control_system().system_identifier`), as text: it is an unsigned
    /// 64-bit number.
    package var systemID: String
    /// The current timeline.
    package var timeline: Int
    /// The current WAL flush position.
    package var walPosition: LSN
    /// The database connected to.
    package var database: String?
}

/// A replication slot, as `CREATE_REPLICATION_SLOT` returns it.
package struct PGReplicationSlot: Sendable, Hashable {
    /// The slot's name.
    package var name: String
    /// Where the slot became consistent: every transaction that commits after it is streamed, none before.
    package var consistentPoint: LSN
    /// The exported snapshot's name (``PGReplicationConnection/SnapshotAction/export`` only).
    package var snapshotName: String?
    /// The output plugin.
    package var outputPlugin: String?
}

extension SQLState {
    /// 55006: the object is in use (a replication slot another connection streams from).
    package static let objectInUse = SQLState("55006")
}

extension PGLogKey {
    /// The replication slot a stream reads.
    package static let replicationSlot = "skyros.replication.slot"
    /// A WAL position a replication stream reports (the flush position of a status update).
    package static let replicationLSN = "skyros.replication.lsn"
}
