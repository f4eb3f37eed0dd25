import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// A row whose key comes from a `bigint GENERATED ALWAYS AS IDENTITY` column, in blocks of 50.
struct IdentityRow: Entity, Equatable {
    var id: Int64
    var n: Int

    static let tableName = "identity_rows"
    static let columns: [EntityColumn<IdentityRow>] = [EntityColumn(\.id, "id", generated: .identity(blockSize: 50)), EntityColumn(\.n, "n")]
}

/// Every kind of column the database decides: identity key, `DEFAULT now()`, a `BEFORE INSERT OR UPDATE` trigger
/// (`updated_at`) and a generated column.
struct OwnedTicket: Entity, Equatable, ColumnKeyStrategyProviding {
    var id: Int64
    var title: String
    var createdAt: Date
    var updatedAt: Date
    var titleLength: Int

    static let tableName = "owned_tickets"
    static let columnKeyStrategy = ColumnKeyStrategy.convertToSnakeCase
    static let columns: [EntityColumn<OwnedTicket>] = [
        EntityColumn(\.id, "id", generated: .identity), EntityColumn(\.title, "title"),
        EntityColumn(\.createdAt, "created_at", generated: .onInsert),
        EntityColumn(\.updatedAt, "updated_at", generated: .onInsertAndUpdate),
        EntityColumn(\.titleLength, "title_length", generated: .computed),
    ]

    static func new(_ title: String) -> OwnedTicket {
        OwnedTicket(id: 0, title: title, createdAt: .distantPast, updatedAt: .distantPast, titleLength: -1)
    }
}

/// Defaults without a trigger (`now()`, `gen_random_uuid()`) and a generated column: the stack caches the row
/// the write returned.
struct OwnedNote: Entity, Equatable, ColumnKeyStrategyProviding {
    var id: Int
    var body: String
    var token: UUID
    var createdAt: Date
    var shout: String

    static let tableName = "owned_notes"
    static let columnKeyStrategy = ColumnKeyStrategy.convertToSnakeCase
    static let columns: [EntityColumn<OwnedNote>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.body, "body"), EntityColumn(\.token, "token", generated: .onInsert),
        EntityColumn(\.createdAt, "created_at", generated: .onInsert), EntityColumn(\.shout, "shout", generated: .computed),
    ]
}

/// Maps a `GENERATED ALWAYS AS IDENTITY` key and a generated column without declaring them.
struct UndeclaredOwned: Entity, ColumnKeyStrategyProviding {
    var id: Int64
    var title: String
    var titleLength: Int

    static let tableName = "owned_tickets"
    static let columnKeyStrategy = ColumnKeyStrategy.convertToSnakeCase
    static let columns: [EntityColumn<UndeclaredOwned>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.titleLength, "title_length"),
    ]
}

/// A column declared `.onInsert`; which table it maps decides whether anything in the database sets it.
struct StampedRow: Entity {
    var id: Int
    var stamp: Date

    static let tableName = "stamped_rows"
    static let columns: [EntityColumn<StampedRow>] = [EntityColumn(\.id, "id"), EntityColumn(\.stamp, "stamp", generated: .onInsert)]
}

/// Values the database decides (issue #26): ids handed out at `insert` from blocks of the sequence, defaults,
/// trigger-set and generated columns read back after the commit into the writer's result and the cache.
@Suite("Database-owned columns", .timeLimit(.minutes(3)))
struct DatabaseOwnedColumnTests {
    static let migration = """
        -- migrate:up
        CREATE TABLE identity_rows (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, n integer NOT NULL);
        CREATE TABLE owned_tickets (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, title text NOT NULL,
                                    created_at timestamptz NOT NULL DEFAULT now(),
                                    updated_at timestamptz NOT NULL DEFAULT now(),
                                    title_length integer NOT NULL GENERATED ALWAYS AS (length(title)) STORED);
        CREATE FUNCTION owned_touch() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.updated_at := clock_timestamp();
            RETURN NEW;
        END
        $$;
        CREATE TRIGGER owned_touch BEFORE INSERT OR UPDATE ON owned_tickets FOR EACH ROW EXECUTE FUNCTION owned_touch();
        CREATE TABLE owned_notes (id integer PRIMARY KEY, body text NOT NULL,
                                  token uuid NOT NULL DEFAULT gen_random_uuid(),
                                  created_at timestamptz NOT NULL DEFAULT now(),
                                  shout text NOT NULL GENERATED ALWAYS AS (upper(body)) STORED);
        """

