import Foundation
@_spi(Benchmarks) @testable import Skyros
@testable import SkyrosStore
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// The PostgreSQL enum's labels, in its declared order; `Comparable` in that order so that memory and
/// PostgreSQL order them alike.
enum PlanStatus: String, Codable, Sendable, CaseIterable, Comparable {
    case closed, open, flagged, escalated

    static func < (a: PlanStatus, b: PlanStatus) -> Bool {
        Self.allCases.firstIndex(of: a)! < Self.allCases.firstIndex(of: b)!
    }
}

/// A ticket with one indexed column of each kind: text in a non-C collation, an enum, an integer, a
/// timestamptz and a uuid.
struct PlanTicket: Entity, Equatable, ColumnKeyStrategyProviding {
    var id: Int
    var title: String
    var status: PlanStatus
    var priority: Int
    var createdAt: Date
    var ref: UUID

    static let tableName = "plan_tickets"
    static let columns: [EntityColumn<PlanTicket>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.status, "status"),
        EntityColumn(\.priority, "priority"), EntityColumn(\.createdAt, "created_at"), EntityColumn(\.ref, "ref"),
    ]
    static let columnKeyStrategy = ColumnKeyStrategy.convertToSnakeCase
}

/// `EXPLAIN` of the SQL the PostgreSQL store sends (built by the store's own query builder, run with the same
/// bound parameters) on a 100,000-row table, analyzed, with the planner's default settings: equality, range,
/// `IN` and sorted fetches — and keyset pages — on indexed columns are index scans of those columns' indexes.
@Suite("Query: index-served SQL (EXPLAIN on 100,000 rows)", .serialized)
struct IndexedQueryPlanTests {
    static let rowCount = 100_000

    /// One case: a descriptor (or a keyset page) and the indexes its plan may scan (an enum column has two: the
    /// planner picks either).
    struct Case: Sendable {
        let name: String
        let descriptor: FetchDescriptor<PlanTicket>
        let indexes: Set<String>

        init(name: String, descriptor: FetchDescriptor<PlanTicket>, index: String...) {
            self.name = name
            self.descriptor = descriptor
            self.indexes = Set(index)
        }
    }

    /// The table, loaded with one `INSERT … SELECT generate_series`: a random-looking text (md5) in
    /// `en-US-x-icu`, a skewed enum (90% closed, 10% open, 0.1% flagged, 0.1% escalated), two rows per
    /// priority, one second between tickets, a random-looking uuid. Each column is indexed with the primary key
    /// after it (what a sort on it, tie-broken by the key, reads in order).
    static func createTable(_ schema: String) -> String {
        let s = quoteIdentifier(schema)
        return """
            CREATE TYPE \(s).plan_status AS ENUM ('closed', 'open', 'flagged', 'escalated');
            CREATE TABLE \(s).plan_tickets (
                id bigint PRIMARY KEY, title text COLLATE "en-US-x-icu" NOT NULL, status \(s).plan_status NOT NULL,
                priority integer NOT NULL, created_at timestamptz NOT NULL, ref uuid NOT NULL);
            INSERT INTO \(s).plan_tickets
                SELECT g, md5(g::text),
                    (CASE WHEN g % 1000 = 0 THEN 'flagged' WHEN g % 997 = 0 THEN 'escalated'
                          WHEN g % 10 = 0 THEN 'open' ELSE 'closed' END)::\(s).plan_status,
                    g % 50000, timestamptz '2026-01-01 00:00:00+00' + g * interval '1 second', md5('r' || g)::uuid
                FROM generate_series(1, \(Self.rowCount)) AS g;
            CREATE INDEX plan_title ON \(s).plan_tickets (title, id);
            CREATE INDEX plan_status ON \(s).plan_tickets (status, id);
            CREATE INDEX plan_priority ON \(s).plan_tickets (priority, id);
            CREATE INDEX plan_created ON \(s).plan_tickets (created_at, id);
            CREATE INDEX plan_ref ON \(s).plan_tickets (ref, id);
            CREATE INDEX plan_status_created ON \(s).plan_tickets (status, created_at);
            ANALYZE \(s).plan_tickets;
            """
    }

