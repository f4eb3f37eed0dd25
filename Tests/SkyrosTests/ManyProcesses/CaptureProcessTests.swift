import Foundation
import Skyros
import SkyrosTestFixtures
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Issue #25, the open world: every committed change, by any writer (here psql, a session outside Skyros), reaches
/// every stack's cache and observers. Two `capture-node` children cache every book, observe a fetch of all
/// books and one book, and are questioned after each psql statement; each must converge on PostgreSQL within
/// ``CaptureHarness/deadline``.
@Suite(.timeLimit(.minutes(3)))
struct CaptureProcessTests {
    /// The control: a Skyros writer's commits reached other stacks before the capture did, so this passes
    /// whatever the psql tests say, and shows the children and the harness work.
    @Test func aSkyrosWritersChangesReachEveryChild() async throws {
        try await CaptureHarness.withSchema { schema in
            try await CaptureHarness.withNodes(2, schema: schema, watchBook: 2) { nodes in
                for node in nodes { #expect(try await node.object(6) == "book6", "\(node.name) did not cache book 6") }
                let writer = try await CaptureHarness.stack(schema: schema)
                try await withCleanup {
                    try await writer.write(durability: .committed) { context in
                        try await context.update(CaptureBook(id: 2, authorID: 1, title: "rewritten"))
                        try await context.delete(CaptureBook.self, id: 6)
                        try context.insert(CaptureBook(id: 10, authorID: 2, title: "added"))
                    }
                } cleanup: {
                    await writer.shutdown()
                }
                try await Self.expectEveryNode(
                    nodes, schema: schema, objects: [2: "rewritten", 6: nil, 10: "added", 1: "book1"], watchedBook: "rewritten",
                    after: "a Skyros stack's update, delete and insert")
            }
        }
    }

    @Test func anUpdateByPsqlReachesEveryCacheAndObserver() async throws {
        try await CaptureHarness.withSchema { schema in
            try await CaptureHarness.withNodes(2, schema: schema, watchBook: 2) { nodes in
                for node in nodes { #expect(try await node.object(2) == "book2", "\(node.name) did not cache book 2") }
                try await Psql.run("UPDATE cap_books SET title = 'renamed' WHERE id = 2;", schema: schema)
                try await Self.expectEveryNode(
                    nodes, schema: schema, objects: [2: "renamed", 1: "book1"], watchedBook: "renamed", after: "psql's UPDATE of book 2")
            }
        }
    }

    @Test func aCascadeFromADeleteByPsqlReachesEveryCacheAndObserver() async throws {
        try await CaptureHarness.withSchema { schema in
            try await CaptureHarness.withNodes(2, schema: schema, watchBook: 2) { nodes in
                for node in nodes { #expect(try await node.object(1) == "book1", "\(node.name) did not cache book 1") }
                try await Psql.run("DELETE FROM cap_authors WHERE id = 1;", schema: schema)
                #expect(try await CaptureHarness.storedBooks(schema: schema) == "3 4:book4,5:book5,6:book6")
                try await Self.expectEveryNode(
                    nodes, schema: schema, objects: [1: nil, 2: nil, 3: nil, 4: "book4"], watchedBook: nil,
                    after: "psql's DELETE of author 1 (ON DELETE CASCADE removed books 1-3)")
            }
        }
    }

    @Test func anInsertByPsqlReachesEveryObserver() async throws {
        try await CaptureHarness.withSchema { schema in
            try await CaptureHarness.withNodes(2, schema: schema, watchBook: 10) { nodes in
                for node in nodes { #expect(try await node.observed().book == nil, "\(node.name) observes a book 10") }
                try await Psql.run("INSERT INTO cap_books VALUES (10, 2, 'inserted');", schema: schema)
                try await Self.expectEveryNode(
                    nodes, schema: schema, objects: [10: "inserted", 2: "book2"], watchedBook: "inserted",
                    after: "psql's INSERT of book 10")
            }
        }
    }

    @Test func aTruncateByPsqlEmptiesEveryCacheAndObserver() async throws {
        try await CaptureHarness.withSchema { schema in
            try await CaptureHarness.withNodes(2, schema: schema, watchBook: 2) { nodes in
                for node in nodes {
                    for book in CaptureHarness.seededBooks {
                        #expect(try await node.object(book.id) == book.title, "\(node.name) did not cache book \(book.id)")
                    }
                }
                try await Psql.run("TRUNCATE cap_books;", schema: schema)
                try await Self.expectEveryNode(
                    nodes, schema: schema, objects: Dictionary(uniqueKeysWithValues: CaptureHarness.seededBooks.map { ($0.id, nil) }),
                    watchedBook: nil, after: "psql's TRUNCATE of cap_books")
            }
        }
    }

    @Test func rowsCopiedByPsqlReachEveryObserver() async throws {
        try await CaptureHarness.withSchema { schema in
            try await CaptureHarness.withNodes(2, schema: schema, watchBook: 8) { nodes in
                try await Psql.run(
                    """
                    COPY cap_books (id, author_id, title) FROM STDIN;
                    7\t1\tcopied7
                    8\t2\tcopied8
                    9\t2\tcopied9
                    \\.
                    """, schema: schema)
                #expect(try await CaptureHarness.storedBooks(schema: schema).hasPrefix("9 "))
                try await Self.expectEveryNode(
                    nodes, schema: schema, objects: [7: "copied7", 8: "copied8", 9: "copied9", 1: "book1"], watchedBook: "copied8",
                    after: "psql's COPY of books 7-9")
            }
        }
    }

    /// The change is made by a trigger (of an unmapped table) that psql's insert fires: an upsert that updates
    /// the cached audit row 1 and inserts row 2.
    @Test func rowsATriggerWritesReachTheCacheAndObservers() async throws {
        try await CaptureHarness.withSchema { schema in
            let qualified = quoteIdentifier(schema)
            try await TestServer.withConnection { connection in
                _ = try await connection.execute(script: """
                    INSERT INTO \(qualified).cap_audit VALUES (1, 'old');
                    CREATE TABLE \(qualified).cap_source (id bigint PRIMARY KEY, note text NOT NULL);
                    CREATE FUNCTION \(qualified).cap_source_audit() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN
                        INSERT INTO \(qualified).cap_audit (id, note) VALUES (NEW.id, 'audit-' || NEW.note)
                            ON CONFLICT (id) DO UPDATE SET note = EXCLUDED.note;
                        RETURN NEW;
                    END $$;
                    CREATE TRIGGER cap_source_audit AFTER INSERT ON \(qualified).cap_source
                        FOR EACH ROW EXECUTE FUNCTION \(qualified).cap_source_audit();
                    """)
            }
            let stack = try await CaptureHarness.stack(schema: schema)
            try await withCleanup {
                #expect(try await stack.mainContext.object(CaptureAudit.self, id: 1)?.note == "old")
                let latest = LatestAudits()
                let observation = stack.observe(FetchDescriptor<CaptureAudit>(sortBy: [SortDescriptor(\CaptureAudit.id)]))
                let observer = Task { for try await result in observation { await latest.set(result.values) } }
                defer { observer.cancel() }
                await expectEventually(within: CaptureHarness.deadline, "the audit observer gave no first result") {
                    await latest.values != nil
                }

                try await Psql.run("INSERT INTO cap_source VALUES (1, 'first'), (2, 'second');", schema: schema)
                let stored = try await TestServer.withConnection { connection in
                    try await connection.query("SELECT id, note FROM \(qualified: [schema, "cap_audit"]) ORDER BY id")
                        .map { CaptureAudit(id: try $0.decode(Int64.self, at: 0), note: try $0.decode(String.self, at: 1)) }
                }
                #expect(stored == [CaptureAudit(id: 1, note: "audit-first"), CaptureAudit(id: 2, note: "audit-second")])
                let converged = try await eventually(within: CaptureHarness.deadline) {
                    let updated = try await stack.mainContext.object(CaptureAudit.self, id: 1)
                    let inserted = try await stack.mainContext.object(CaptureAudit.self, id: 2)
                    let observed = await latest.values
                    return updated == stored.first && inserted == stored.last && observed == stored
                }
                if !converged {
                    let cached = try await stack.mainContext.object(CaptureAudit.self, id: 1)
                    #expect(cached == stored.first, "the main context still caches audit row 1 as before the trigger's update")
                    let observed = await latest.values
                    #expect(observed == stored, "the audit observer did not yield the rows the trigger wrote")
                    Issue.record("the trigger's writes did not reach the stack within \(CaptureHarness.deadline)")
                }
            } cleanup: {
                await stack.shutdown()
            }
        }
    }

    /// Both children's listeners are terminated (by psql itself, between its 50th and 51st transaction) while
    /// psql inserts 100 books one transaction each, then renames book 5 and deletes book 6: each child catches
    /// up and agrees with the table.
    @Test func everyChildCatchesUpWithPsqlsCommitsAfterItsListenerIsTerminated() async throws {
        try await CaptureHarness.withSchema { schema in
            try await CaptureHarness.withNodes(2, schema: schema, watchBook: 5) { nodes in
                for node in nodes { #expect(try await node.object(5) == "book5", "\(node.name) did not cache book 5") }
                var listeners: [String] = []
                for node in nodes { listeners.append(await node.listenerName) }
                #expect(listeners.allSatisfy { !$0.isEmpty }, "a child printed no listener name")
                let names = listeners.map { "'\($0.replacingOccurrences(of: "'", with: "''"))'" }.joined(separator: ", ")
                let inserts = { (range: ClosedRange<Int>) in
                    range.map { "INSERT INTO cap_books VALUES (\($0), \($0 % 2 + 1), 'bulk\($0)');" }.joined(separator: "\n")
                }
                let output = try await Psql.run(
                    """
                    \(inserts(101...150))
                    SELECT 'terminated ' || count(*) FILTER (WHERE pg_terminate_backend(pid))
                        FROM pg_stat_activity WHERE application_name IN (\(names));
                    \(inserts(151...200))
                    UPDATE cap_books SET title = 'late' WHERE id = 5;
                    DELETE FROM cap_books WHERE id = 6;
                    """, schema: schema)
                #expect(output.contains("terminated \(nodes.count)"), "psql did not terminate both listeners: \(output)")
                for node in nodes {
                    try await expectEventually(within: CaptureHarness.deadline, "\(node.name)'s listener did not reconnect") {
                        try await node.catchUps() >= 1
                    }
                }
                #expect(try await CaptureHarness.storedBooks(schema: schema).hasPrefix("105 "))
                try await Self.expectEveryNode(
                    nodes, schema: schema, objects: [5: "late", 6: nil, 4: "book4", 101: "bulk101", 200: "bulk200"],
                    watchedBook: "late", after: "psql's 100 inserts, update and delete around the listeners' termination")
            }
        }
    }
}

extension CaptureProcessTests {
    /// Waits until every node's cached `object` reads are `objects`, its query observer yields the books in
    /// PostgreSQL and its book observer `watchedBook`, then checks its main-context `query` too; after
    /// ``CaptureHarness/deadline`` (one for all nodes), records what each node still got wrong.
    ///
    /// `query` is asked last, once: a main-context fetch refills the cache with what it reads, so asking it
    /// while polling would hide a stale cached row.
    static func expectEveryNode(
        _ nodes: [CaptureNode], schema: String, objects: [Int64: String?], watchedBook: String?, after change: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let stored = try await CaptureHarness.storedBooks(schema: schema)
        let ids = objects.keys.sorted()
        let expected = CaptureNodeState(objects: objects, observedBooks: stored, observedBook: .some(watchedBook))
        var latest = [CaptureNodeState](repeating: CaptureNodeState(), count: nodes.count)
        _ = try await eventually(within: CaptureHarness.deadline, every: .milliseconds(50)) {
            for (index, node) in nodes.enumerated() where latest[index] != expected {
                latest[index] = try await node.state(objects: ids)
            }
            return latest.allSatisfy { $0 == expected }
        }
        for (node, state) in zip(nodes, latest) {
            let prefix = "after \(change), \(node.name)"
            if state != expected {
                Issue.record("\(prefix) did not converge within \(CaptureHarness.deadline): \(state)", sourceLocation: sourceLocation)
                for id in ids where state.objects[id] != objects[id] {
                    let got = state.objects[id].map { $0 ?? "nil" } ?? "no answer"
                    Issue.record(
                        "\(prefix)'s main context returns book \(id) as \(got), PostgreSQL holds \((objects[id] ?? nil) ?? "nil")",
                        sourceLocation: sourceLocation)
                }
                #expect(state.observedBooks == stored, "\(prefix)'s query observer's latest result", sourceLocation: sourceLocation)
                #expect(state.observedBook == .some(watchedBook), "\(prefix)'s book observer's latest result", sourceLocation: sourceLocation)
            }
            let query = try await node.query()
            #expect(query == stored, "\(prefix)'s main-context fetch of every book", sourceLocation: sourceLocation)
        }
    }
}

/// The latest result of an observer of `CaptureAudit`.
actor LatestAudits {
    private(set) var values: [CaptureAudit]?
    func set(_ values: [CaptureAudit]) { self.values = values }
}