    static let entities: [any Entity.Type] = [IdentityRow.self, OwnedTicket.self, OwnedNote.self]

    static func withOwnedStack(_ kind: StackKind, _ body: (DataStack, _ schema: String?) async throws -> Void) async throws {
        switch kind {
        case .inMemory:
            let stack = try await DataStack.start(DataStackConfiguration(store: .inMemory, entities: Self.entities))
            let store = stack.store as! InMemoryStore
            let timestamp = ColumnDefinition(.named("timestamptz"), default: .now)
            store.declare(OwnedTicket.self, columns: ["created_at": timestamp, "updated_at": timestamp])
            store.declare(OwnedNote.self, columns: [
                "created_at": timestamp, "token": ColumnDefinition(.named("uuid"), default: .randomUUID),
            ])
            try await withCleanup { try await body(stack, nil) } cleanup: { await stack.shutdown() }
        case .postgres:
            let schema = StackTestServer.uniqueSchemaName()
            try await StackTestServer.withMigrations(["1_owned.sql": Self.migration]) { directory in
                let configuration = DataStackConfiguration(
                    store: .postgres(try TestServer.configuration, schema: schema), migrations: .directory(directory),
                    entities: Self.entities, pool: .init(maximumConnections: 6, leaseTimeout: .seconds(120)))
                let stack = try await DataStack.start(configuration)
                try await withCleanup { try await body(stack, schema) } cleanup: {
                    await stack.shutdown()
                    await TestServer.dropSchema(schema)
                }
            }
        }
    }

