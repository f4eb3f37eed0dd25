import Foundation
import SkyrosPostgres
import SkyrosStore
import SkyrosStack

/// The durable change log of one schema: `skyros_change_log`, written in every commit transaction together
/// with one `pg_notify` hint, read by every stack's ``ChangeFeed`` to learn of other processes' commits.
///
/// Positions come from a sequence and are not assigned in commit order, so readers track transaction ids
/// (``ChangeCursor``). Pruning records the newest pruned transaction id in `skyros_change_log_state`, so a
/// reader can tell whether rows it never saw were pruned.
package struct ChangeLog: Sendable {
    /// The schema, or `nil` for the connection's current schema.
    let schema: String?
    /// The NOTIFY channel (at most 63 bytes).
    let channel: String

    /// The statement texts of ``recordStatement(_:origin:includingRows:)``: the hint without and with the entry
    /// (built once per log).
    private let recordSQL: String
    private let recordWithEntrySQL: String

    /// Whether the commit transactions name their writer with a logical decoding message (the logical source)
    /// instead of settings the capture's triggers read.
    package var namesOriginInWAL = false

    package init(schema: String?) {
        self.schema = schema
        self.channel = Self.channelName(schema: schema)
        let insert = "WITH entry AS (INSERT INTO \(Self.qualified(Self.logTableName, in: schema)) (origin, changes) VALUES ($1::uuid, $2) "
        self.recordSQL = insert + "RETURNING position) SELECT position, pg_notify($3, position::text || ' ' || $1) FROM entry"
        // The tag (see ``HintKey``) covers `<position> <origin> <xid> <changes>`; `-` (never verifies) if the
        // state row has no keys. The columns are named directly: reading them through `to_jsonb` (which would
        // survive their absence) cost 29 µs of server time per commit, against 6 µs (see ``ChangeFeed/read()``
        // for a state table that lacks them).
        self.recordWithEntrySQL = insert
            + "RETURNING position, xid), hint AS (SELECT position, position::text || ' ' || $1 || ' ' || xid::text AS head FROM entry) "
            + "SELECT position, pg_notify($3, head || ' ' || coalesce((SELECT encode(substring(sha256(s.hint_outer || sha256(s.hint_inner "
            + "|| convert_to(head || ' ' || $4, 'UTF8'))) FROM 1 FOR \(HintKey.tagBytes)), 'hex') "
            + "FROM \(Self.qualified(Self.stateTableName, in: schema)) AS s), '-') || ' ' || $4) FROM hint"
    }

    /// `skyros_changes_<schema>`, or a hash of the schema when that would be longer than an identifier.
    static func channelName(schema: String?) -> String {
        let base = "skyros_changes_"
        let name = schema ?? "default"
        if base.utf8.count + name.utf8.count <= 63 { return base + name }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return base + String(hash, radix: 16)
    }

    private func qualified(_ name: String) -> String { Self.qualified(name, in: self.schema) }

    private static func qualified(_ name: String, in schema: String?) -> String {
        if let schema { return "\(quoteIdentifier(schema)).\(quoteIdentifier(name))" }
        return quoteIdentifier(name)
    }

    /// The log's table and its state table, unqualified.
    static let logTableName = PostgresStore.changeLogTable
    static let stateTableName = PostgresStore.changeLogStateTable

    var logTable: String { self.qualified(Self.logTableName) }
    private var stateTable: String { self.qualified(Self.stateTableName) }

    /// Creates the log tables unless they exist (serialised by an advisory lock: several processes start at once).
    func createIfNeeded(on connection: PGConnection) async throws {
        try await connection.withTransaction { try await self.create(on: $0) }
    }

    /// Creates the log tables unless they exist, inside the caller's transaction, and upgrades what earlier
    /// versions made.
    func create(on connection: PGConnection) async throws {
        _ = try await connection.query("SELECT pg_advisory_xact_lock(hashtext(\(self.logTable)))")
        // `CREATE INDEX IF NOT EXISTS` needs to own the table even when the index exists: a log a DBA created
        // (see ``ChangeCapture/installSQL(_:)``) is left as it is.
        let exists = try await connection.query(
            "SELECT to_regclass(\(self.logTable)) IS NOT NULL AND to_regclass(\(self.stateTable)) IS NOT NULL"
        ).first?.decode(Bool.self, at: 0)
        if exists != true { _ = try await connection.execute(script: self.createSQL) }
        try await self.upgradeStateTable(on: connection)
        try await self.upgradeChangesColumn(on: connection)
    }

    /// The log's tables and state row, created unless they exist.
    var createSQL: String {
        """
        CREATE TABLE IF NOT EXISTS \(self.logTable) (
            position bigserial PRIMARY KEY,
            xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
            origin uuid NOT NULL,
            changed_at timestamptz NOT NULL DEFAULT now(),
            changes text NOT NULL);
        CREATE INDEX IF NOT EXISTS skyros_change_log_xid ON \(self.logTable) (xid);
        CREATE TABLE IF NOT EXISTS \(self.stateTable) (
            id boolean PRIMARY KEY DEFAULT true CHECK (id),
            pruned_through xid8 NOT NULL DEFAULT '0',
            log_id uuid NOT NULL DEFAULT gen_random_uuid(),
            hint_inner bytea NOT NULL DEFAULT \(Self.randomKey),
            hint_outer bytea NOT NULL DEFAULT \(Self.randomKey),
            relayed_through pg_lsn NOT NULL DEFAULT '0/0');
        INSERT INTO \(self.stateTable) (id) VALUES (true) ON CONFLICT (id) DO NOTHING
        """
    }

    var stateTableQualified: String { self.stateTable }

    /// 64 random bytes, from `gen_random_uuid()` (a strong random source; 488 random bits).
    private static let randomKey = "decode(replace(" + Array(repeating: "gen_random_uuid()::text", count: 4).joined(separator: " || ")
        + ", '-', ''), 'hex')"

    /// Adds the columns that state tables made by earlier versions lack (the log's identity, the hint keys), only
    /// when one is missing: `ALTER TABLE` locks the table, which every commit reads.
    private func upgradeStateTable(on connection: PGConnection) async throws {
        let present = try await connection.query("""
            SELECT a.attname::text FROM pg_attribute AS a
            WHERE a.attrelid = to_regclass(\(self.stateTable)) AND a.attnum > 0 AND NOT a.attisdropped
            """).map { try $0.decode(String.self, at: 0) }
        let wanted = [
            ("log_id", "uuid NOT NULL DEFAULT gen_random_uuid()"), ("hint_inner", "bytea NOT NULL DEFAULT \(Self.randomKey)"),
            ("hint_outer", "bytea NOT NULL DEFAULT \(Self.randomKey)"), ("relayed_through", "pg_lsn NOT NULL DEFAULT '0/0'"),
        ]
        for (column, definition) in wanted where !present.contains(column) {
            _ = try await connection.execute(script: "ALTER TABLE \(self.stateTable) ADD COLUMN IF NOT EXISTS \(column) \(definition)")
        }
    }

    /// Stores `changes` as lz4-compressed text: `jsonb` makes PostgreSQL parse and re-serialise every entry and
    /// compress it with pglz, several times the server time per announced row (Benchmarks/README.md). Logs made
    /// by earlier versions hold `jsonb` and are converted. Readers take the column as text either way, and a
    /// process of an earlier version still writes `jsonb` into the text column (an assignment cast) during a
    /// rolling upgrade.
    /// lz4 is skipped where the server was built without it (and before PostgreSQL 14).
    private func upgradeChangesColumn(on connection: PGConnection) async throws {
        let column = try await connection.query("""
            SELECT format_type(a.atttypid, NULL), coalesce(to_jsonb(a) ->> 'attcompression', 'l')
            FROM pg_attribute AS a WHERE a.attrelid = to_regclass(\(self.logTable)) AND a.attname = 'changes'
            """)
        guard let row = column.first else { return }
        if try row.decode(String.self, at: 0) == "jsonb" {
            _ = try await connection.execute(script: "ALTER TABLE \(self.logTable) ALTER COLUMN changes TYPE text USING changes::text")
        }
        if try row.decode(String.self, at: 1) != "l" {
            _ = try await connection.execute(script: "SAVEPOINT skyros_compression")
            do {
                _ = try await connection.execute(script: "ALTER TABLE \(self.logTable) ALTER COLUMN changes SET COMPRESSION lz4")
                _ = try await connection.execute(script: "RELEASE SAVEPOINT skyros_compression")
            } catch let error as PGError where error.sqlState == .featureNotSupported || error.sqlState == SQLState("42501") {
                // Built without lz4, or the log belongs to another role (a DBA installed it): pglz stays.
                _ = try await connection.execute(script: "ROLLBACK TO SAVEPOINT skyros_compression; RELEASE SAVEPOINT skyros_compression")
            }
        }
    }

    /// The statement a stack's commit transaction runs so that the capture (``ChangeCapture``) attributes its
    /// entry to `origin`: the writer then skips it. `rows` is how many rows the transaction changes; when the
    /// capture counts another number (a cascade, a trigger writing another mapped table), the entry is left to
    /// every stack, the writer's own included. With `includingRows` (``ChangeFeedConfiguration/includesRowsInHints``),
    /// updates that announce their row (``RowChange/row``) travel with it in the hint, up to
    /// ``announcedRowsHintLimit`` bytes: other stacks then refresh their cached copy instead of reading the row
    /// again. `nil` when `changes` is empty.
    /// - Parameter origin: the writing stack's id, as lowercase text.
    package func originStatement(_ changes: [RowChange], origin: String, includingRows: Bool = false) -> PGQuery? {
        if changes.isEmpty { return nil }
        var announced = ""
        if includingRows {
            let payload = LoggedRowChange.json(changes)
            if Self.mayFitWithRows(changes, payload: payload) {
                let withRows = LoggedRowChange.json(changes, rows: true)
                if withRows.utf8.count <= Self.announcedRowsHintLimit { announced = withRows }
            }
        }
        if self.namesOriginInWAL {
            let content = RelayAssembler.originContent(origin: origin, rows: changes.count, announced: announced)
            return PGQuery(unsafeSQL: Self.originMessageSQL, binds: [PGValue(type: .text, text: content)])
        }
        return PGQuery(
            unsafeSQL: Self.originSQL,
            binds: [
                PGValue(type: .text, text: origin), PGValue(type: .text, text: String(changes.count)),
                PGValue(type: .text, text: announced),
            ])
    }

    private static let originSQL = "SELECT set_config('skyros.origin', $1, true), set_config('skyros.origin_rows', $2, true), "
        + "set_config('skyros.announced', $3, true)"

    /// With logical decoding the writer names itself in the WAL: a transactional message, decoded with the
    /// transaction's changes by the relay (``RelayAssembler``) and by nothing else.
    private static let originMessageSQL = "SELECT pg_logical_emit_message(true, '\(RelayAssembler.messagePrefix)', $1)"

    /// Appends one entry for the transaction running on `connection` and sends the hint on ``channel``, as the
    /// capture's flush does (both take effect at COMMIT). Stacks never write the log through it: capture does
    /// (``ChangeCapture``). Tests of the reading side use it to place entries precisely.
    /// - Parameter origin: the writing stack's id, as lowercase text (as ``recordStatement(_:origin:includingRows:)``).
    /// - Returns: the entry's position, or `nil` when `changes` is empty (nothing is written or sent).
    @discardableResult
    package func record(_ changes: [RowChange], origin: String, on connection: PGConnection) async throws -> Int64? {
        guard let statement = self.recordStatement(changes, origin: origin) else { return nil }
        return try await connection.query(statement).first?.decode(Int64.self, at: 0)
    }

    /// Change lists up to this many bytes of JSON also travel in the hint (a row or two; see ``Hint``).
    static let inlineHintLimit = 256
    /// A change list with announced rows (``RowChange/row``) travels in the hint up to this many bytes of
    /// JSON (well under NOTIFY's 8000-byte limit, and small next to the commit's own work under NOTIFY's
    /// lock); a larger one travels without its rows.
    static let announcedRowsHintLimit = 2048

    /// The statement ``record(_:origin:on:)`` runs (its one row: the position), `nil` when `changes` is empty.
    /// The hint is `<position> <origin>` (see ``Hint``): a stack skips its own without reading the log. When the
    /// changes' JSON is at most ``inlineHintLimit`` bytes, the hint also carries the transaction id and that
    /// JSON, so other stacks act on it without a log read; the log still records every entry. With
    /// `includingRows` (``ChangeFeedConfiguration/includesRowsInHints``), updates that announce their row
    /// (``RowChange/row``) travel with it in the hint, up to ``announcedRowsHintLimit`` bytes: other stacks
    /// then refresh their cached copy instead of reading the row again.
    /// - Parameter origin: the writing stack's id, as lowercase text.
    package func recordStatement(_ changes: [RowChange], origin: String, includingRows: Bool = false) -> PGQuery? {
        if changes.isEmpty { return nil }
        let payload = LoggedRowChange.json(changes)
        // Bound without a type, so the server reads it as the column's: `text` since the column was converted
        // (``upgradeChangesColumn(on:)``), `jsonb` in a log an earlier version created (after a store rebuild).
        let stored = PGValue(type: .unspecified, text: payload)
        let binds = [PGValue(type: .text, text: origin), stored, PGValue(type: .text, text: self.channel)]
        var hinted: String?
        if includingRows, Self.mayFitWithRows(changes, payload: payload) {
            let withRows = LoggedRowChange.json(changes, rows: true)
            if withRows.utf8.count <= Self.announcedRowsHintLimit { hinted = withRows }
        }
        if hinted == nil, payload.utf8.count <= Self.inlineHintLimit { hinted = payload }
        guard let hinted else { return PGQuery(unsafeSQL: self.recordSQL, binds: binds) }
        return PGQuery(unsafeSQL: self.recordWithEntrySQL, binds: binds + [PGValue(type: .text, text: hinted)])
    }

    /// Whether `changes` with their rows may fit in ``announcedRowsHintLimit`` bytes of JSON (a lower bound
    /// on their size, so a large group's rows are not written out only to be dropped).
    private static func mayFitWithRows(_ changes: [RowChange], payload: String) -> Bool {
        var size = payload.utf8.count
        var anyRow = false
        for change in changes {
            guard let row = change.row else { continue }
            anyRow = true
            size += 16 + row.layout.utf8.count
            for value in row.values { size += 6 + (value.text?.utf8.count ?? 4) }
            if size > Self.announcedRowsHintLimit { return false }
        }
        return anyRow
    }

    /// A hint's payload: the entry's position and the stack that wrote it; from a capture of version 2 on, its
    /// commit time and how many rows it changed (`@<microseconds since 1970>/<rows>`); and for a small entry
    /// its transaction id, a tag that authenticates it (see ``HintKey``) and its changes
    /// (`<position> <origin> [@<committed>/<rows>] <xid> <tag> <changes JSON>`).
    ///
    /// A stack of capture version 1 parses a version 2 hint's stamp as the transaction id: it does not verify,
    /// so that stack reads the log for it (it still skips its own hints by their origin).
    struct Hint: Equatable {
        var position: Int64
        var origin: UUID?
        /// The commit time (microseconds since 1970, by the server's clock), when the hint carries it.
        var committedAt: Int64?
        /// The rows the transaction changed, as the capture counted them, when the hint carries it.
        var rows: Int?
        /// The transaction id, the tag and the changes' JSON, when the entry travelled in the hint; `head` is
        /// `<position> <origin> [<stamp>] <xid>`, which the tag covers with the changes.
        var inline: (head: Substring, xid: Substring, tag: Substring, changes: Substring)?

        /// Parses `<position> <origin> [@<committed>/<rows>] [<xid> <tag> <changes>]` (or a bare position).
        init?(_ payload: String) {
            // Split on the UTF-8 bytes: splitting the `String` compared grapheme clusters, a visible cost on the
            // path from another process's commit to an observer.
            let utf8 = payload.utf8
            let parts = utf8.split(separator: UInt8(ascii: " "), maxSplits: 5)
            guard let first = parts.first, let position = Int64(Substring(first)) else { return nil }
            self.position = position
            self.origin = parts.count > 1 ? UUID(uuidString: String(Substring(parts[1]))) : nil
            var next = 2
            if parts.count > 2, parts[2].first == UInt8(ascii: "@") {
                let stamp = parts[2].dropFirst().split(separator: UInt8(ascii: "/"), maxSplits: 1)
                self.committedAt = stamp.first.flatMap { Int64(Substring($0)) }
                self.rows = stamp.count > 1 ? Int(Substring(stamp[1])) : nil
                next = 3
            }
            if parts.count >= next + 3 {
                // The changes run to the end (their JSON may hold spaces).
                let head = Substring(utf8[utf8.startIndex..<parts[next].endIndex])
                let changes = Substring(utf8[parts[next + 2].startIndex..<utf8.endIndex])
                self.inline = (head, Substring(parts[next]), Substring(parts[next + 1]), changes)
            }
        }

        /// The entry the hint carries, if any and if its tag verifies with `key`. `nil` also when it does not
        /// decode, or without a key (none read yet): then the log is read.
        func entry(verifiedWith key: HintKey?) -> ChangeLogEntry? {
            guard let inline = self.inline, let origin = self.origin, let key, UInt64(inline.xid) != nil,
                key.verifies(inline.tag, of: [inline.head.utf8, Substring(" ").utf8, inline.changes.utf8]),
                let changes = try? LoggedRowChange.decodeList(inline.changes)
            else { return nil }
            return ChangeLogEntry(position: self.position, xid: String(inline.xid), origin: origin, changes: changes)
        }

        static func == (lhs: Hint, rhs: Hint) -> Bool {
            lhs.position == rhs.position && lhs.origin == rhs.origin && lhs.committedAt == rhs.committedAt
                && lhs.rows == rhs.rows && lhs.inline?.head == rhs.inline?.head
                && lhs.inline?.tag == rhs.inline?.tag && lhs.inline?.changes == rhs.inline?.changes
        }
    }

    /// A log read's snapshot: which transactions it saw finished (see ``ChangeCursor``).
    struct ReadSnapshot: Sendable, Equatable {
        /// Every transaction below it had finished.
        var xmin: String
        /// No transaction from it on had started.
        var xmax: String
        /// The transactions between the two still in progress.
        var running: [String]
    }

    /// The entries of `window` (see ``ChangeCursor/Window``; `nil`: those whose transaction id is at least the
    /// snapshot's `xmin`, so a new reader starts from now, not from the whole log), with the reading snapshot,
    /// the pruning watermark, and the log's identity (a new one after the schema was destroyed and the log
    /// created again). One statement, so one snapshot and one round trip. `committed` holds each entry's commit
    /// time by position (`changed_at`, which the capture's flush stamps with `clock_timestamp()` at `COMMIT`),
    /// in microseconds since 1970.
    /// - Parameter excluding: an origin whose entries are left out (a stack's own: it skips them anyway).
    func read(after window: ChangeCursor.Window?, excluding origin: UUID? = nil, on connection: PGConnection) async throws
        -> (
            entries: [ChangeLogEntry], committed: [Int64: Int64], snapshot: ReadSnapshot, prunedThrough: String, logID: UUID,
            hintKey: HintKey?
        )
    {
        // The head row (kind 0) first, then the entries; a join would make the planner guess the state table's
        // size (never analysed), overestimate the cost a thousandfold and JIT-compile a trivial query. The
        // transactions in progress are few (those holding an id), and `xid = ANY(…)` with `xid >= …` is two
        // scans of the xid index.
        let running = "{" + (window?.running ?? []).joined(separator: ",") + "}"
        let rows = try await connection.query("""
            SELECT 0 AS kind, pg_snapshot_xmin(snap)::text, pruned_through::text,
                   NULL::int8 AS position, pg_snapshot_xmax(snap)::text, log_id,
                   substr(to_jsonb(s) ->> 'hint_inner', 3) || substr(to_jsonb(s) ->> 'hint_outer', 3),
                   array_to_string(ARRAY(SELECT pg_snapshot_xip(snap)), ','), NULL::int8
            FROM \(unsafeRaw: self.stateTable) AS s, pg_current_snapshot() AS snap
            UNION ALL
            SELECT 1, NULL, NULL, position, xid::text, origin, changes::text, NULL,
                   floor(extract(epoch FROM changed_at) * 1000000)::int8
            FROM \(unsafeRaw: self.logTable)
            WHERE (xid >= coalesce(\(try PGValue(window?.from))::xid8, pg_snapshot_xmin(pg_current_snapshot()))
                   OR xid = ANY(\(running)::text::xid8[]))
              AND origin IS DISTINCT FROM \(try PGValue(origin))::uuid
            ORDER BY kind, position
            """)
        guard let first = rows.first, try first.decode(Int.self, at: 0) == 0 else {
            throw PGError(kind: .undefinedTable, message: "the change log state row of \(self.logTable) is missing")
        }
        let inProgress = try first.decode(String.self, at: 7)
        let snapshot = ReadSnapshot(
            xmin: try first.decode(String.self, at: 1), xmax: try first.decode(String.self, at: 4),
            running: inProgress.isEmpty ? [] : inProgress.split(separator: ",").map(String.init))
        let pruned = try first.decode(String.self, at: 2)
        let logID = try first.decode(UUID.self, at: 5)
        let hintKey = try first.decode(String?.self, at: 6).flatMap { HintKey(hex: $0) }
        var entries: [ChangeLogEntry] = []
        var committed: [Int64: Int64] = [:]
        for row in rows.dropFirst() {
            let position = try row.decode(Int64.self, at: 3)
            entries.append(
                ChangeLogEntry(
                    position: position, xid: try row.decode(String.self, at: 4), origin: try row.decode(UUID.self, at: 5),
                    changes: try LoggedRowChange.decodeList(try row.decode(String.self, at: 6))))
            committed[position] = try row.decode(Int64.self, at: 8)
        }
        return (entries, committed, snapshot, pruned, logID, hintKey)
    }

    /// Deletes committed entries older than `age`, and beyond the newest `maxEntries`; raises the pruning
    /// watermark to the newest deleted transaction id in the same statement, so a reader whose horizon is
    /// not above it knows it may have lost entries.
    ///
    /// Only entries of transactions below the oldest `xmin` of the server's snapshots are deleted. A reader's
    /// horizon is its snapshot's `xmin`, which any long transaction anywhere on the server holds back: pruning
    /// entries above it made every reader see a gap at every prune (a cache flush in every stack, every
    /// observer refetching) for as long as that transaction stayed open. Such entries are kept until it ends,
    /// as PostgreSQL's own vacuum keeps row versions.
    /// - Returns: the number of entries deleted.
    @discardableResult
    func prune(olderThan age: Duration, keepingAtMost maxEntries: Int, on connection: PGConnection) async throws -> Int {
        let seconds = Double(age.components.seconds) + Double(age.components.attoseconds) / 1e18
        let rows = try await connection.query("""
            WITH doomed AS (
                DELETE FROM \(unsafeRaw: self.logTable)
                WHERE (changed_at < now() - make_interval(secs => \(seconds))
                       OR position <= (SELECT max(position) FROM \(unsafeRaw: self.logTable)) - \(Int64(maxEntries)))
                  AND xid < pg_snapshot_xmin(pg_current_snapshot())
                RETURNING xid)
            UPDATE \(unsafeRaw: self.stateTable) SET pruned_through = greatest(pruned_through, (SELECT max(xid) FROM doomed))
            WHERE (SELECT count(*) FROM doomed) > 0
            RETURNING (SELECT count(*) FROM doomed)
            """)
        return try rows.first.map { try $0.decode(Int.self, at: 0) } ?? 0
    }
}