    /// The scan nodes of a plan (`EXPLAIN (FORMAT JSON)`): node type and index name.
    static func scans(_ json: String) throws -> [(type: String, index: String?)] {
        let root = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])
        var result: [(String, String?)] = []
        func walk(_ node: [String: Any]) {
            if let type = node["Node Type"] as? String { result.append((type, node["Index Name"] as? String)) }
            for child in node["Plans"] as? [[String: Any]] ?? [] { walk(child) }
        }
        for entry in root { if let plan = entry["Plan"] as? [String: Any] { walk(plan) } }
        return result
    }

    static let indexScanTypes: Set<String> = ["Index Scan", "Index Only Scan", "Bitmap Index Scan"]

    @Test func fetchesOnIndexedColumnsAreIndexScans() async throws {
        try await TestServer.withSchema("plans") { schema in
            let pool = PGConnectionPool(configuration: .init(maximumConnections: 2), postgres: try TestServer.configuration)
            try await withCleanup {
                let started = ContinuousClock.now
                try await pool.withConnection { _ = try await $0.execute(script: Self.createTable(schema)) }
                let loaded = ContinuousClock.now - started
                let store = PostgresStore(pool: pool, schema: schema)
                try await store.validate([PlanTicket.self])
                let sample = try #require(try await store.object(PlanTicket.self, id: 4242)?.value)
                let other = try #require(try await store.object(PlanTicket.self, id: 77_777)?.value)
                let cases = try Self.cases(sample: sample, other: other, store: store)
                var failures = 0
                for item in cases {
                    // The statement the store sends for this descriptor, and its binds.
                    let query = try SQLQueryBuilder.select(item.descriptor, schema: schema, includeVersion: true)
                    let explained = try await pool.withConnection {
                        try await $0.query(PGQuery(unsafeSQL: "EXPLAIN (FORMAT JSON) " + query.sql, binds: query.binds))
                    }
                    let json = try explained[0].decode(String.self, at: 0)
                    let scans = try Self.scans(json)
                    let served = scans.contains { Self.indexScanTypes.contains($0.type) && $0.index.map(item.indexes.contains) == true }
                    let sequential = scans.contains { $0.type == "Seq Scan" }
                    if !served || sequential {
                        failures += 1
                        Issue.record("\(item.name): no index scan of \(item.indexes)\n  sql: \(query.sql)\n  plan: \(scans)")
                    }
                    print("  \(item.name): \(scans.map { $0.type + ($0.index.map { " using \($0)" } ?? "") }.joined(separator: " → "))")
                    // And the fetch itself returns rows.
                    #expect(try await !store.fetch(item.descriptor).isEmpty, "\(item.name) returned no rows")
                    // The plan a connection runs once the statement is warm: prepared by the session and run more
                    // times than PostgreSQL's plan cache takes to consider a generic plan (5).
                    let warm = try await pool.withConnection { connection -> [(type: String, index: String?)] in
                        for _ in 0..<7 { _ = try await connection.query(query) }
                        let named = try await connection.query("SELECT name FROM pg_prepared_statements WHERE statement = \(query.sql)")
                        let name = try #require(try named.first?.decode(String.self, at: 0), "\(item.name): the statement is not prepared")
                        // EXECUTE takes its arguments as literals (it cannot refer to a parameter): the same values,
                        // quoted, each coerced by the server to the prepared statement's parameter type.
                        let arguments = query.binds.map { $0.text.map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" } ?? "NULL" }
                        let explained = try await connection.query(
                            PGQuery(unsafeSQL: "EXPLAIN (FORMAT JSON) EXECUTE \(quoteIdentifier(name))(\(arguments.joined(separator: ", ")))"))
                        return try Self.scans(try explained[0].decode(String.self, at: 0))
                    }
                    if !warm.contains(where: { Self.indexScanTypes.contains($0.type) && $0.index.map(item.indexes.contains) == true }) {
                        failures += 1
                        Issue.record("\(item.name), warm: no index scan of \(item.indexes)\n  plan: \(warm)")
                    }
                }
                #expect(failures == 0)
                #expect(cases.count == 25)

                // The control: the same fetches written as Skyros wrote them before (the column forced to code-point
                // order, an enum column cast to text) are not served by those indexes, so the check above tells.
                let table = "\(quoteIdentifier(schema)).plan_tickets"
                let controls: [(String, PGQuery)] = [
                    ("plan_title", PGQuery(unsafeSQL: "SELECT id FROM \(table) WHERE \"title\"::text COLLATE \"C\" >= $1 COLLATE \"C\" AND \"title\"::text COLLATE \"C\" < $2 COLLATE \"C\" ORDER BY \"id\"", binds: [try PGValue("abc"), try PGValue("abd")])),
                    ("plan_title", PGQuery(unsafeSQL: "SELECT id FROM \(table) ORDER BY \"title\"::text COLLATE \"C\" ASC, \"id\" ASC LIMIT 20")),
                    ("plan_status", PGQuery(unsafeSQL: "SELECT id FROM \(table) WHERE \"status\"::text = $1 ORDER BY \"id\"", binds: [try PGValue("flagged")])),
                ]
                for (index, control) in controls {
                    let explained = try await pool.withConnection {
                        try await $0.query(PGQuery(unsafeSQL: "EXPLAIN (FORMAT JSON) " + control.sql, binds: control.binds))
                    }
                    let scans = try Self.scans(try explained[0].decode(String.self, at: 0))
                    #expect(!scans.contains { $0.index?.hasPrefix(index) == true }, "\(control.sql): \(scans)")
                    print("  control \(control.sql.suffix(60)): \(scans.map { $0.type + ($0.index.map { " using \($0)" } ?? "") }.joined(separator: " → "))")
                }
                print("IndexedQueryPlanTests: \(cases.count) plans on \(Self.rowCount) rows, table built and analyzed in \(loaded)")
            } cleanup: {
                await pool.shutdown()
            }
        }
    }

    /// The rows the scans of a plan (`EXPLAIN (ANALYZE, FORMAT JSON)`) read, and its execution time in ms.
    static func rowsRead(_ json: String) throws -> (rows: Int, milliseconds: Double) {
        let root = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])
        var rows = 0
        func walk(_ node: [String: Any]) {
            if let type = node["Node Type"] as? String, type.hasSuffix("Scan"), let actual = node["Actual Rows"] as? Int {
                rows += actual * max(1, node["Actual Loops"] as? Int ?? 1)
            }
            for child in node["Plans"] as? [[String: Any]] ?? [] { walk(child) }
        }
        for entry in root { if let plan = entry["Plan"] as? [String: Any] { walk(plan) } }
        return (rows, root.first?["Execution Time"] as? Double ?? 0)
    }

    /// A page 90,000 rows deep: with `fetchOffset` the index scan reads every skipped row; a keyset page after
    /// the previous page's last row reads the page (and two rows more).
    @Test func aDeepKeysetPageReadsOnlyThePage() async throws {
        try await TestServer.withSchema("plans_deep") { schema in
            let pool = PGConnectionPool(configuration: .init(maximumConnections: 2), postgres: try TestServer.configuration)
            try await withCleanup {
                try await pool.withConnection { _ = try await $0.execute(script: Self.createTable(schema)) }
                let store = PostgresStore(pool: pool, schema: schema)
                let sort = [SortDescriptor(\PlanTicket.createdAt, order: .reverse)]
                let previous = try #require(try await store.fetch(FetchDescriptor(sortBy: sort, fetchLimit: 1, fetchOffset: 89_999)).first?.value)
                let offset = FetchDescriptor(sortBy: sort, fetchLimit: 20, fetchOffset: 90_000)
                let keyset = try PagedFetch(FetchDescriptor(sortBy: sort, fetchLimit: 20), after: PageCursor(after: previous, sortBy: sort))
                #expect(try await store.fetch(offset).map(\.value.id)
                    == Array(try await store.fetchPage(FetchDescriptor(sortBy: sort, fetchLimit: 20), after: PageCursor(after: previous, sortBy: sort)).items.map(\.value.id)))
                var read: [String: (rows: Int, milliseconds: Double)] = [:]
                for (name, descriptor) in [("offset", offset), ("keyset", keyset.descriptor)] {
                    let query = try SQLQueryBuilder.select(descriptor, schema: schema, includeVersion: true)
                    let explained = try await pool.withConnection {
                        try await $0.query(PGQuery(unsafeSQL: "EXPLAIN (ANALYZE, FORMAT JSON) " + query.sql, binds: query.binds))
                    }
                    read[name] = try Self.rowsRead(try explained[0].decode(String.self, at: 0))
                }
                let offsetRead = try #require(read["offset"]), keysetRead = try #require(read["keyset"])
                #expect(offsetRead.rows >= 90_000)
                // The page, the row that tells whether another follows, and the one the incremental sort looks at to
                // close its last group of equal times.
                #expect(keysetRead.rows <= 22)
                print("IndexedQueryPlanTests: page at 90,000: offset read \(offsetRead.rows) rows in \(offsetRead.milliseconds) ms, keyset \(keysetRead.rows) rows in \(keysetRead.milliseconds) ms")
            } cleanup: {
                await pool.shutdown()
            }
        }
    }

    static func cases(sample: PlanTicket, other: PlanTicket, store: PostgresStore) throws -> [Case] {
        typealias D = FetchDescriptor<PlanTicket>
        let title = sample.title, titles = [sample.title, other.title]
        let low = "abc", high = "abd"   // about 24 of the md5 titles
        let flagged = PlanStatus.flagged, open = PlanStatus.open, rare = [PlanStatus.flagged, .escalated]
        let priority = sample.priority, priorities = [sample.priority, other.priority, 3]
        let created = sample.createdAt, createdList = [sample.createdAt, other.createdAt]
        let createdEnd = sample.createdAt.addingTimeInterval(60)
        let ref = sample.ref, refs = [sample.ref, other.ref]
        let refLow = UUID(uuidString: "12340000-0000-0000-0000-000000000000")!
        let refHigh = UUID(uuidString: "12400000-0000-0000-0000-000000000000")!
        let page = 20

        var cases: [Case] = [
            Case(name: "text =", descriptor: D(predicate: #Predicate { $0.title == title }), index: "plan_title"),
            Case(name: "text range", descriptor: D(predicate: #Predicate { $0.title >= low && $0.title < high }), index: "plan_title"),
            Case(name: "text range (contains)", descriptor: D(predicate: #Predicate { (low..<high).contains($0.title) }), index: "plan_title"),
            Case(name: "text IN", descriptor: D(predicate: #Predicate { titles.contains($0.title) }), index: "plan_title"),
            Case(name: "text sorted", descriptor: D(sortBy: [SortDescriptor(\.title)], fetchLimit: page), index: "plan_title"),
            Case(name: "enum =", descriptor: D(predicate: #Predicate { $0.status == flagged }), index: "plan_status", "plan_status_created"),
            Case(name: "enum range", descriptor: D(predicate: #Predicate { $0.status > open }), index: "plan_status", "plan_status_created"),
            Case(name: "enum IN", descriptor: D(predicate: #Predicate { rare.contains($0.status) }), index: "plan_status", "plan_status_created"),
            Case(name: "enum sorted", descriptor: D(sortBy: [SortDescriptor(\.status, order: .reverse)], fetchLimit: page), index: "plan_status", "plan_status_created"),
            Case(name: "integer =", descriptor: D(predicate: #Predicate { $0.priority == priority }), index: "plan_priority"),
            Case(name: "integer range", descriptor: D(predicate: #Predicate { (100..<103).contains($0.priority) }), index: "plan_priority"),
            Case(name: "integer IN", descriptor: D(predicate: #Predicate { priorities.contains($0.priority) }), index: "plan_priority"),
            Case(name: "integer sorted", descriptor: D(sortBy: [SortDescriptor(\.priority)], fetchLimit: page), index: "plan_priority"),
            Case(name: "timestamptz =", descriptor: D(predicate: #Predicate { $0.createdAt == created }), index: "plan_created"),
            Case(name: "timestamptz range", descriptor: D(predicate: #Predicate { $0.createdAt >= created && $0.createdAt < createdEnd }), index: "plan_created"),
            Case(name: "timestamptz IN", descriptor: D(predicate: #Predicate { createdList.contains($0.createdAt) }), index: "plan_created"),
            Case(name: "timestamptz sorted, newest first", descriptor: D(sortBy: [SortDescriptor(\.createdAt, order: .reverse)], fetchLimit: page), index: "plan_created"),
            Case(name: "uuid =", descriptor: D(predicate: #Predicate { $0.ref == ref }), index: "plan_ref"),
            Case(name: "uuid range", descriptor: D(predicate: #Predicate { $0.ref >= refLow && $0.ref < refHigh }), index: "plan_ref"),
            Case(name: "uuid IN", descriptor: D(predicate: #Predicate { refs.contains($0.ref) }), index: "plan_ref"),
            Case(name: "uuid sorted", descriptor: D(sortBy: [SortDescriptor(\.ref)], fetchLimit: page), index: "plan_ref"),
            Case(
                name: "open tickets, newest first",
                descriptor: D(predicate: #Predicate { $0.status == open }, sortBy: [SortDescriptor(\.createdAt, order: .reverse)], fetchLimit: page),
                index: "plan_status_created"),
        ]
        // Keyset pages after a row deep in the order: a row comparison (one direction), the expanded form
        // (mixed directions), and a page under a predicate.
        func keyset(_ name: String, _ descriptor: D, after row: PlanTicket, _ index: String) throws -> Case {
            let cursor = try PageCursor(after: row, sortBy: descriptor.sortBy)
            return Case(name: name, descriptor: try PagedFetch(descriptor, after: cursor).descriptor, index: index)
        }
        cases.append(try keyset("keyset page by text", D(sortBy: [SortDescriptor(\.title)], fetchLimit: page), after: other, "plan_title"))
        cases.append(try keyset(
            "keyset page by timestamptz, newest first", D(sortBy: [SortDescriptor(\.createdAt, order: .reverse)], fetchLimit: page),
            after: other, "plan_created"))
        cases.append(try keyset(
            "keyset page of open tickets by priority", D(predicate: #Predicate { $0.status == open }, sortBy: [SortDescriptor(\.priority)], fetchLimit: page),
            after: other, "plan_priority"))
        return cases
    }
}