    @Test("1,000 queued inserts from 16 tasks get their ids at once; the table holds exactly those; one round trip per block",
          arguments: StackKind.allCases)
    func identityBlocks(kind: StackKind) async throws {
        try await Self.withOwnedStack(kind) { stack, schema in
            let ids = try await withThrowingTaskGroup(of: [Int64].self) { group in
                for task in 0..<16 {
                    group.addTask {
                        var ids: [Int64] = []
                        for n in stride(from: task, to: 1_000, by: 16) {
                            let row = try await stack.write { try $0.insert(IdentityRow(id: 0, n: n)) }
                            ids.append(row.id)
                        }
                        return ids
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(ids.count == 1_000)
            #expect(Set(ids).count == 1_000)
            #expect(!ids.contains(0))

            try await stack.mainContext.saveToStore()   // waits for every queued commit
            let stored = try await stack.store.fetch(FetchDescriptor<IdentityRow>())
            #expect(Set(stored.map(\.value.id)) == Set(ids))
            #expect(stored.count == 1_000)

            // Every id came from a block of 50 taken in one round trip: 20 blocks at least, a couple ahead at most.
            let blocks = stack.identityBlocksFetched(IdentityRow.self)
            #expect(blocks >= 20 && blocks <= 23, "blocks: \(blocks)")
            if let schema {
                // The sequence moved by exactly the blocks taken: nothing else called nextval.
                let lastValue = try await TestServer.withConnection { connection in
                    try await connection.query(
                        "SELECT pg_sequence_last_value(pg_get_serial_sequence(\(quoteIdentifier(schema) + ".identity_rows"), 'id')::regclass)"
                    ).first?.decode(Int64.self, at: 0)
                }
                #expect(lastValue == Int64(blocks * 50))
            }
        }
    }

    @Test("Reserving more ids than a block holds takes them in one round trip; a write then inserts them all",
          arguments: StackKind.allCases)
    func aLargeReservationIsOneRoundTrip(kind: StackKind) async throws {
        try await Self.withOwnedStack(kind) { stack, _ in
            let before = stack.identityBlocksFetched(IdentityRow.self)
            let ids = try await stack.write(durability: .committed) { context in
                try await context.reserveIdentities(IdentityRow.self, count: 500)   // ten blocks of 50
                return try (0..<500).map { try context.insert(IdentityRow(id: 0, n: $0)).id }
            }
            #expect(Set(ids).count == 500 && !ids.contains(0))
            // One fetch for the 500 (a block fetched ahead in the background may follow it).
            let fetched = stack.identityBlocksFetched(IdentityRow.self) - before
            #expect(fetched >= 1 && fetched <= 2, "fetches: \(fetched)")
        }
    }

    @Test("A durable write returns the stored row: default now(), trigger-set updated_at, generated column; the cache agrees",
          arguments: StackKind.allCases)
    func durableWriteReturnsStoredValues(kind: StackKind) async throws {
        try await Self.withOwnedStack(kind) { stack, _ in
            let before = Date().addingTimeInterval(-60)
            let ticket = try await stack.write(durability: .committed) { try $0.insert(OwnedTicket.new("Printer")) }
            #expect(ticket.id > 0)
            #expect(ticket.createdAt > before)
            #expect(ticket.updatedAt >= ticket.createdAt)
            let stored = try #require(try await stack.store.object(OwnedTicket.self, id: ticket.id)).value
            // The in-memory store does not compute generated columns: title_length keeps the value written.
            var expected = ticket
            if kind == .inMemory { expected.titleLength = -1 }
            #expect(stored == expected)
            if kind == .postgres { #expect(ticket.titleLength == 7) }
            let cached = try await stack.read { try await $0.object(OwnedTicket.self, id: ticket.id) }
            #expect(cached == stored)

            // An update never writes what the database decides: created_at stays, updated_at moves, the generated
            // column follows the title.
            var renamed = ticket
            renamed.title = "Scanner!"
            renamed.createdAt = .distantFuture
            renamed.updatedAt = .distantFuture
            let updated = try await stack.write(durability: .committed) { context in
                try await context.update(renamed)
                return renamed
            }
            #expect(updated.title == "Scanner!")
            #expect(updated.createdAt == ticket.createdAt)
            #expect(updated.updatedAt > ticket.updatedAt && updated.updatedAt < .distantFuture)
            if kind == .postgres { #expect(updated.titleLength == 8) }
            let storedAfter = try #require(try await stack.store.object(OwnedTicket.self, id: ticket.id)).value
            #expect(storedAfter == updated)
            let cachedAfter = try await stack.read { try await $0.object(OwnedTicket.self, id: ticket.id) }
            #expect(cachedAfter == storedAfter)
        }
    }

    @Test("Defaults without a trigger: the row the insert returned is cached as stored (a cache hit)", arguments: StackKind.allCases)
    func returnedRowIsCached(kind: StackKind) async throws {
        try await Self.withOwnedStack(kind) { stack, _ in
            let zero = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
            let written = OwnedNote(id: 1, body: "hello", token: zero, createdAt: .distantPast, shout: "")
            let note = try await stack.write(durability: .committed) { try $0.insert(written) }
            #expect(note.token != zero)
            #expect(note.createdAt > Date().addingTimeInterval(-60))
            if kind == .postgres { #expect(note.shout == "HELLO") }
            let stored = try #require(try await stack.store.object(OwnedNote.self, id: 1)).value
            #expect(stored == note)

            let hits = stack.cacheStatistics.hits
            let cached = try await stack.read { try await $0.object(OwnedNote.self, id: 1) }
            #expect(cached == stored)
            #expect(stack.cacheStatistics.hits == hits + 1)
        }
    }

    @Test("Before its commit a reader sees the values the app gave; after it, the stored ones", arguments: StackKind.allCases)
    func pendingRowShowsAppValues(kind: StackKind) async throws {
        try await Self.withOwnedStack(kind) { stack, _ in
            stack.holdCommits()
            let note = try await stack.write { try $0.insert(OwnedNote(id: 2, body: "queued", token: UUID(), createdAt: .distantPast, shout: "")) }
            let pending = try await stack.read { try await $0.object(OwnedNote.self, id: 2) }
            #expect(pending?.createdAt == .distantPast)
            #expect(try stack.mainContext.hasPendingChanges(OwnedNote.self, id: 2))
            let child = stack.mainContext.newChildContext()
            #expect(try child.hasPendingChanges(OwnedNote.self, id: 2), "a child sees its root's queued write as pending")
            #expect(try !stack.mainContext.hasPendingChanges(OwnedNote.self, id: 99))
            stack.releaseCommits()
            try await stack.mainContext.saveToStore()
            await expectEventually { (try? stack.mainContext.hasPendingChanges(OwnedNote.self, id: 2)) == false }
            let committed = try await stack.read { try await $0.object(OwnedNote.self, id: 2) }
            #expect(committed?.createdAt != .distantPast)
            #expect(committed?.token != note.token)
        }
    }

    @Test("Start refuses an undeclared GENERATED ALWAYS identity or generated column, naming it")
    func undeclaredGeneratedColumnsRefused() async throws {
        let schema = StackTestServer.uniqueSchemaName()
        try await StackTestServer.withMigrations(["1_owned.sql": Self.migration]) { directory in
            let configuration = DataStackConfiguration(
                store: .postgres(try TestServer.configuration, schema: schema), migrations: .directory(directory),
                entities: [UndeclaredOwned.self])
            let error = await thrownError { _ = try await DataStack.start(configuration) }
            await TestServer.dropSchema(schema)
            let mismatch = try #require((error as? DataStackError)?.underlying as? SchemaMismatchError)
            #expect(mismatch.issues.contains { $0.column == "id" && $0.message.contains(".identity") })
            #expect(mismatch.issues.contains { $0.column == "title_length" && $0.message.contains(".computed") })
        }
    }

    @Test("Start refuses a column declared .onInsert that no DEFAULT or BEFORE INSERT trigger sets; a trigger or a domain's DEFAULT suffices")
    func anOnInsertColumnNothingSetsIsRefused() async throws {
        let bare = """
            -- migrate:up
            CREATE TABLE stamped_rows (id integer PRIMARY KEY, stamp timestamptz NOT NULL);
            """
        let error = await thrownError { _ = try await Self.insertStamped(migration: bare) }
        let mismatch = try #require((error as? DataStackError)?.underlying as? SchemaMismatchError)
        #expect(mismatch.issues.count == 1)
        let issue = try #require(mismatch.issues.first)
        #expect(issue.column == "stamp")
        #expect(issue.message.contains(".onInsert") && issue.message.contains("DEFAULT"), "\(issue.message)")

        // The column typed by a domain that has a DEFAULT: accepted, and an insert reads back the default.
        let domain = """
            -- migrate:up
            CREATE DOMAIN stamp_default AS timestamptz DEFAULT '2031-01-01 00:00:00+00';
            CREATE TABLE stamped_rows (id integer PRIMARY KEY, stamp stamp_default NOT NULL);
            """
        #expect(try await Self.insertStamped(migration: domain) == Date(timeIntervalSince1970: 1_924_992_000))

        // The bare table with a BEFORE INSERT row trigger that sets the column: accepted, and an insert reads back
        // the value the trigger stored.
        let triggered = bare + """

            CREATE FUNCTION stamp_row() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                NEW.stamp := '2030-01-02 03:04:05+00';
                RETURN NEW;
            END
            $$;
            CREATE TRIGGER stamp_row BEFORE INSERT ON stamped_rows FOR EACH ROW EXECUTE FUNCTION stamp_row();
            """
        #expect(try await Self.insertStamped(migration: triggered) == Date(timeIntervalSince1970: 1_893_553_445))
    }

    /// Starts a stack of `StampedRow` over `migration` in a schema of its own, inserts row 1 durably and
    /// returns the `stamp` stored; the start's error when it refuses the schema.
    static func insertStamped(migration: String) async throws -> Date {
        let schema = StackTestServer.uniqueSchemaName()
        return try await StackTestServer.withMigrations(["1_stamped.sql": migration]) { directory in
            let configuration = DataStackConfiguration(
                store: .postgres(try TestServer.configuration, schema: schema), migrations: .directory(directory),
                entities: [StampedRow.self])
            let stack: DataStack
            do {
                stack = try await DataStack.start(configuration)
            } catch {
                await TestServer.dropSchema(schema)
                throw error
            }
            return try await withCleanup {
                try await stack.write(durability: .committed) { try $0.insert(StampedRow(id: 1, stamp: .distantPast)) }.stamp
            } cleanup: {
                await stack.shutdown()
                await TestServer.dropSchema(schema)
            }
        }
    }
}
