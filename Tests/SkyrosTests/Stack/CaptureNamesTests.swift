import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import SkyrosTestEntities
import Testing

/// Names a user's schema may hold, which generated SQL must survive: the capture's own aliases and variables
/// (`n`, `o`, `k`, `prefix`, `part`, `changed`, `buffered`), the change log's columns, SQL keywords, quotes, `$`,
/// `;`, `--`, `%` (a `format()` placeholder), spaces, a backslash, non-ASCII, and 63 bytes (the longest
/// identifier PostgreSQL keeps).
enum HostileNames {
    static let pool: [String] = [
        "n", "o", "k", "prefix", "part", "changed", "buffered", "id", "position", "xid", "origin", "changes",
        "select", "order", "from", "user", "table", #"a"b"#, "o'neil", "$1", "x;y", "-- c", "%I %L %s", "with space",
        #"back\slash"#, "naïve表🚀", String(repeating: "w", count: 63), String(repeating: "é", count: 31) + "x",
        #"acc "sch" o'neil; --$1\"#,
    ]

    /// The seed of this run's draw: `SKYROS_NAMES_SEED` when set (to replay a failure), else random. Each
    /// failure message carries it.
    static let seed: UInt64 = ProcessInfo.processInfo.environment["SKYROS_NAMES_SEED"].flatMap(UInt64.init) ?? .random(in: 1...UInt64.max)

    /// Draws `count` distinct names from ``pool`` for the naming `salt`, reproducibly from ``seed``.
    static func draw(_ count: Int, salt: UInt64) -> [String] {
        var generator = SplitMix64(seed: seed ^ salt)
        return Array(pool.shuffled(using: &generator).prefix(count))
    }

    /// `name` cut to at most `bytes` UTF-8 bytes on a character boundary.
    static func prefix(_ name: String, bytes: Int) -> String {
        var result = ""
        for character in name where result.utf8.count + character.utf8.count <= bytes { result.append(character) }
        return result
    }
}

/// A small seeded generator, so that a draw of names can be replayed.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { self.state = seed }
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// One drawn naming of a schema, a table and its columns. Entity plans are cached per type, so each naming
/// is a type of its own whose names are drawn once per process.
protocol HostileNaming: Sendable {
    /// The names, drawn once: schema prefix, table, key column, count column, label column, then the unmapped
    /// columns.
    static var names: [String] { get }
}

extension HostileNaming {
    static var schemaPrefix: String { HostileNames.prefix(names[0], bytes: 50) }
    static var table: String { names[1] }
    static var key: String { names[2] }
    static var count: String { names[3] }
    static var label: String { names[4] }
    /// Columns the entity does not map (nullable): they are in every row the capture reads whole.
    static var unmapped: [String] { Array(names[5...]) }
}

enum NamingA: HostileNaming { static let names = HostileNames.draw(9, salt: 1) }
enum NamingB: HostileNaming { static let names = HostileNames.draw(9, salt: 2) }
enum NamingC: HostileNaming { static let names = HostileNames.draw(9, salt: 3) }
enum NamingD: HostileNaming { static let names = HostileNames.draw(9, salt: 4) }
/// The reproduction from the issue: `counters (id, n)`, beside columns named like the capture's variables.
enum CountersNaming: HostileNaming { static let names = ["counters", "counters", "id", "n", "prefix", "o", "part", "changed", "buffered"] }

/// A row of a table named by `Names`: its key, a counter and a label.
struct HostileRow<Names: HostileNaming>: Entity, Equatable {
    var id: Int64
    var count: Int64
    var label: String

    static var tableName: String { Names.table }
    static var columns: [EntityColumn<HostileRow>] {
        [EntityColumn(\.id, Names.key), EntityColumn(\.count, Names.count), EntityColumn(\.label, Names.label)]
    }

