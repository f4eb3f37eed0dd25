import Foundation
import Logging
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

enum DoorMood: String, Codable, Sendable { case calm, busy, angry }

/// A row with a column of each checked kind: int4, varchar(255), numeric(6,2), NOT NULL text mapped to an
/// optional property, a PostgreSQL enum, char(4) and timestamptz.
struct DoorTicket: Entity, Equatable {
    var id: Int
    var priority: Int
    var title: String
    var price: Decimal
    var note: String?
    var mood: DoorMood?
    var code: String?
    var at: Date?

    static let tableName = "door_tickets"
    static let columns: [EntityColumn<DoorTicket>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.priority, "priority"), EntityColumn(\.title, "title"),
        EntityColumn(\.price, "price"), EntityColumn(\.note, "note"), EntityColumn(\.mood, "mood"),
        EntityColumn(\.code, "code"), EntityColumn(\.at, "at"),
    ]

    static func valid(_ id: Int) -> DoorTicket {
        DoorTicket(id: id, priority: 1, title: "fine", price: Decimal(string: "12.50")!, note: "n", mood: .calm, code: nil, at: nil)
    }
}

/// Values refused at the door: each throws at `insert`/`update` with entity, column and type named, nothing is
/// recorded or queued, nothing reaches the table, and no log record holds the value. Both stores.
@Suite("Door checks", .timeLimit(.minutes(2)))
struct DoorCheckTests {
    static let migration = """
        -- migrate:up
        CREATE TYPE door_mood AS ENUM ('calm', 'busy');
        CREATE TABLE door_tickets (id bigint PRIMARY KEY, priority integer NOT NULL, title varchar(255) NOT NULL,
                                   price numeric(6,2) NOT NULL, note text NOT NULL, mood door_mood, code char(4),
                                   at timestamptz);
        """

    /// The same columns, declared for the in-memory store.
    static let declared: [String: ColumnDefinition] = [
        "id": ColumnDefinition(.bigint), "priority": ColumnDefinition(.integer), "title": ColumnDefinition(.varchar(255)),
        "price": ColumnDefinition(.numeric(6, 2)), "note": ColumnDefinition(.text),
        "mood": ColumnDefinition(.enumeration("door_mood", labels: ["calm", "busy"]), nullable: true),
        "code": ColumnDefinition(.char(4), nullable: true), "at": ColumnDefinition(.named("timestamptz"), nullable: true),
    ]

    static func withDoorStack(
        _ kind: StackKind, _ body: (DataStack, RecordingLogHandler) async throws -> Void
    ) async throws {
        let (logger, handler) = RecordingLogHandler.logger()
        switch kind {
        case .inMemory:
            let stack = try await DataStack.start(DataStackConfiguration(store: .inMemory), logger: logger)
            (stack.store as! InMemoryStore).declare(DoorTicket.self, columns: Self.declared)
            try await withCleanup { try await body(stack, handler) } cleanup: { await stack.shutdown() }
        case .postgres:
            let schema = StackTestServer.uniqueSchemaName()
            try await StackTestServer.withMigrations(["1_door.sql": Self.migration]) { directory in
                let configuration = DataStackConfiguration(
                    store: .postgres(try TestServer.configuration, schema: schema), migrations: .directory(directory),
                    entities: [DoorTicket.self], pool: .init(maximumConnections: 4, leaseTimeout: .seconds(120)))
                let stack = try await DataStack.start(configuration, logger: logger)
                try await withCleanup { try await body(stack, handler) } cleanup: {
                    await stack.shutdown()
                    await TestServer.dropSchema(schema)
                }
            }
        }
    }

    /// The rows in the table, read from the store itself (not through the stack's cache or queue).
    static func storedRows(_ stack: DataStack) async throws -> [DoorTicket] {
        try await stack.store.fetch(FetchDescriptor<DoorTicket>()).map(\.value)
    }

    /// Each refused change: the row, the column and type the error must name, the reason, and a text that must
    /// not appear in any log record or error text.
    static func refusals(_ id: Int) -> [(DoorTicket, column: String, type: String, reason: ColumnValueError.Reason, secret: String?)] {
        var overflow = DoorTicket.valid(id)
        overflow.priority = 9_999_999_999
        var long = DoorTicket.valid(id)
        long.title = "Zq" + String(repeating: "x", count: 298)
        var null = DoorTicket.valid(id)
        null.note = nil
        var money = DoorTicket.valid(id)
        money.price = Decimal(string: "12345.67")!
        var nul = DoorTicket.valid(id)
        nul.title = "se\u{0}cret"
        var label = DoorTicket.valid(id)
        label.mood = .angry
        return [
            (overflow, "priority", "int4", .outOfRange, "9999999999"),
            (long, "title", "varchar(255)", .tooLong, "Zqxxxx"),
            (null, "note", "text", .nullNotAllowed, nil),   // nil: no value to leak
            (money, "price", "numeric(6,2)", .numericOverflow, "12345"),
            (nul, "title", "varchar(255)", .nulCharacter, "cret"),
            (label, "mood", "door_mood", .notAnEnumLabel, "angry"),
        ]
    }

    static func expectRefused(
        _ error: (any Error)?, column: String, type: String, reason: ColumnValueError.Reason, secret: String?,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        guard let error = error as? ColumnValueError else {
            Issue.record("expected a ColumnValueError, got \(String(describing: error))", sourceLocation: sourceLocation)
            return
        }
        #expect(error.entity == "DoorTicket", sourceLocation: sourceLocation)
        #expect(error.column == column, sourceLocation: sourceLocation)
        #expect(error.columnType == type, sourceLocation: sourceLocation)
        #expect(error.reason == reason, sourceLocation: sourceLocation)
        #expect(error.description.contains(column) && error.description.contains(type), sourceLocation: sourceLocation)
        if let secret {
            #expect(!String(reflecting: error).contains(secret), sourceLocation: sourceLocation)
            #expect(!"\(error)".contains(secret), sourceLocation: sourceLocation)
        }
    }

