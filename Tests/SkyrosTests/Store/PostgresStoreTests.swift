import Foundation
@testable import Skyros
@testable import SkyrosObservation
@testable import SkyrosStack
@testable import SkyrosStore
@testable import SkyrosSync
import SkyrosPostgres
import SkyrosTestEntities
import SkyrosTestSupport
import Testing

/// Behaviour specific to the PostgreSQL store (the shared semantics are in the conformance suite).
@Suite("PostgresStore")
struct PostgresStoreTests {
    @Test func applyOnAConnectionJoinsTheCallersTransaction() async throws {
        try await StoreTestServer.withStore(.postgres) { harness in
            let store = try #require(harness.store as? PostgresStore)
            let pool = try #require(harness.pool)
            var changes = ChangeSet()
            changes.insert(StoreCounter(id: "a", value: 1))
            struct Abort: Error {}
            await #expect(throws: Abort.self) {
                try await pool.withTransaction { connection in
                    let result = try await store.apply(changes, on: connection)
                    #expect(result.changes.map(\.kind) == [.inserted])
                    throw Abort()
                }
            }
            #expect(try await store.object(StoreCounter.self, id: "a") == nil)
            _ = try await pool.withTransaction { try await store.apply(changes, on: $0) }
            #expect(try await store.object(StoreCounter.self, id: "a")?.version == 1)
        }
    }

    @Test func rawValueEnumsFitPostgresEnumColumns() async throws {
        try await StoreTestServer.withStore(.postgres) { harness in
            let store = try #require(harness.store as? PostgresStore)
            try await harness.execute(
                """
                CREATE TYPE \(harness.table("mood")) AS ENUM ('happy', 'sad');
                CREATE TABLE \(harness.table("moods")) (id integer PRIMARY KEY, mood \(harness.table("mood")) NOT NULL,
                    moods \(harness.table("mood"))[] NOT NULL DEFAULT '{}')
                """)
            try await store.validate([StoreMoodRow.self])
            try await store.insert(StoreMoodRow(id: 1, mood: .sad))
            try await store.bulkInsert((2...3).map { StoreMoodRow(id: $0, mood: .happy) })
            try await store.update(StoreMoodRow(id: 1, mood: .happy), changedColumns: ["mood"])
            #expect(try await store.fetch(StoreMoodRow.self).map(\.value.mood) == [.happy, .happy, .happy])
        }
    }

    /// A String property on an enum column is refused at start: a String is bound as `text`, which PostgreSQL
    /// does not assign to an enum column, so every write would fail (a String raw-value enum type fits).
    @Test func aStringPropertyOnAnEnumColumnIsRefusedAtStart() async throws {
        try await StoreTestServer.withStore(.postgres) { harness in
            let store = try #require(harness.store as? PostgresStore)
            try await harness.execute(
                """
                CREATE TYPE \(harness.table("mood")) AS ENUM ('sad', 'happy');
                CREATE TABLE \(harness.table("moods")) (id integer PRIMARY KEY, mood \(harness.table("mood")) NOT NULL)
                """)
            let error = await #expect(throws: SchemaMismatchError.self) { try await store.validate([StoreMoodText.self]) }
            #expect(error?.description.contains("mood") == true)
            try await store.validate([StoreMoodRow.self])
        }
    }

    /// A String property on a `citext` column: predicates and sorts compare it as text, case-sensitively and in
    /// code-point order, as Swift (and the in-memory store) do.
    @Test func stringPropertiesOnCitextColumnsCompareAsSwiftDoes() async throws {
        try await StoreTestServer.withStore(.postgres) { harness in
            let store = try #require(harness.store as? PostgresStore)
            try await harness.execute(
                """
                CREATE EXTENSION IF NOT EXISTS citext SCHEMA public;
                CREATE TABLE \(harness.table("moods")) (id integer PRIMARY KEY, mood public.citext NOT NULL)
                """)
            try await store.validate([StoreMoodText.self])
            try await store.bulkInsert([StoreMoodText(id: 1, mood: "Sad"), StoreMoodText(id: 2, mood: "happy"), StoreMoodText(id: 3, mood: "sad")])
            let sad = "sad"
            #expect(try await store.fetch(FetchDescriptor<StoreMoodText>(predicate: #Predicate { $0.mood == sad })).map(\.value.id) == [3])
            #expect(try await store.fetch(FetchDescriptor<StoreMoodText>(predicate: #Predicate { $0.mood.starts(with: "s") })).map(\.value.id) == [3])
            // Code-point order: "Sad" < "happy" < "sad".
            let sorted = try await store.fetch(FetchDescriptor<StoreMoodText>(sortBy: [SortDescriptor(\.mood)]))
            #expect(sorted.map(\.value.id) == [1, 2, 3])
        }
    }

    /// A String property on a `char(n)` column reads back as it was written: the padding PostgreSQL adds (and
    /// ignores when it compares, or casts to text) is not part of the value, so a fetched row equals the one
    /// saved and a predicate evaluated in memory agrees with SQL. Inner spaces stay.
    @Test func stringPropertiesOnCharColumnsReadBackWithoutThePadding() async throws {
        try await StoreTestServer.withStore(.postgres) { harness in
            let store = try #require(harness.store as? PostgresStore)
            try await harness.execute("CREATE TABLE \(harness.table("moods")) (id integer PRIMARY KEY, mood char(8) NOT NULL)")
            try await store.validate([StoreMoodText.self])
            let saved = [StoreMoodText(id: 1, mood: "sad"), StoreMoodText(id: 2, mood: "so so"), StoreMoodText(id: 3, mood: "happy")]
            try await store.bulkInsert(Array(saved.prefix(2)))
            try await store.insert(saved[2])
            let fetched = try await store.fetch(StoreMoodText.self).map(\.value)
            #expect(fetched == saved)
            #expect(try await store.object(StoreMoodText.self, id: 2)?.value == saved[1])
            let sad = "sad"
            let predicate = #Predicate<StoreMoodText> { $0.mood == sad }
            #expect(try await store.fetch(FetchDescriptor(predicate: predicate)).map(\.value.id) == [1])
            #expect(try fetched.filter { try predicate.evaluate($0) }.map(\.id) == [1])
            // The client itself returns the column as PostgreSQL sends it.
            let raw = try await harness.pool!.withConnection { try await $0.query("SELECT mood FROM \(unsafeRaw: harness.table("moods")) WHERE id = 1") }
            #expect(try raw[0].decode(String.self, at: 0) == "sad     ")
        }
    }

    /// A `UInt64` property on a `numeric` column is refused at start: it is read as an integer, which a
    /// `numeric` column is not (every fetch failed to decode).
    @Test func anUnsignedPropertyOnANumericColumnIsRefusedAtStart() async throws {
        try await StoreTestServer.withStore(.postgres) { harness in
            let store = try #require(harness.store as? PostgresStore)
            try await harness.execute("CREATE TABLE \(harness.table("big_counts")) (id integer PRIMARY KEY, n numeric NOT NULL)")
            let error = await #expect(throws: SchemaMismatchError.self) { try await store.validate([StoreBigCount.self]) }
            #expect(error?.description.contains("n") == true)
        }
    }

    /// Tables every insert or upsert of the entity would fail on are refused at start: a mapped GENERATED ALWAYS
    /// identity or generated column, and a key whose only unique constraint is deferrable (ON CONFLICT refuses
    /// it). GENERATED BY DEFAULT and an immediate key are fine.
    @Test func columnsNoInsertCanWriteAndDeferrableKeysAreRefusedAtStart() async throws {
        try await StoreTestServer.withStore(.postgres) { harness in
            let store = try #require(harness.store as? PostgresStore)
            let table = harness.table("big_counts")
            for (definition, refused) in [
                ("id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY, n bigint NOT NULL", "GENERATED ALWAYS"),
                ("id integer PRIMARY KEY, base bigint, n bigint GENERATED ALWAYS AS (base * 2) STORED", "GENERATED ALWAYS"),
                ("id integer, n bigint NOT NULL, CONSTRAINT big_counts_key PRIMARY KEY (id) DEFERRABLE", "deferrable"),
                ("id integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, n bigint NOT NULL", nil),
            ] as [(String, String?)] {
                try await harness.execute("DROP TABLE IF EXISTS \(table); CREATE TABLE \(table) (\(definition))")
                if let refused {
                    let error = await #expect(throws: SchemaMismatchError.self) { try await store.validate([StoreBigCountSigned.self]) }
                    #expect(error?.description.contains(refused) == true, "\(definition): \(String(describing: error))")
                } else {
                    try await store.validate([StoreBigCountSigned.self])
                    try await store.insert(StoreBigCountSigned(id: 7, n: 1))
                    #expect(try await store.upsert(StoreBigCountSigned(id: 7, n: 2)) > 0)
                }
            }
        }
    }

    /// A merge-by-property update guards each changed column with the value it read; on a `json` column that
    /// value is bound as jsonb, which `json` has no operator for: both are compared as jsonb.
    @Test func mergeByPropertyGuardsAJSONColumn() async throws {
        try await StoreTestServer.withStore(.postgres) { harness in
            let store = try #require(harness.store as? PostgresStore)
            for type in ["json", "jsonb"] {
                try await harness.execute(
                    "DROP TABLE IF EXISTS \(harness.table("settings")); CREATE TABLE \(harness.table("settings")) (id integer PRIMARY KEY, prefs \(type) NOT NULL)")
                let read = StoreSettings(id: 1, prefs: .init(theme: "dark", size: 12))
                try await store.insert(read)
                let original = try RowEncoder(plan: EntityPlan<StoreSettings>.shared).encode(read)[1]
                var changed = read
                changed.prefs.size = 14
                var update = ChangeSet()
                _ = update.update(changed, changedColumns: ["prefs"], expectedVersion: nil, resolution: .compareColumns(originals: ["prefs": original]))
                #expect(try await store.apply(update).changes.count == 1, "\(type)")
                #expect(try await store.object(StoreSettings.self, id: 1)?.value.prefs.size == 14, "\(type)")
                // A guard that no longer holds is a conflict.
                var stale = ChangeSet()
                _ = stale.update(read, changedColumns: ["prefs"], expectedVersion: nil, resolution: .compareColumns(originals: ["prefs": original]))
                await #expect(throws: StoreError.self, "\(type)") { try await store.apply(stale) }
            }
        }
    }

    @Test func concurrentFindOrCreateCreatesExactlyOnce() async throws {
        try await StoreTestServer.withStore(.postgres) { harness in
            let store = harness.store
            let results = try await withThrowingTaskGroup(of: (Versioned<StoreCounter>, Bool).self) { group in
                for i in 0..<16 {
                    group.addTask {
                        let result = try await store.findOrCreate(StoreCounter(id: "shared", value: i))
                        return (result.value, result.created)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.filter(\.1).count == 1)
            #expect(Set(results.map(\.0.value.value)).count == 1)
        }
    }
}

enum StoreMood: String, Codable, Sendable { case happy, sad }

struct StoreBigCount: Entity, Equatable {
    var id: Int
    var n: UInt64
    static let tableName = "big_counts"
    static let columns: [EntityColumn<StoreBigCount>] = [EntityColumn(\.id, "id"), EntityColumn(\.n, "n")]
}

struct StoreBigCountSigned: Entity, Equatable {
    var id: Int
    var n: Int
    static let tableName = "big_counts"
    static let columns: [EntityColumn<StoreBigCountSigned>] = [EntityColumn(\.id, "id"), EntityColumn(\.n, "n")]
}

struct StoreSettings: Entity, Equatable {
    struct Prefs: Codable, Equatable, Sendable {
        var theme: String
        var size: Int
    }
    var id: Int
    var prefs: Prefs
    static let tableName = "settings"
    static let columns: [EntityColumn<StoreSettings>] = [EntityColumn(\.id, "id"), EntityColumn(\.prefs, "prefs")]
}

/// `moods` with its enum column read as a String.
struct StoreMoodText: Entity, Equatable {
    var id: Int
    var mood: String
    static let tableName = "moods"
    static let columns: [EntityColumn<StoreMoodText>] = [EntityColumn(\.id, "id"), EntityColumn(\.mood, "mood")]
    static let defaultSort = [SortDescriptor(\StoreMoodText.id)]
}

struct StoreMoodRow: Entity, Equatable {
    var id: Int
    var mood: StoreMood
    static let tableName = "moods"
    static let columns: [EntityColumn<StoreMoodRow>] = [EntityColumn(\.id, "id"), EntityColumn(\.mood, "mood")]
    static let defaultSort = [SortDescriptor(\StoreMoodRow.id)]
}
