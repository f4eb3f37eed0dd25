import Foundation
import Skyros
import SkyrosTestFixtures
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Issue #25, the writer's own rows: what the database made of a stack's own commit (a trigger's transform, an
/// `ON DELETE CASCADE`) reaches that stack's cache and observers, not only what it sent.
@Suite(.timeLimit(.minutes(2)))
struct CaptureOwnRowsTests {
    /// Runs `body` with a stack on a fresh schema holding `cap_stamped` (row 1 seeded), whose
    /// `BEFORE INSERT OR UPDATE` trigger upper-cases the title and stamps `updated_at` with `clock_timestamp()`.
    static func withStampedStack(_ body: (DataStack, String) async throws -> Void) async throws {
        try await TestServer.withSchema("capown") { schema in
            let qualified = quoteIdentifier(schema)
            try await TestServer.withConnection { connection in
                _ = try await connection.execute(script: """
                    CREATE TABLE \(qualified).cap_stamped (id bigint PRIMARY KEY, title text NOT NULL, updated_at timestamptz NOT NULL);
                    CREATE FUNCTION \(qualified).cap_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN
                        NEW.title := upper(NEW.title);
                        NEW.updated_at := clock_timestamp();
                        RETURN NEW;
                    END $$;
                    CREATE TRIGGER cap_stamp BEFORE INSERT OR UPDATE ON \(qualified).cap_stamped
                        FOR EACH ROW EXECUTE FUNCTION \(qualified).cap_stamp();
                    INSERT INTO \(qualified).cap_stamped VALUES (1, 'first', '2000-01-01T00:00:00Z');
                    """)
            }
            var configuration = DataStackConfiguration(
                store: .postgres(try TestServer.configuration, schema: schema), entities: [CaptureStamped.self])
            configuration.pool.leaseTimeout = .seconds(30)
            let stack = try await DataStack.start(configuration)
            try await withCleanup { try await body(stack, schema) } cleanup: { await stack.shutdown() }
        }
    }

    /// The row as PostgreSQL stores it, over a plain connection.
    static func stored(_ id: Int64, schema: String) async throws -> CaptureStamped? {
        try await TestServer.withConnection { connection in
            try await connection.query("SELECT title, updated_at FROM \(qualified: [schema, "cap_stamped"]) WHERE id = \(id)")
                .first.map { CaptureStamped(id: id, title: try $0.decode(String.self, at: 0), updatedAt: try $0.decode(Date.self, at: 1)) }
        }
    }

    @Test func aStacksOwnUpdateCachesAndObservesTheRowATriggerStored() async throws {
        try await Self.withStampedStack { stack, schema in
            let before = try #require(try await stack.mainContext.object(CaptureStamped.self, id: 1))
            #expect(before.title == "FIRST")
            let latest = LatestStamped()
            let observation = stack.observe(CaptureStamped.self, id: 1)
            let observer = Task { for try await row in observation { await latest.set(row) } }
            defer { observer.cancel() }
            await expectEventually(within: .seconds(15), "the row observer gave no first result") { await latest.value == before }

            let sent = CaptureStamped(id: 1, title: "renamed", updatedAt: Date(timeIntervalSince1970: 0))
            try await stack.write(durability: .committed) { try await $0.update(sent) }
            let stored = try #require(try await Self.stored(1, schema: schema))
            #expect(stored.title == "RENAMED")
            #expect(stored.updatedAt > before.updatedAt)

            let converged = try await eventually(within: .seconds(15)) {
                let cached = try await stack.mainContext.object(CaptureStamped.self, id: 1)
                let observed = await latest.value
                return cached == stored && observed == stored
            }
            if !converged {
                let cached = try await stack.mainContext.object(CaptureStamped.self, id: 1)
                #expect(cached == stored, "the main context caches the row as sent, not as the trigger stored it")
                let observed = await latest.value
                #expect(observed == stored, "the row observer did not yield the row as the trigger stored it")
                Issue.record("the stored row did not reach the writing stack within 15 s")
            }
        }
    }

    @Test func aStacksOwnInsertCachesTheRowATriggerStored() async throws {
        try await Self.withStampedStack { stack, schema in
            let sent = CaptureStamped(id: 2, title: "second", updatedAt: Date(timeIntervalSince1970: 0))
            try await stack.write(durability: .committed) { try $0.insert(sent) }
            let stored = try #require(try await Self.stored(2, schema: schema))
            #expect(stored.title == "SECOND")
            let converged = try await eventually(within: .seconds(15)) {
                try await stack.mainContext.object(CaptureStamped.self, id: 2) == stored
            }
            let cached = try await stack.mainContext.object(CaptureStamped.self, id: 2)
            #expect(converged, "within 15 s, the main context caches \(String(describing: cached)), PostgreSQL holds \(stored)")
        }
    }

    @Test func aCascadeFromAStacksOwnDeleteLeavesItsCacheAndObservers() async throws {
        try await CaptureHarness.withSchema { schema in
            let stack = try await CaptureHarness.stack(schema: schema)
            try await withCleanup {
                let all = FetchDescriptor<CaptureBook>(sortBy: [SortDescriptor(\CaptureBook.id)])
                #expect(try await stack.mainContext.fetch(all).map(\.id) == [1, 2, 3, 4, 5, 6])    // cached
                let latest = LatestBookIDs()
                let observation = stack.observe(all)
                let observer = Task { for try await result in observation { await latest.set(result.values.map(\.id)) } }
                defer { observer.cancel() }
                await expectEventually(within: .seconds(15), "the books observer gave no first result") {
                    await latest.ids == [1, 2, 3, 4, 5, 6]
                }

                try await stack.write(durability: .committed) { try await $0.delete(CaptureAuthor.self, id: 1) }
                #expect(try await CaptureHarness.storedBooks(schema: schema) == "3 4:book4,5:book5,6:book6")

                let converged = try await eventually(within: .seconds(15)) {
                    for id: Int64 in 1...3 where try await stack.mainContext.object(CaptureBook.self, id: id) != nil { return false }
                    return await latest.ids == [4, 5, 6]
                }
                if !converged {
                    for id: Int64 in 1...3 {
                        let cached = try await stack.mainContext.object(CaptureBook.self, id: id)
                        #expect(cached == nil, "the main context still returns book \(id), which the cascade deleted")
                    }
                    let observed = await latest.ids
                    #expect(observed == [4, 5, 6], "the books observer still shows the books the cascade deleted")
                    Issue.record("the cascade from the stack's own delete did not reach it within 15 s")
                }
            } cleanup: {
                await stack.shutdown()
            }
        }
    }
}

/// A row whose title and `updated_at` a `BEFORE` trigger sets (table `cap_stamped`).
struct CaptureStamped: Entity, Equatable {
    var id: Int64
    var title: String
    var updatedAt: Date

    enum CodingKeys: String, CodingKey {
        case id, title
        case updatedAt = "updated_at"
    }

    static let tableName = "cap_stamped"
    static let columns: [EntityColumn<CaptureStamped>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.updatedAt, "updated_at"),
    ]
}

/// The latest value of an observer of one `CaptureStamped`.
actor LatestStamped {
    private(set) var value: CaptureStamped??
    func set(_ value: CaptureStamped?) { self.value = .some(value) }
}

/// The ids in the latest result of an observer of books.
actor LatestBookIDs {
    private(set) var ids: [Int64]?
    func set(_ ids: [Int64]) { self.ids = ids }
}