    @Test("insert: each value its column cannot hold throws at once; nothing recorded, queued or stored", arguments: StackKind.allCases)
    func insertRefused(kind: StackKind) async throws {
        try await Self.withDoorStack(kind) { stack, handler in
            for (row, column, type, reason, secret) in Self.refusals(1) {
                let context = stack.newBackgroundContext()
                let error = await thrownError { try context.insert(row) }
                Self.expectRefused(error, column: column, type: type, reason: reason, secret: secret)
                #expect(!context.hasChanges)
                let bulk = await thrownError { try context.bulkInsert([DoorTicket.valid(2), row]) }
                Self.expectRefused(bulk, column: column, type: type, reason: reason, secret: secret)
                #expect(!context.hasChanges)
                // Through write {}: the body throws, nothing is saved.
                _ = await thrownError { try await stack.write { try $0.insert(row) } }
                let visible = try await stack.mainContext.object(DoorTicket.self, id: 1)
                #expect(visible == nil)
                if let secret { #expect(!handler.entries.contains { $0.text.contains(secret) }) }
            }
            #expect(stack.commitQueueStatistics.sets == 0)
            #expect(stack.commitQueueStatistics.failures == 0)
            let stored = try await Self.storedRows(stack)
            #expect(stored.isEmpty)
        }
    }

    @Test("update: a value its column cannot hold throws at once; the row keeps what it had", arguments: StackKind.allCases)
    func updateRefused(kind: StackKind) async throws {
        try await Self.withDoorStack(kind) { stack, handler in
            try await stack.write(durability: .committed) { try $0.insert(DoorTicket.valid(5)) }
            let setsBefore = stack.commitQueueStatistics.sets
            for (row, column, type, reason, secret) in Self.refusals(5) {
                let context = stack.newBackgroundContext()
                let error = await thrownError { try await context.update(row) }
                Self.expectRefused(error, column: column, type: type, reason: reason, secret: secret)
                #expect(!context.hasChanges)
                if let secret { #expect(!handler.entries.contains { $0.text.contains(secret) }) }
            }
            #expect(stack.commitQueueStatistics.sets == setsBefore)
            let stored = try await Self.storedRows(stack)
            #expect(stored == [DoorTicket.valid(5)])
            let visible = try await stack.mainContext.object(DoorTicket.self, id: 5)
            #expect(visible == DoorTicket.valid(5))
        }
    }

    @Test("Values are kept as the table stores them: dates to microseconds, numbers to their scale, char(n) unpadded",
          arguments: StackKind.allCases)
    func normalisedAtTheDoor(kind: StackKind) async throws {
        try await Self.withDoorStack(kind) { stack, _ in
            var row = DoorTicket.valid(9)
            row.at = Date(timeIntervalSince1970: 1_800_000_000.1234567)
            row.price = Decimal(string: "1.235")!
            row.code = "ab  "
            var expected = row
            expected.at = Date(timeIntervalSince1970: 1_800_000_000.123457)
            expected.price = Decimal(string: "1.24")!
            expected.code = "ab"
            try await stack.write { try $0.insert(row) }
            // Queued (or committed): readers see the stored form at once.
            let visible = try await stack.mainContext.object(DoorTicket.self, id: 9)
            #expect(visible == expected)
            try await expectEventually { try await !Self.storedRows(stack).isEmpty }
            let stored = try await Self.storedRows(stack)
            #expect(stored == [expected])
            let at = try #require(expected.at)
            let matching = try await stack.mainContext.fetch(FetchDescriptor<DoorTicket>(predicate: #Predicate { $0.at == at }))
            #expect(matching.map(\.id) == [9])
            let unrounded = Date(timeIntervalSince1970: 1_800_000_000.1234567)
            let found = try await stack.store.fetch(FetchDescriptor<DoorTicket>(predicate: #Predicate { $0.at == unrounded }))
            #expect(found.map(\.value.id) == [9])
        }
    }

    @Test("PostgreSQL rounds timestamptz input to microseconds the way Date.postgresStored does")
    func postgresRoundingAgrees() async throws {
        let connection = try await TestServer.connect()
        try await withCleanup {
            let rows = try await connection.query(
                "SELECT '2027-01-15 08:00:00.1234567+00'::timestamptz::text, '2027-01-15 08:00:00.1234565+00'::timestamptz::text, '2027-01-15 08:00:00.1234575+00'::timestamptz::text")
            #expect(try rows[0].decode(String.self, at: 0) == "2027-01-15 08:00:00.123457+00")
            // Ties to even (rint), which the encoder and the in-memory normalisation use too.
            #expect(try rows[0].decode(String.self, at: 1) == "2027-01-15 08:00:00.123456+00")
            #expect(try rows[0].decode(String.self, at: 2) == "2027-01-15 08:00:00.123458+00")
            // A Date with the same sub-µs digits, normalised by Skyros, equals what the server stores and returns.
            let stored = try await connection.query(
                "SELECT \(Date(timeIntervalSince1970: 1_800_000_000.1234567))::timestamptz")[0].decode(Date.self, at: 0)
            #expect(Date(timeIntervalSince1970: 1_800_000_000.1234567).postgresStored == stored)
        } cleanup: {
            await connection.close()
        }
    }
}