    init(id: Int64, count: Int64, label: String) {
        (self.id, self.count, self.label) = (id, count, label)
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: ColumnKey.self)
        self.id = try container.decode(Int64.self, forKey: ColumnKey(Names.key))
        self.count = try container.decode(Int64.self, forKey: ColumnKey(Names.count))
        self.label = try container.decode(String.self, forKey: ColumnKey(Names.label))
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: ColumnKey.self)
        try container.encode(self.id, forKey: ColumnKey(Names.key))
        try container.encode(self.count, forKey: ColumnKey(Names.count))
        try container.encode(self.label, forKey: ColumnKey(Names.label))
    }
}

/// The latest rows an observer of hostile rows gave.
actor LatestHostileRows {
    private(set) var rows: [String]?
    func set(_ rows: [String]) { self.rows = rows }
}

/// Every writer's insert, update (of the key too), delete, `COPY` and `TRUNCATE` of a table whose schema, table
/// and columns carry hostile names reaches a stack's cache and its observer; the capture breaks no other
/// writer's statements on it (a column named `prefix` once made every `INSERT` fail).
@Suite("Capture with hostile names", .timeLimit(.minutes(3)))
struct CaptureNamesTests {
    @Test("counters (id, n): psql's n = n + 1 reaches the stack", arguments: CaptureSources.both)
    func counters(source: ChangeCaptureSource) async throws {
        try await self.roundTrip(CountersNaming.self, source: source)
    }

    @Test("drawn naming A", arguments: CaptureSources.both) func namingA(source: ChangeCaptureSource) async throws {
        try await self.roundTrip(NamingA.self, source: source)
    }
    @Test("drawn naming B", arguments: CaptureSources.both) func namingB(source: ChangeCaptureSource) async throws {
        try await self.roundTrip(NamingB.self, source: source)
    }
    @Test("drawn naming C", arguments: CaptureSources.both) func namingC(source: ChangeCaptureSource) async throws {
        try await self.roundTrip(NamingC.self, source: source)
    }
    @Test("drawn naming D", arguments: CaptureSources.both) func namingD(source: ChangeCaptureSource) async throws {
        try await self.roundTrip(NamingD.self, source: source)
    }

