import Foundation
import Logging
import SkyrosPostgres
import SkyrosStore

/// Capture through logical decoding: what is installed in the database for ``ChangeCaptureSource/logicalDecoding``.
///
/// - a publication of the schema's captured tables, named like the slot;
/// - one permanent logical replication slot per database and schema (``slotName``), created at the first
///   stack's start, so that every change committed after any stack started is kept until relayed;
/// - the change log, which the elected relay (``ChangeRelay``) writes.
///
/// Nothing is installed on users' tables, and nothing runs in writers' transactions. The operator's view of it is
/// `migrate capture status` (the slot's retained WAL) and `migrate capture drop` (slot and publication).
package struct LogicalCapture: Sendable {
    package let log: ChangeLog

    package init(log: ChangeLog) { self.log = log }

    /// `skyros_<schema>_<hash>`: the slot's and the publication's name. A slot name may hold only lower-case
    /// letters, digits and underscores (at most 63 bytes), so the schema is reduced to those (at most 39: with
    /// `skyros_`, `_` and 16 hex digits, 63 bytes) and a hash of the database's and the schema's whole names keeps
    /// two schemas apart. The database is in the hash because slots belong to the cluster, not to a database:
    /// two databases of one cluster with a schema of the same name (`public`, most often) need two slots.
    package static func slotName(schema: String, database: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in database.utf8 + [0] + schema.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let readable = String(schema.lowercased().unicodeScalars.filter { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
            .prefix(39).map(Character.init))
        let hex = String(hash, radix: 16)
        return "skyros_\(readable)_\(String(repeating: "0", count: 16 - hex.count))\(hex)"
    }

    /// The session a replication connection of the capture opens with: `replication`'s, without lock or
    /// statement timeouts (creating a slot waits for every transaction running at that moment to end, and a
    /// timeout meant for the application's statements would fail it).
    package static func replicationSession(_ replication: PGConfiguration) -> PGConfiguration {
        var configuration = replication
        configuration["options"] = ((configuration["options"].map { $0 + " " }) ?? "") + "-c lock_timeout=0 -c statement_timeout=0"
        return configuration
    }

    /// Whether a replication connection opens with `replication` (through a transaction-pooling proxy, or to a
    /// server that refuses it, it does not): the reason when it does not.
    package static func replicationRefusal(_ replication: PGConfiguration, logger: Logger) async -> String? {
        do {
            let connection = try await PGReplicationConnection.connect(to: Self.replicationSession(replication), logger: logger)
            defer { Task { await connection.close() } }
            _ = try await connection.identifySystem()
            return nil
        } catch {
            return "a replication connection failed (\(String(describing: error)))"
        }
    }

    /// Why logical decoding cannot run for this role on this server, or `nil` when it can: `wal_level` below
    /// `logical`, no replication slots or WAL senders configured, or a role without `REPLICATION` (or
    /// superuser).
    package static func unavailableReason(on connection: PGConnection) async throws -> String? {
        let row = try await connection.query("""
            SELECT current_setting('wal_level'), current_setting('max_replication_slots')::int,
                   current_setting('max_wal_senders')::int, (SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user)
            """)[0]
        if try row.decode(String.self, at: 0) != "logical" {
            return "wal_level is \(try row.decode(String.self, at: 0)), not logical"
        }
        if try row.decode(Int.self, at: 1) == 0 || row.decode(Int.self, at: 2) == 0 {
            return "max_replication_slots or max_wal_senders is 0"
        }
        if try row.decode(Bool?.self, at: 3) != true { return "the role has no REPLICATION attribute" }
        return nil
    }

    /// The schema the capture lives in (the log's, else `connection`'s current one) and its slot's name.
    func names(on connection: PGConnection) async throws -> (schema: String, slot: String) {
        let row = try await connection.query("SELECT current_schema()::text, current_database()::text")[0]
        guard let schema = try self.log.schema ?? row.decode(String?.self, at: 0) else {
            throw CaptureError(message: "the connection has no current schema to capture: set search_path or configure a schema")
        }
        return (schema, Self.slotName(schema: schema, database: try row.decode(String.self, at: 1)))
    }

    /// Whether this schema's capture is logical: its publication exists.
    package func isInstalled(on connection: PGConnection) async throws -> Bool {
        let name = try await self.names(on: connection).slot
        return try await connection.query("SELECT count(*)::int8 FROM pg_publication WHERE pubname = \(name)")[0].decode(Int64.self, at: 0) > 0
    }

    /// Creates the log, the publication (adding the tables it lacks) and, unless it exists, the slot: in one
    /// transaction under the migrations' lock, then the slot on a replication connection. Idempotent; several
    /// processes may start at once.
    /// - Parameters:
    ///   - tables: the tables to capture (those that do not exist yet are skipped, and captured once written).
    ///   - replication: the session a replication connection opens with (a direct one, as the listener's).
    /// - Returns: the slot's name and the schema it captures.
    /// - Throws: ``CaptureError`` when the trigger source is installed on the schema, or a table has no
    ///   primary key; the server's error otherwise.
    @discardableResult
    package func install(
        tables: [String], lock: (schema: String, table: String), replication: PGConfiguration, on connection: PGConnection,
        logger: Logger
    ) async throws -> (slot: String, schema: String) {
        let (schema, name) = try await self.names(on: connection)
        if try await ChangeCapture(log: self.log).inspect(tables: [], on: connection).installedVersion != nil {
            throw CaptureError(
                message: "schema \(schema) is captured by triggers; run `migrate capture drop --schema <schema>` before switching to logical decoding")
        }
        var createdPublication = false
        try await connection.withTransaction { connection in
            _ = try await connection.query(
                PGQuery(
                    unsafeSQL: "SELECT pg_advisory_xact_lock(\(ChangeCapture.lockKeySQL))",
                    binds: [PGValue(type: .text, text: lock.schema), PGValue(type: .text, text: lock.table)]))
            try await self.log.create(on: connection)
            let exists = try await connection.query("SELECT count(*)::int8 FROM pg_publication WHERE pubname = \(name)")[0]
                .decode(Int64.self, at: 0) > 0
            if !exists {
                _ = try await connection.execute(
                    script: try await self.render(
                        "CREATE PUBLICATION %1$I; COMMENT ON PUBLICATION %1$I IS %4$L", slot: name, comment: Self.comment(schema: schema),
                        on: connection))
                createdPublication = true
            }
            let published = Set(try await self.publishedTables(name, schema: schema, on: connection))
            for table in tables where !published.contains(table) {
                let present = try await connection.query("""
                    SELECT count(*)::int8 FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indrelid
                    JOIN pg_namespace AS n ON n.oid = c.relnamespace
                    WHERE n.nspname = \(schema) AND c.relname = \(table) AND i.indisprimary
                    """)[0].decode(Int64.self, at: 0)
                let tableExists = try await connection.query("""
                    SELECT count(*)::int8 FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
                    WHERE n.nspname = \(schema) AND c.relname = \(table)
                    """)[0].decode(Int64.self, at: 0) > 0
                if !tableExists { continue }
                guard present == 1 else {
                    throw CaptureError(
                        message: "table \(quoteIdentifier(schema)).\(quoteIdentifier(table)) has no primary key: capture names each changed row by it")
                }
                _ = try await connection.execute(
                    script: try await self.render("ALTER PUBLICATION %1$I ADD TABLE %2$I.%3$I", slot: name, schema: schema, table: table, on: connection))
            }
        }
        // The slot after the publication: pgoutput reads the publication in the catalog as of each change it
        // decodes, and a change from before the publication existed stops the stream for good ("publication
        // does not exist"). A slot that cannot be created in time takes the publication this call made with it,
        // so that no stack takes the schema as captured by decoding.
        do {
            try await Self.ensureSlot(name, replication: replication, on: connection, logger: logger)
        } catch {
            if createdPublication {
                _ = try? await connection.execute(script: try await self.render("DROP PUBLICATION IF EXISTS %1$I", slot: name, on: connection))
            }
            throw error
        }
        return (name, schema)
    }

    /// How long creating the slot may take. Creating a logical slot waits until every transaction running in the
    /// cluster when it started has ended (and, once, those running a moment later): one long transaction, or a
    /// `CREATE INDEX CONCURRENTLY` waiting behind one, holds it up for as long as it runs. Past this, the
    /// creation is cancelled (see ``ensureSlot(_:replication:on:logger:)``).
    package static let slotCreationTimeout: Duration = .seconds(20)

    /// Creates the slot unless it exists, and returns once it is consistent: every transaction that commits
    /// afterwards will be decoded from it. A slot another stack is still creating exists from the moment that
    /// creation starts, long before it is consistent, so a slot found (or reported as already existing) is
    /// waited for until its creation is done (`confirmed_flush_lsn` is set); a change committed before then
    /// would be decoded by no one.
    /// - Throws: ``CaptureError`` with ``CaptureError/slotCreationTimedOut`` when creating it took longer than
    ///   ``slotCreationTimeout`` (it is cancelled; nothing is left behind), or when the creation this call
    ///   waited for was cancelled (its creator timed out); the server's error otherwise.
    static func ensureSlot(_ name: String, replication: PGConfiguration, on connection: PGConnection, logger: Logger) async throws {
        if try await Self.isConsistent(name, on: connection) != nil {
            try await Self.waitUntilConsistent(name, on: connection)
            return
        }
        let replicationConnection = try await PGReplicationConnection.connect(to: Self.replicationSession(replication), logger: logger)
        defer { Task { await replicationConnection.close() } }
        let created: PGReplicationSlot?
        do {
            created = try await Self.createSlot(name, on: replicationConnection)
        } catch let error as CaptureError where error.slotCreationTimedOut {
            // The creation ended as the deadline passed, before its cancellation reached the server (the group
            // waited for it): the slot is there, and dropping the publication now would orphan it.
            if try await Self.isConsistent(name, on: connection) == true { return }
            throw error
        }
        if let created {
            logger.info(
                "created the change capture's replication slot",
                metadata: ["skyros.capture.slot": "\(name)", "skyros.capture.lsn": "\(created.consistentPoint)"])
        } else {
            try await Self.waitUntilConsistent(name, on: connection)
        }
    }

    /// Creates the slot, cancelling the creation after ``slotCreationTimeout``; `nil` when another session
    /// created it meanwhile. Returns or throws only once the creation has ended.
    private static func createSlot(_ name: String, on replicationConnection: PGReplicationConnection) async throws -> PGReplicationSlot? {
        try await withThrowingTaskGroup(of: PGReplicationSlot?.self) { group in
            group.addTask {
                do {
                    return try await replicationConnection.createLogicalSlot(name)
                } catch let error as PGError where error.sqlState == SQLState("42710") {
                    return nil    // another stack created it meanwhile
                }
            }
            group.addTask {
                try await Task.sleep(for: Self.slotCreationTimeout)
                throw CaptureError(
                    message: "creating the replication slot \(name) did not finish within \(Self.slotCreationTimeout): it waits for "
                        + "transactions that were running when it started (a long transaction, or a CREATE INDEX CONCURRENTLY)",
                    slotCreationTimedOut: true)
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }

    /// Whether the slot's creation is done (`false` while a session is still creating it); `nil` when there is
    /// no such slot.
    static func isConsistent(_ name: String, on connection: PGConnection) async throws -> Bool? {
        let rows = try await connection.query("""
            SELECT confirmed_flush_lsn IS NOT NULL FROM pg_replication_slots
            WHERE slot_name = \(name) AND database = current_database()
            """)
        return try rows.first?.decode(Bool.self, at: 0)
    }

    /// Polls until the slot's creation (by another session) is done, for at most ``slotCreationTimeout``.
    private static func waitUntilConsistent(_ name: String, on connection: PGConnection) async throws {
        let deadline = ContinuousClock.now + Self.slotCreationTimeout
        var pause = Duration.milliseconds(5)
        while true {
            guard let consistent = try await Self.isConsistent(name, on: connection) else {
                throw CaptureError(
                    message: "the replication slot \(name) that another session was creating is gone: its creation was "
                        + "cancelled (it waits for transactions that were running when it started)",
                    slotCreationTimedOut: true)
            }
            if consistent { return }
            if ContinuousClock.now >= deadline {
                throw CaptureError(
                    message: "the replication slot \(name), which another session is creating, was not ready within "
                        + "\(Self.slotCreationTimeout): its creation waits for transactions that were running when it started",
                    slotCreationTimedOut: true)
            }
            try await Task.sleep(for: pause)
            pause = min(pause * 2, .milliseconds(200))
        }
    }

    /// The publication's comment, which names the schema for operators (`\dRp+`) and for tools that clean up
    /// after a schema: `skyros change capture of schema <schema>`.
    package static func comment(schema: String) -> String { "skyros change capture of schema " + schema }

    /// The tables of `schema` that publication `name` publishes, by name. Read from the catalogs, not the
    /// `pg_publication_tables` view: its function fails on any publication of the database that another session
    /// drops meanwhile.
    func publishedTables(_ name: String, schema: String, on connection: PGConnection) async throws -> [String] {
        try await connection.query("""
            SELECT c.relname::text FROM pg_publication AS p JOIN pg_publication_rel AS r ON r.prpubid = p.oid
            JOIN pg_class AS c ON c.oid = r.prrelid JOIN pg_namespace AS n ON n.oid = c.relnamespace
            WHERE p.pubname = \(name) AND n.nspname = \(schema) ORDER BY 1
            """).map { try $0.decode(String.self, at: 0) }
    }

    /// Fills a template in on the server (`format()`; see ``ChangeCapture/render(_:table:on:)``): `%1$I` the
    /// slot/publication name, `%2$I` the schema, `%3$I` the table, `%4$L` the comment.
    func render(
        _ template: String, slot: String, schema: String = "", table: String = "", comment: String = "", on connection: PGConnection
    ) async throws -> String {
        try await connection.query(
            PGQuery(
                unsafeSQL: "SELECT format($1, $2, $3, $4, $5)",
                binds: [
                    PGValue(type: .text, text: template), PGValue(type: .text, text: slot), PGValue(type: .text, text: schema),
                    PGValue(type: .text, text: table), PGValue(type: .text, text: comment),
                ]))[0].decode(String.self, at: 0)
    }

    /// What is installed, for operators.
    package struct Status: Sendable {
        package var slot: String
        /// Whether the publication exists.
        package var hasPublication: Bool
        /// The published tables.
        package var tables: [String]
        /// Whether the slot exists, whether a relay streams from it, and the WAL it keeps (bytes).
        package var slotExists: Bool
        package var slotActive: Bool
        package var retainedBytes: Int64?
        package var confirmedFlush: String?
        /// PostgreSQL's `wal_status` of the slot: `reserved`, `extended`, `unreserved`, or `lost` (invalidated past
        /// `max_slot_wal_keep_size`: the next relay creates it again, see ``ChangeRelay``).
        package var walStatus: String?
    }

    /// Reads what is installed; changes nothing.
    package func status(on connection: PGConnection) async throws -> Status {
        let (schema, name) = try await self.names(on: connection)
        let publication = try await connection.query("SELECT count(*)::int8 FROM pg_publication WHERE pubname = \(name)")[0]
            .decode(Int64.self, at: 0) > 0
        let tables = try await self.publishedTables(name, schema: schema, on: connection)
        let slot = try await connection.query("""
            SELECT active, (pg_current_wal_lsn() - restart_lsn)::int8, confirmed_flush_lsn::text, wal_status FROM pg_replication_slots
            WHERE slot_name = \(name) AND database = current_database()
            """)
        return Status(
            slot: name, hasPublication: publication, tables: tables, slotExists: !slot.isEmpty,
            slotActive: try slot.first?.decode(Bool.self, at: 0) ?? false, retainedBytes: try slot.first?.decode(Int64?.self, at: 1),
            confirmedFlush: try slot.first?.decode(String?.self, at: 2), walStatus: try slot.first?.decode(String?.self, at: 3))
    }

    /// Drops the slot (ending the relay streaming from it) and the publication; with `includingLog`, the change
    /// log too. Stacks still running no longer learn of other writers' changes.
    package func drop(includingLog: Bool, on connection: PGConnection) async throws {
        let (schema, name) = try await self.names(on: connection)
        _ = try await connection.query("""
            SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
            WHERE slot_name = \(name) AND database = current_database() AND active_pid IS NOT NULL
            """)
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let active = try await connection.query("""
                SELECT count(*)::int8 FROM pg_replication_slots WHERE slot_name = \(name) AND database = current_database() AND active
                """)[0].decode(Int64.self, at: 0)
            if active == 0 { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        // The publication before the slot: a relay that finds the slot gone while the publication remains creates
        // the slot again (``ChangeRelay``), and a slot nobody relays keeps WAL for ever.
        var template = "DROP PUBLICATION IF EXISTS %1$I"
        if includingLog {
            template += ";\nDROP TABLE IF EXISTS %2$I.\(ChangeLog.logTableName), %2$I.\(ChangeLog.stateTableName)"
        }
        _ = try await connection.execute(
            script: try await self.render(template, slot: name, schema: schema, on: connection))
        _ = try await connection.query("""
            SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = \(name) AND database = current_database()
            """)
    }
}
