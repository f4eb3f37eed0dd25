import Foundation
import SkyrosPostgres
import SkyrosStore

/// Capture in the database: statement-level `AFTER` triggers with transition tables on every mapped table write
/// each committed change, whoever made it (Skyros, psql, another service, a cascade, a trigger, `COPY`, a data
/// migration), into the change log, and send one hint per transaction.
///
/// The objects, all in the log's schema:
/// - `skyros_capture()`, run by four triggers per mapped table (`skyros_capture_insert`, `_update`, `_delete`,
///   `_truncate`), adds the statement's changed keys to a transaction-local buffer (a custom setting, so a
///   rolled-back savepoint takes its changes with it). The first one in a transaction also inserts an empty log
///   row.
/// - `skyros_capture_flush()`, a `DEFERRABLE INITIALLY DEFERRED` constraint trigger on that empty row, runs at
///   `COMMIT`: it fills the row with the buffer and sends the hint (with the entry and its tag when small, see
///   ``HintKey``). So there is one log row and one hint per transaction, for committed data only, in commit
///   order. A buffer over ``spillBytes`` is written as a row of its own first, so a transaction of many statements
///   costs linear time. The row's `changed_at` and the hint carry the commit time (`clock_timestamp()` at
///   `COMMIT`, for the feed's lag metric), and the hint the number of rows captured (see ``ChangeLog/Hint``).
///
/// The writing stack's id (`skyros.origin`) and the number of rows it changed (`skyros.origin_rows`) are set by
/// its commit transaction. The entry carries that origin, so the writer skips it, only when the rows captured
/// are exactly as many as it changed; otherwise (a cascade of its delete, a trigger writing another mapped
/// table) the entry is every stack's, the writer's too. A transaction without the settings is another writer's.
///
/// Versioned: the functions carry ``version`` in their comment. A stack installs its definition when none or an
/// older one is installed, never over a newer one, so instances of two versions can run side by side; each
/// version writes the same log format. Version 2 adds the commit time and the row count to the hint: a stack of
/// version 1 reads the log for a version 2 hint that carries its entry (it cannot verify it), and a stack of
/// version 2 takes a version 1 hint as it is (with no lag to record). Version 3 writes the same log and hints; it
/// reads user rows only as `alias.*` and lets no column shadow its variables, so a table with a column named
/// `n`, `o` or `prefix` is captured like any other (see ``functionsTemplate``).
package struct ChangeCapture: Sendable {
    /// The version of the capture's definition (the functions' comment is `skyros capture <version>`).
    package static let version = 4

    /// The origin of entries other writers made (no Skyros stack set one).
    package static let foreignOrigin = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))

    /// Bytes of buffered changes past which a transaction's buffer is written out as a log row of its own.
    static let spillBytes = 8192

    /// A mapped table as the capture's triggers name it: its primary key's columns (in column order) and the
    /// key's type (``PGType/record`` for a composite key, named by its row text, see `CompositeKey`).
    package struct Table: Sendable, Hashable {
        package var name: String
        package var keyColumns: [String]
        package var keyType: UInt32

        /// Whether the key has several columns.
        var isComposite: Bool { self.keyColumns.count > 1 }

        /// The triggers' first argument: the key column, or a composite key's columns as a `text[]` literal.
        var keyArgument: String {
            guard self.isComposite else { return self.keyColumns[0] }
            let quoted = self.keyColumns.map { column in
                "\"" + column.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
            }
            return "{" + quoted.joined(separator: ",") + "}"
        }

        /// The triggers' arguments: the key, its type's OID, and `row` for a composite key.
        var triggerArguments: [String] {
            [self.keyArgument, String(self.keyType)] + (self.isComposite ? ["row"] : [])
        }
    }

    /// What ``inspect(tables:on:)`` found.
    package struct Inspection: Sendable {
        /// The installed definition's version, `nil` when none is.
        package var installedVersion: Int?
        /// The mapped tables, with their keys.
        package var tables: [Table]
        /// Tables whose capture triggers are missing or name another key.
        package var tablesToInstall: [Table]
        /// Whether the log's flush trigger exists.
        package var hasFlushTrigger: Bool
        /// Tables with a `BEFORE INSERT` or `BEFORE UPDATE` row trigger other than Skyros's: the stored row may
        /// differ from the one a stack wrote.
        package var rewritingTables: Set<String>
        /// Tables that do not exist (yet): captured once a stack first writes them.
        package var missingTables: Set<String>

        /// Whether this stack's definition must be installed (none, or an older one).
        package var needsFunctions: Bool { (self.installedVersion ?? 0) < ChangeCapture.version }
        package var isCurrent: Bool { !self.needsFunctions && self.hasFlushTrigger && self.tablesToInstall.isEmpty }
    }

    let log: ChangeLog

    package init(log: ChangeLog) { self.log = log }

    private var schemaPrefix: String { self.log.schema.map { quoteIdentifier($0) + "." } ?? "" }
    private var captureFunction: String { self.schemaPrefix + "skyros_capture" }

    private func qualified(_ table: String) -> String { self.schemaPrefix + quoteIdentifier(table) }

    // MARK: Inspecting

    /// Reads the installed capture's version, each table's primary key and capture triggers, and the tables
    /// whose rows a `BEFORE` trigger may rewrite. Reads only.
    /// - Throws: ``CaptureError`` when a table has no primary key.
    package func inspect(tables names: [String], on connection: PGConnection) async throws -> Inspection {
        let version = try await connection.query(
            "SELECT obj_description(to_regprocedure(\(self.captureFunction + "()")), 'pg_proc')"
        ).first?.decode(String?.self, at: 0)
        let installed = version.flatMap { text -> Int? in
            guard text.hasPrefix("skyros capture ") else { return nil }
            return Int(text.dropFirst("skyros capture ".count))
        }
        let flush = try await connection.query("""
            SELECT count(*)::int8 FROM pg_trigger WHERE tgrelid = to_regclass(\(self.log.logTable)) AND tgname = 'skyros_capture_flush'
            """).first?.decode(Int64.self, at: 0) ?? 0
        var tables: [Table] = []
        var toInstall: [Table] = []
        var rewriting: Set<String> = []
        var missing: Set<String> = []
        for name in names {
            let exists = try await connection.query("SELECT to_regclass(\(self.qualified(name))) IS NOT NULL").first?.decode(Bool.self, at: 0)
            if exists != true {
                missing.insert(name)
                continue
            }
            let keys = try await connection.query("""
                SELECT a.attname::text, a.atttypid::int8 FROM pg_index AS i
                JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
                WHERE i.indrelid = to_regclass(\(self.qualified(name))) AND i.indisprimary ORDER BY a.attnum
                """)
            guard let key = keys.first else {
                throw CaptureError(message: "table \(self.qualified(name)) has no primary key: capture names each changed row by it")
            }
            let table = Table(
                name: name, keyColumns: try keys.map { try $0.decode(String.self, at: 0) },
                keyType: keys.count > 1 ? PGType.record.rawValue : UInt32(try key.decode(Int64.self, at: 1)))
            tables.append(table)
            // tgtype bits: 1 row, 2 before, 4 insert, 8 delete, 16 update, 32 truncate.
            let triggers = try await connection.query("""
                SELECT t.tgname::text, encode(t.tgargs, 'hex'), t.tgfoid = coalesce(to_regprocedure(\(self.captureFunction + "()"))::oid, 0),
                       t.tgtype::int
                FROM pg_trigger AS t WHERE t.tgrelid = to_regclass(\(self.qualified(name))) AND NOT t.tgisinternal
                """)
            var present: Set<String> = []
            let arguments = Self.triggerArgumentsHex(table)
            for row in triggers {
                let triggerName = try row.decode(String.self, at: 0)
                let type = try row.decode(Int.self, at: 3)
                if Self.triggerNames.contains(triggerName) {
                    if try row.decode(String.self, at: 1) == arguments, try row.decode(Bool.self, at: 2) { present.insert(triggerName) }
                } else if type & 3 == 3, type & (4 | 16) != 0 {
                    rewriting.insert(name)
                }
            }
            if present.count != Self.triggerNames.count { toInstall.append(table) }
        }
        return Inspection(
            installedVersion: installed, tables: tables, tablesToInstall: toInstall, hasFlushTrigger: flush > 0,
            rewritingTables: rewriting, missingTables: missing)
    }

    static let triggerNames: Set<String> = ["skyros_capture_insert", "skyros_capture_update", "skyros_capture_delete", "skyros_capture_truncate"]

    /// The triggers' arguments as `pg_trigger.tgargs` stores them (each NUL-terminated), in hex.
    static func triggerArgumentsHex(_ table: Table) -> String {
        let bytes: [UInt8] = table.triggerArguments.flatMap { Array($0.utf8) + [0] }
        return bytes.map { String(format: "%02x", $0) }.joined()
    }

    // MARK: Installing

    /// Installs (or upgrades) the capture on `tables` unless it is current: in one transaction, under the
    /// migrations' advisory lock (`lock`: the key's text, see ``lockKeySQL(_:)``), together with the log's
    /// tables. Idempotent; several processes may start at once.
    /// - Returns: the inspection, as the installation left it.
    /// - Throws: ``CaptureError`` naming the table and carrying the SQL a DBA must run when this role may not
    ///   create the triggers or functions (nothing is changed then), or the server's error.
    package func install(tables names: [String], lock: (schema: String, table: String), on connection: PGConnection) async throws -> Inspection {
        let before = try await self.inspect(tables: names, on: connection)
        if before.isCurrent { return before }
        var failedTable: String?
        var installed = before
        do {
            try await connection.withTransaction { connection in
                _ = try await connection.query(
                    PGQuery(
                        unsafeSQL: "SELECT pg_advisory_xact_lock(\(Self.lockKeySQL))",
                        binds: [PGValue(type: .text, text: lock.schema), PGValue(type: .text, text: lock.table)]))
                try await self.log.create(on: connection)
                // Read again under the lock: another process may have installed it meanwhile.
                let current = try await self.inspect(tables: names, on: connection)
                var script = ""
                if current.needsFunctions { script += Self.functionsTemplate + ";\n" }
                if current.needsFunctions || !current.hasFlushTrigger { script += Self.flushTriggerTemplate + ";\n" }
                if !script.isEmpty { _ = try await connection.execute(script: try await self.render(script, on: connection)) }
                for table in current.needsFunctions ? current.tables : current.tablesToInstall {
                    failedTable = table.name
                    _ = try await connection.execute(script: try await self.render(Self.triggersTemplate(for: table), table: table, on: connection))
                }
                failedTable = nil
                installed = current
            }
        } catch let error as PGError where error.sqlState == SQLState("42501") {
            let table = failedTable.map { "table \(self.qualified($0))" } ?? "schema \(self.log.schema ?? "current_schema()")"
            throw CaptureError(
                message: """
                    this role may not install change capture on \(table) (\(error.message)); nothing was changed. \
                    A role that owns the tables must run the SQL below once (also printed by `migrate capture-sql`)
                    """,
                sql: try await self.installSQL(before.tables, on: connection))
        }
        // What the transaction made current (the key, rewriting and missing tables do not change by installing).
        installed.installedVersion = max(installed.installedVersion ?? 0, Self.version)
        installed.tablesToInstall = []
        installed.hasFlushTrigger = true
        return installed
    }

    /// What is installed in the log's schema, for operators (`migrate capture status`).
    package struct Status: Sendable {
        /// The schema looked at (the log's, else the connection's current one).
        package var schema: String
        /// The installed definition's version, `nil` when none is.
        package var installedVersion: Int?
        /// The tables carrying capture triggers, by name.
        package var capturedTables: [String]
        /// The change log's entries, `nil` when it does not exist.
        package var logEntries: Int64?
        /// Seconds since the newest entry was committed, `nil` without entries.
        package var newestEntryAge: Double?
    }

    /// Reads what is installed; changes nothing.
    package func status(on connection: PGConnection) async throws -> Status {
        let version = try await self.inspect(tables: [], on: connection).installedVersion
        let schema = self.log.schema.map { PGValue(type: .text, text: $0) } ?? PGValue(type: .text, text: nil)
        let tables = try await connection.query(
            PGQuery(
                unsafeSQL: """
                    SELECT DISTINCT c.relname::text, n.nspname::text FROM pg_trigger AS t
                    JOIN pg_class AS c ON c.oid = t.tgrelid JOIN pg_namespace AS n ON n.oid = c.relnamespace
                    WHERE n.nspname = coalesce($1, current_schema()) AND t.tgname = ANY($2::text[]) ORDER BY 1
                    """,
                binds: [schema, PGValue(type: .text, text: "{" + Self.triggerNames.sorted().joined(separator: ",") + "}")]))
        let schemaName = try await connection.query(PGQuery(unsafeSQL: "SELECT coalesce($1, current_schema())::text", binds: [schema]))
            .first?.decode(String?.self, at: 0) ?? ""
        var status = Status(
            schema: schemaName, installedVersion: version, capturedTables: try tables.map { try $0.decode(String.self, at: 0) })
        let exists = try await connection.query("SELECT to_regclass(\(self.log.logTable)) IS NOT NULL").first?.decode(Bool.self, at: 0)
        if exists == true {
            let row = try await connection.query(
                "SELECT count(*)::int8, extract(epoch FROM clock_timestamp() - max(changed_at))::float8 FROM \(unsafeRaw: self.log.logTable)")
            status.logEntries = try row.first?.decode(Int64.self, at: 0)
            status.newestEntryAge = try row.first?.decode(Double?.self, at: 1)
        }
        return status
    }

    /// Removes the capture from the log's schema: the two functions and, with them, every capture trigger on
    /// every table (`DROP FUNCTION … CASCADE` drops the triggers that call them, and nothing else); with
    /// `includingLog`, the change log and its state row too. Other writers' statements run as before; stacks
    /// still running no longer learn of other writers' changes, and install the capture again when they start.
    /// - Returns: the tables whose capture was dropped.
    @discardableResult
    package func drop(includingLog: Bool, on connection: PGConnection) async throws -> [String] {
        let captured = try await self.status(on: connection).capturedTables
        var template = """
            DROP FUNCTION IF EXISTS %1$I.skyros_capture_flush() CASCADE;
            DROP FUNCTION IF EXISTS %1$I.skyros_capture() CASCADE
            """
        if includingLog {
            template += ";\nDROP TABLE IF EXISTS %1$I.\(ChangeLog.logTableName), %1$I.\(ChangeLog.stateTableName)"
        }
        try await connection.withTransaction { connection in
            _ = try await connection.execute(script: try await self.render(template, on: connection))
        }
        return captured
    }

    /// The key of the migrations' advisory lock, from `$1` (the history's schema) and `$2` (its table): the first
    /// 8 bytes of SHA-256 of `<database>/<schema>/<table>`, as the migrator computes it.
    static let lockKeySQL =
        "('x' || substr(encode(sha256(convert_to(current_database() || '/' || $1 || '/' || $2, 'UTF8')), 'hex'), 1, 16))::bit(64)::int8"

    /// The whole installation as one script, for a DBA: the log's tables, the functions and every table's
    /// triggers, in a transaction. Idempotent. Rendered by the server (see ``render(_:table:on:)``).
    package func installSQL(_ tables: [Table], on connection: PGConnection) async throws -> String {
        var script = "BEGIN;\n" + self.log.createSQL + ";\n"
            + (try await self.render(Self.functionsTemplate + ";\n" + Self.flushTriggerTemplate + ";\n", on: connection))
        for table in tables { script += try await self.render(Self.triggersTemplate(for: table), table: table, on: connection) + ";\n" }
        return script + "COMMIT;\n"
    }

    // MARK: Generated SQL

    /// Fills a template of the capture's SQL in on the server, with `format()`: every identifier and literal is
    /// quoted by PostgreSQL (`%I`, `%L`), none is spliced by Skyros. The arguments:
    /// - `%1$I`: the schema of the functions and the log's tables: the log's, else the connection's current
    ///   schema (the functions are `SECURITY DEFINER` with a fixed `search_path`, so they name it);
    /// - `%2$L`: the NOTIFY channel (stacks without a schema listen on the default one);
    /// - for ``triggersTemplate(for:)``: `%3$I` the table, `%4$L` its key (``Table/keyArgument``), `%5$L` the
    ///   key's type OID.
    /// - Throws: ``CaptureError`` when the log has no schema and the connection has no current schema.
    func render(_ template: String, table: Table? = nil, on connection: PGConnection) async throws -> String {
        var binds = [PGValue(type: .text, text: template), PGValue(type: .text, text: self.log.schema), PGValue(type: .text, text: self.log.channel)]
        if let table {
            binds += [
                PGValue(type: .text, text: table.name), PGValue(type: .text, text: table.keyArgument),
                PGValue(type: .text, text: String(table.keyType)),
            ]
        }
        let arguments = (2...binds.count).map { $0 == 2 ? "coalesce($2, current_schema())" : "$\($0)" }.joined(separator: ", ")
        let rendered = try await connection.query(PGQuery(unsafeSQL: "SELECT format($1, \(arguments))", binds: binds))
            .first?.decode(String?.self, at: 0)
        guard let rendered else {
            throw CaptureError(message: "the connection has no current schema to install change capture in: set search_path or configure a schema")
        }
        return rendered
    }

    /// The two functions (see ``render(_:table:on:)`` for the arguments). They run with
    /// `search_path = pg_catalog, pg_temp`, so they name everything with its schema.
    ///
    /// No name a user's table can hold shadows anything: `#variable_conflict use_variable` makes the functions'
    /// variables win over columns of the same name (`prefix`, `part`), and rows are taken whole as `alias.*`,
    /// which names a relation only (`to_jsonb(n)` would read a column named `n`). The transition tables are the
    /// only user relations read: through `to_jsonb(<alias>.*)`, or for a composite key (a third trigger argument)
    /// as `ROW(skyros_x."a", skyros_x."b")::text`, PostgreSQL's row text that names such a key, in a statement
    /// `EXECUTE` runs with every column quoted by `format('%I')` and every value bound (`USING`).
    static let functionsTemplate: String = {
        let foreign = ChangeCapture.foreignOrigin.uuidString.lowercased()
        let log = "%1$I.\(ChangeLog.logTableName)"
        let state = "%1$I.\(ChangeLog.stateTableName)"
        return """
            CREATE OR REPLACE FUNCTION %1$I.skyros_capture() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
            SET search_path = pg_catalog, pg_temp AS $skyros$
            #variable_conflict use_variable
            DECLARE
              part text;
              changed int8;
              buffered text;
              prefix text := '{"t":' || to_json(TG_TABLE_NAME::text)::text || ',"o":' || TG_ARGV[1] || ',"i":';
              keyed text;
            BEGIN
              IF TG_NARGS > 2 AND TG_OP <> 'TRUNCATE' THEN
                keyed := 'ROW(' || (SELECT string_agg(format('skyros_x.%%I', skyros_c.col), ', ' ORDER BY skyros_c.ord)
                  FROM unnest(TG_ARGV[0]::text[]) WITH ORDINALITY AS skyros_c(col, ord)) || ')::text';
                IF TG_OP = 'INSERT' THEN
                  EXECUTE format('SELECT string_agg($1 || to_json(%%s)::text || $2, '','') , count(*) FROM skyros_new AS skyros_x', keyed)
                    INTO part, changed USING prefix, ',"k":"i"}';
                ELSIF TG_OP = 'UPDATE' THEN
                  EXECUTE format('SELECT string_agg($1 || to_json(skyros_k.id)::text || skyros_k.kind, '','') , count(*) FROM ('
                    || 'SELECT %%1$s AS id, $2 AS kind FROM skyros_new AS skyros_x UNION ALL '
                    || 'SELECT skyros_o.id, $3 FROM (SELECT %%1$s AS id FROM skyros_old AS skyros_x) AS skyros_o '
                    || 'WHERE skyros_o.id NOT IN (SELECT %%1$s FROM skyros_new AS skyros_x)) AS skyros_k', keyed)
                    INTO part, changed USING prefix, ',"k":"u"}', ',"k":"d"}';
                ELSE
                  EXECUTE format('SELECT string_agg($1 || to_json(%%s)::text || $2, '','') , count(*) FROM skyros_old AS skyros_x', keyed)
                    INTO part, changed USING prefix, ',"k":"d"}';
                END IF;
              ELSIF TG_OP = 'INSERT' THEN
                SELECT string_agg(prefix || to_json(to_jsonb(skyros_n.*) ->> TG_ARGV[0])::text || ',"k":"i"}', ','), count(*)
                  INTO part, changed FROM skyros_new AS skyros_n;
              ELSIF TG_OP = 'UPDATE' THEN
                SELECT string_agg(prefix || to_json(skyros_k.id)::text || skyros_k.kind, ','), count(*) INTO part, changed FROM (
                  SELECT to_jsonb(skyros_n.*) ->> TG_ARGV[0] AS id, ',"k":"u"}' AS kind FROM skyros_new AS skyros_n
                  UNION ALL
                  SELECT skyros_o.id, ',"k":"d"}' FROM (SELECT to_jsonb(skyros_r.*) ->> TG_ARGV[0] AS id FROM skyros_old AS skyros_r) AS skyros_o
                  WHERE skyros_o.id NOT IN (SELECT to_jsonb(skyros_n.*) ->> TG_ARGV[0] FROM skyros_new AS skyros_n)) AS skyros_k;
              ELSIF TG_OP = 'DELETE' THEN
                SELECT string_agg(prefix || to_json(to_jsonb(skyros_r.*) ->> TG_ARGV[0])::text || ',"k":"d"}', ','), count(*)
                  INTO part, changed FROM skyros_old AS skyros_r;
              ELSE
                part := prefix || '"","k":"t"}';
                changed := -1;
              END IF;
              IF part IS NULL THEN RETURN NULL; END IF;
              PERFORM set_config('skyros.captured_rows', CASE
                WHEN changed < 0 OR current_setting('skyros.captured_rows', true) = '-1' THEN '-1'
                ELSE (coalesce(nullif(current_setting('skyros.captured_rows', true), '')::int8, 0) + changed)::text END, true);
              buffered := coalesce(current_setting('skyros.captured', true), '');
              IF octet_length(buffered) + octet_length(part) > \(ChangeCapture.spillBytes) AND buffered <> '' THEN
                INSERT INTO \(log) (origin, changes) VALUES ('\(foreign)', '[' || buffered || ']');
                PERFORM set_config('skyros.captured_spilled', 'on', true);
                buffered := '';
              END IF;
              PERFORM set_config('skyros.captured', CASE WHEN buffered = '' THEN part ELSE buffered || ',' || part END, true);
              IF coalesce(current_setting('skyros.capture_pending', true), '') <> 'on' THEN
                PERFORM set_config('skyros.capture_pending', 'on', true);
                INSERT INTO \(log) (origin, changes) VALUES ('\(foreign)', '');
              END IF;
              RETURN NULL;
            END $skyros$;
            COMMENT ON FUNCTION %1$I.skyros_capture() IS 'skyros capture \(ChangeCapture.version)';

            CREATE OR REPLACE FUNCTION %1$I.skyros_capture_flush() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
            SET search_path = pg_catalog, pg_temp AS $skyros$
            #variable_conflict use_variable
            DECLARE
              captured text := '[' || coalesce(current_setting('skyros.captured', true), '') || ']';
              announced text := nullif(current_setting('skyros.announced', true), '');
              spilled boolean := coalesce(current_setting('skyros.captured_spilled', true), '') = 'on';
              changed text := coalesce(nullif(current_setting('skyros.captured_rows', true), ''), '0');
              committed timestamptz := clock_timestamp();
              writer uuid := '\(foreign)';
              head text;
              hinted text;
            BEGIN
              IF nullif(current_setting('skyros.origin', true), '') IS NOT NULL
                 AND current_setting('skyros.origin_rows', true) = current_setting('skyros.captured_rows', true) THEN
                writer := current_setting('skyros.origin', true)::uuid;
              END IF;
              PERFORM set_config('skyros.captured', '', true), set_config('skyros.capture_pending', '', true),
                set_config('skyros.captured_rows', '', true), set_config('skyros.captured_spilled', '', true);
              UPDATE \(log) SET changes = captured, origin = writer, changed_at = committed WHERE position = NEW.position;
              IF spilled AND writer <> '\(foreign)' THEN
                UPDATE \(log) SET origin = writer WHERE xid = NEW.xid AND position <> NEW.position;
              END IF;
              head := NEW.position::text || ' ' || writer::text || ' @' || floor(extract(epoch FROM committed) * 1000000)::int8::text
                || '/' || changed;
              IF spilled THEN
                hinted := NULL;
              ELSIF announced IS NOT NULL AND writer <> '\(foreign)' AND octet_length(announced) <= \(ChangeLog.announcedRowsHintLimit) THEN
                hinted := announced;
              ELSIF octet_length(captured) <= \(ChangeLog.inlineHintLimit) THEN
                hinted := captured;
              END IF;
              IF hinted IS NULL THEN
                PERFORM pg_notify(%2$L, head);
              ELSE
                head := head || ' ' || NEW.xid::text;
                PERFORM pg_notify(%2$L, head || ' ' || coalesce((SELECT encode(substring(sha256(s.hint_outer
                  || sha256(s.hint_inner || convert_to(head || ' ' || hinted, 'UTF8'))) FROM 1 FOR \(HintKey.tagBytes)), 'hex')
                  FROM \(state) AS s), '-') || ' ' || hinted);
              END IF;
              RETURN NULL;
            END $skyros$;
            COMMENT ON FUNCTION %1$I.skyros_capture_flush() IS 'skyros capture \(ChangeCapture.version)'
            """
    }()

    /// The constraint trigger that flushes a transaction's changes at `COMMIT` (on the log table, so made again
    /// whenever the log is).
    static let flushTriggerTemplate = """
        DROP TRIGGER IF EXISTS skyros_capture_flush ON %1$I.\(ChangeLog.logTableName);
        CREATE CONSTRAINT TRIGGER skyros_capture_flush AFTER INSERT ON %1$I.\(ChangeLog.logTableName) DEFERRABLE INITIALLY DEFERRED
          FOR EACH ROW WHEN (NEW.changes = '') EXECUTE FUNCTION %1$I.skyros_capture_flush();
        ALTER TABLE %1$I.\(ChangeLog.logTableName) ENABLE ALWAYS TRIGGER skyros_capture_flush
        """

    /// One table's four triggers (dropped first: `CREATE OR REPLACE TRIGGER` needs PostgreSQL 14), enabled
    /// `ALWAYS`: a session in `session_replication_role = replica` (a logical-replication apply, a restore) is
    /// captured too. The arguments are the key and the key's type OID (see ``render(_:table:on:)``), and `row`
    /// for a composite key.
    static func triggersTemplate(for table: Table) -> String {
        table.isComposite ? Self.triggersTemplate.replacingOccurrences(of: "(%4$L, %5$L)", with: "(%4$L, %5$L, 'row')") : Self.triggersTemplate
    }

    static let triggersTemplate = """
        DROP TRIGGER IF EXISTS skyros_capture_insert ON %1$I.%3$I;
        CREATE TRIGGER skyros_capture_insert AFTER INSERT ON %1$I.%3$I REFERENCING NEW TABLE AS skyros_new
          FOR EACH STATEMENT EXECUTE FUNCTION %1$I.skyros_capture(%4$L, %5$L);
        DROP TRIGGER IF EXISTS skyros_capture_update ON %1$I.%3$I;
        CREATE TRIGGER skyros_capture_update AFTER UPDATE ON %1$I.%3$I REFERENCING OLD TABLE AS skyros_old NEW TABLE AS skyros_new
          FOR EACH STATEMENT EXECUTE FUNCTION %1$I.skyros_capture(%4$L, %5$L);
        DROP TRIGGER IF EXISTS skyros_capture_delete ON %1$I.%3$I;
        CREATE TRIGGER skyros_capture_delete AFTER DELETE ON %1$I.%3$I REFERENCING OLD TABLE AS skyros_old
          FOR EACH STATEMENT EXECUTE FUNCTION %1$I.skyros_capture(%4$L, %5$L);
        DROP TRIGGER IF EXISTS skyros_capture_truncate ON %1$I.%3$I;
        CREATE TRIGGER skyros_capture_truncate AFTER TRUNCATE ON %1$I.%3$I FOR EACH STATEMENT EXECUTE FUNCTION %1$I.skyros_capture(%4$L, %5$L);
        ALTER TABLE %1$I.%3$I ENABLE ALWAYS TRIGGER skyros_capture_insert, ENABLE ALWAYS TRIGGER skyros_capture_update,
          ENABLE ALWAYS TRIGGER skyros_capture_delete, ENABLE ALWAYS TRIGGER skyros_capture_truncate
        """
}

/// Change capture could not be installed or read: a table without a usable primary key, or a role without the
/// rights to create triggers (``sql`` is what a DBA must run).
package struct CaptureError: Error, CustomStringConvertible, Sendable {
    package let message: String
    /// The SQL that installs the capture, when this role may not.
    package let sql: String?
    /// Creating the logical-decoding slot took too long (see ``LogicalCapture/slotCreationTimeout``).
    package let slotCreationTimedOut: Bool

    package init(message: String, sql: String? = nil, slotCreationTimedOut: Bool = false) {
        (self.message, self.sql, self.slotCreationTimedOut) = (message, sql, slotCreationTimedOut)
    }

    package var description: String {
        guard let sql else { return self.message }
        return self.message + ":\n" + sql
    }
}