    /// The relay's recovery of a slot dropped under a running stack (`recreateSlotIfLost`) reads the catalogs and
    /// writes its truncate marker with the schema's and the table's hostile names.
    @Test(
        "a slot dropped under a running stack is recreated (hostile names)",
        .enabled(if: TestServer.allowsLogicalDecoding, "needs logical decoding"))
    func aDroppedSlotIsRecreated() async throws {
        typealias Names = NamingB
        typealias Row = HostileRow<Names>
        let context = "seed \(HostileNames.seed) (SKYROS_NAMES_SEED replays it), names \(Names.names)"
        let schema = TestServer.uniqueSchemaName(Names.schemaPrefix)
        let table = "\(quoteIdentifier(schema)).\(quoteIdentifier(Names.table))"
        let (key, count, label) = (quoteIdentifier(Names.key), quoteIdentifier(Names.count), quoteIdentifier(Names.label))
        try await TestServer.withConnection { connection in
            _ = try await connection.execute(script: """
                CREATE SCHEMA \(quoteIdentifier(schema));
                CREATE TABLE \(table) (\(key) bigint PRIMARY KEY, \(count) bigint NOT NULL, \(label) text NOT NULL);
                INSERT INTO \(table) VALUES (1, 0, 'one');
                """)
        }
        try await withCleanup {
            let (logger, records) = RecordingLogHandler.logger()
            var configuration = DataStackConfiguration(store: .postgres(try TestServer.configuration, schema: schema), entities: [Row.self])
            configuration.changeFeed.captureSource = .logicalDecoding
            let stack = try await DataStack.start(configuration, logger: logger)
            let admin = try await PGConnection.connect(to: try TestServer.configuration)
            try await withCleanup {
                let slot = CaptureSources.slotName(schema: schema)
                let latest = LatestHostileRows()
                let observer = Task {
                    for try await row in stack.observe(Row.self, id: 1) { await latest.set(row.map { ["\($0.count)"] } ?? []) }
                }
                defer { observer.cancel() }
                await expectEventually("no first result: \(context)") { await latest.rows == ["0"] }

                // End the relay's stream and drop the slot before the relay streams it again.
                await expectEventually(within: .seconds(30), "the slot could not be dropped: \(context)") {
                    _ = try? await admin.query("""
                        SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = \(slot) AND active
                        """)
                    let dropped = try? await admin.query("""
                        SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = \(slot) AND NOT active
                        """)
                    return (dropped?.count ?? 0) == 1
                }
                await expectEventually(within: .seconds(30), "the relay did not recreate the slot: \(context)") {
                    records.entries.contains { $0.level == .error && "\($0.message)".contains("replication slot was lost") }
                }
                #expect(records.entries.first { "\($0.message)".contains("replication slot was lost") }?
                    .metadata["skyros.capture.slot_status"] == "dropped", "\(context)")
                // The marker names the hostile table (the relay writes it just after that record), so the stack
                // reads the row again; the new slot relays.
                func markers() async throws -> Int {
                    try await admin.query("""
                        SELECT count(*)::int FROM \(qualified: [schema, "skyros_change_log"]) AS l, jsonb_array_elements(l.changes::jsonb) AS c
                        WHERE c ->> 'k' = 't' AND c ->> 't' = \(Names.table)
                        """)[0].decode(Int.self, at: 0)
                }
                try await expectEventually(within: .seconds(30), "no entry marks the table as truncated: \(context)") { try await markers() > 0 }
                try await Psql.run("UPDATE \(table) SET \(count) = \(count) + 1 WHERE \(key) = 1", schema: "public")
                await expectEventually(within: .seconds(30), "a change after the new slot did not arrive: \(context)") {
                    await latest.rows == ["1"]
                }
                #expect(try await markers() == 1, "\(context)")
            } cleanup: {
                await admin.close()
                await stack.shutdown()
            }
            try await TestServer.withConnection { try await LogicalCapture(log: ChangeLog(schema: schema)).drop(includingLog: false, on: $0) }
        } cleanup: {
            await TestServer.dropSchema(schema)
        }
    }

    private func roundTrip<Names: HostileNaming>(_: Names.Type, source: ChangeCaptureSource) async throws {
        typealias Row = HostileRow<Names>
        let context = "\(source), seed \(HostileNames.seed) (SKYROS_NAMES_SEED replays it), names \(Names.names)"
        let schema = TestServer.uniqueSchemaName(Names.schemaPrefix)
        let table = "\(quoteIdentifier(schema)).\(quoteIdentifier(Names.table))"
        let (key, count, label) = (quoteIdentifier(Names.key), quoteIdentifier(Names.count), quoteIdentifier(Names.label))
        let unmapped = Names.unmapped.map(quoteIdentifier)
        let allColumns = ([key, count, label] + unmapped).joined(separator: ", ")
        func values(_ id: Int64, _ value: Int64, _ text: String) -> String {
            "(\(id), \(value), '\(text)'" + String(repeating: ", 'x'", count: unmapped.count) + ")"
        }
        try await TestServer.withConnection { connection in
            _ = try await connection.execute(script: """
                CREATE SCHEMA \(quoteIdentifier(schema));
                CREATE TABLE \(table) (\(key) bigint PRIMARY KEY, \(count) bigint NOT NULL, \(label) text NOT NULL\
                \(unmapped.map { ", \($0) text" }.joined()));
                INSERT INTO \(table) (\(allColumns)) VALUES \(values(1, 0, "one")), \(values(2, 0, "two")), \(values(3, 0, "three"));
                """)
        }
        try await withCleanup {
            let stack: DataStack
            do {
                var configuration = DataStackConfiguration(store: .postgres(try TestServer.configuration, schema: schema), entities: [Row.self])
                configuration.changeFeed.captureSource = source
                stack = try await DataStack.start(configuration)
            } catch {
                Issue.record("start failed: \(error); \(context)")
                throw error
            }
            try await withCleanup {
                let all = FetchDescriptor<Row>(sortBy: [SortDescriptor(\Row.id)])
                #expect(try await stack.mainContext.fetch(all).count == 3, "\(context)")    // now cached
                let latest = LatestHostileRows()
                let observation = stack.observe(all)
                let observer = Task {
                    for try await result in observation { await latest.set(result.values.map { "\($0.id):\($0.count):\($0.label)" }) }
                }
                defer { observer.cancel() }

                /// The table as stored, as the observer renders it.
                func stored() async throws -> [String] {
                    try await TestServer.withConnection { connection in
                        try await connection.query(PGQuery(unsafeSQL: "SELECT \(key), \(count), \(label) FROM \(table) ORDER BY 1"))
                            .map { "\(try $0.decode(Int64.self, at: 0)):\(try $0.decode(Int64.self, at: 1)):\(try $0.decode(String.self, at: 2))" }
                    }
                }
                /// Waits until the observer and every cached row equal the table.
                func converged(after step: String) async throws {
                    let expected = try await stored()
                    let ids = expected.compactMap { $0.split(separator: ":").first.flatMap { Int64($0) } }
                    try await expectEventually(within: .seconds(15), "after \(step): \(context)") {
                        guard await latest.rows == expected else { return false }
                        for (id, row) in zip(ids, expected) {
                            guard let object = try await stack.mainContext.object(Row.self, id: id),
                                "\(object.id):\(object.count):\(object.label)" == row
                            else { return false }
                        }
                        return true
                    }
                }
                try await converged(after: "the first fetch")

                try await Psql.run("UPDATE \(table) SET \(count) = \(count) + 1 WHERE \(key) = 1", schema: "public")
                try await converged(after: "an update of a counter by psql")
                try await Psql.run("INSERT INTO \(table) (\(allColumns)) VALUES \(values(4, 4, "four"))", schema: "public")
                try await converged(after: "an insert by psql")
                try await Psql.run("UPDATE \(table) SET \(key) = 5, \(label) = 'five' WHERE \(key) = 2", schema: "public")
                try await converged(after: "an update of the key by psql")
                try await Psql.run("DELETE FROM \(table) WHERE \(key) = 3", schema: "public")
                try await converged(after: "a delete by psql")
                try await Psql.run("COPY \(table) (\(key), \(count), \(label)) FROM STDIN;\n6\t6\tsix\n7\t7\tseven\n\\.", schema: "public")
                try await converged(after: "a COPY by psql")
                try await stack.write(durability: .committed) { try $0.insert(Row(id: 8, count: 8, label: "eight")) }
                try await stack.write(durability: .committed) { try await $0.update(Row(id: 4, count: 40, label: "forty")) }
                try await converged(after: "the stack's own insert and update")
                try await Psql.run("TRUNCATE \(table)", schema: "public")
                try await converged(after: "a TRUNCATE by psql")
                try await CaptureSources.expectInstalled(source, schema: schema, context: context)
            } cleanup: {
                await stack.shutdown()
            }
            // What operators run works on the same names: status names the table, drop leaves no capture object.
            try await TestServer.withConnection { connection in
                let log = ChangeLog(schema: schema)
                if source == .logicalDecoding {
                    let status = try await LogicalCapture(log: log).status(on: connection)
                    #expect(status.hasPublication && status.slotExists && status.tables == [Names.table], "\(context)")
                    try await LogicalCapture(log: log).drop(includingLog: false, on: connection)
                } else {
                    #expect(try await ChangeCapture(log: log).status(on: connection).capturedTables == [Names.table], "\(context)")
                    try await ChangeCapture(log: log).drop(includingLog: true, on: connection)
                }
                let left = try await connection.query("""
                    SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name = \(CaptureSources.slotName(schema: schema)))::int
                         + (SELECT count(*) FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid
                            JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = \(schema) AND t.tgname LIKE 'skyros%')::int
                    """)[0].decode(Int.self, at: 0)
                #expect(left == 0, "capture objects left after drop: \(context)")
            }
        } cleanup: {
            await TestServer.dropSchema(schema)
        }
    }
}
