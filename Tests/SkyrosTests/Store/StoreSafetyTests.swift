import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestEntities
import SkyrosTestSupport
import Testing

/// Bad input gets a clear error and changes nothing; hostile text is data, never SQL.
@Suite("Store safety")
struct StoreSafetyTests {
    static let hostile = [
        "'; DROP TABLE store_users; --", "\"quoted\" and 'single'", "back\\slash \\x00 \\N", "$1 $2 ? :name",
        "tab\there\nnewline\r\n", "emoji 🧪 ünïcödé", "", "%_ like wildcards",
    ]

    @Test(arguments: StoreKind.allCases)
    func textWithANulCharacterIsRefusedNamingEntityAndColumn(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind) { harness in
            let error = await thrownError { try await harness.store.insert(StoreUser.make(1, name: "a\u{0}b")) }
            let postgresError = try #require(error as? PGError)
            #expect(postgresError.kind == .encoding)
            #expect(postgresError.column == "name")
            #expect(postgresError.message.contains("entity StoreUser, column \"name\""))
            #expect(postgresError.message.contains("NUL"))

            var nested = StoreUser.make(2)
            nested.tags = ["ok", "bad\u{0}"]
            let arrayError = await thrownError { try await harness.store.bulkInsert([StoreUser.make(3), nested]) }
            #expect((arrayError as? PGError)?.column == "tags")
            #expect(try await harness.store.count(FetchDescriptor<StoreUser>()) == 0)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func sqlMetaCharactersInEveryValuePositionAreStoredVerbatim(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind, copyThreshold: 5) { harness in
            let store = harness.store
            func hostileUser(_ id: Int, _ text: String) -> StoreUser {
                var user = StoreUser.make(id)
                user.name = text
                user.email = text
                user.tags = [text, "\(text)\"", "{\(text)}", "NULL"]
                user.address = StoreAddress(street: text, city: "\\\(text)\"", movedIn: nil)
                user.pets = [StorePet(name: text, legs: 3)]
                user.attributes = [text: id]
                return user
            }
            let users = Self.hostile.enumerated().map { hostileUser($0.offset + 1, $0.element) }
            // insert, multi-row insert and COPY (copyThreshold 5)
            try await store.insert(users[0])
            try await store.bulkInsert(Array(users[1..<3]))
            try await store.bulkInsert(Array(users[3...]))
            for user in users {
                #expect(try await store.object(StoreUser.self, id: user.id)?.value == user)
            }
            // update, upsert, findOrCreate
            var updated = users[0]
            updated.name = Self.hostile[3]
            updated.email = Self.hostile[0]
            try await store.update(updated, changedColumns: ["name", "email"])
            try await store.upsert(hostileUser(100, Self.hostile[1]))
            _ = try await store.findOrCreate(hostileUser(101, Self.hostile[2]))
            #expect(try await store.object(StoreUser.self, id: 1)?.value == updated)
            #expect(try await store.object(StoreUser.self, id: 100)?.value == hostileUser(100, Self.hostile[1]))
            #expect(try await store.object(StoreUser.self, id: 101)?.value == hostileUser(101, Self.hostile[2]))

            // as predicate values, and as primary keys
            for text in Self.hostile {
                let matches = try await store.fetch(FetchDescriptor<StoreUser>(predicate: #Predicate { $0.email == text }))
                #expect(matches.allSatisfy { $0.value.email == text })
                #expect(!matches.isEmpty)
                try await store.insert(StoreCounter(id: text, value: 1))
                #expect(try await store.object(StoreCounter.self, id: text)?.value.id == text)
            }
            let deleted = try await store.delete(where: #Predicate<StoreCounter> { $0.id == "'; DROP TABLE store_users; --" })
            #expect(deleted == ["'; DROP TABLE store_users; --"])
            #expect(try await store.delete(StoreCounter.self, id: "$1 $2 ? :name", expectedVersion: 1))
            #expect(try await store.count(FetchDescriptor<StoreCounter>()) == Self.hostile.count - 2)
            #expect(try await store.count(FetchDescriptor<StoreUser>()) == users.count + 2)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func identifiersThatNeedQuotingWork(kind: StoreKind) async throws {
        try await StoreTestServer.withStore(kind) { harness in
            let store = harness.store
            let rows = (0..<5).map {
                StoreQuoted(id: UUID(), order: 5 - $0, select: "s\($0)", mixedCase: $0 % 2 == 0 ? nil : "m\($0)")
            }
            try await store.bulkInsert(Array(rows[0..<2]))
            try await store.insert(rows[2])
            try await store.upsert(rows[3])
            _ = try await store.findOrCreate(rows[4])
            let fetched = try await store.fetch(FetchDescriptor<StoreQuoted>(predicate: #Predicate { $0.order > 1 }))
            #expect(fetched.map(\.value) == rows.filter { $0.order > 1 }.sorted { $0.order < $1.order })
            var changed = rows[0]
            changed.mixedCase = "changed"
            changed.select = "drop"
            let version = try #require(try await store.object(StoreQuoted.self, id: changed.id)?.version)
            try await store.update(changed, changedColumns: ["Mixed \"Case\"", "select"], expectedVersion: version)
            #expect(try await store.object(StoreQuoted.self, id: changed.id)?.value == changed)
            let target = rows[1].id
            #expect(try await store.delete(where: #Predicate<StoreQuoted> { $0.id == target }) == [rows[1].id])
            #expect(try await store.count(FetchDescriptor<StoreQuoted>()) == 4)
        }
    }

    @Test func schemaValidationAcceptsMatchingEntitiesInAQuotedSchema() async throws {
        try await StoreTestServer.withStore(.postgres) { harness in
            let store = try #require(harness.store as? PostgresStore)
            try await store.validate([StoreUser.self, StoreCounter.self, StoreQuoted.self])
        }
    }

    @Test func schemaMismatchNamesEntityColumnAndBothTypes() async throws {
        try await StoreTestServer.withStore(.postgres) { harness in
            let store = try #require(harness.store as? PostgresStore)
            try await harness.execute(
                """
                CREATE TABLE \(harness.table("mismatched")) (
                    id bigint PRIMARY KEY, name text, age text, tags jsonb NOT NULL, extra text NOT NULL)
                """)
            let error = await thrownError { try await store.validate([StoreMismatched.self, StoreCounter.self]) }
            let mismatch = try #require(error as? SchemaMismatchError)
            let lines = mismatch.description.split(separator: "\n").map(String.init)
            #expect(lines.contains("entity StoreMismatched, column \"age\": Swift type Optional<Int> is incompatible with PostgreSQL type text"))
            #expect(lines.contains("entity StoreMismatched, column \"tags\": Swift type Array<String> is incompatible with PostgreSQL type jsonb"))
            #expect(lines.contains("entity StoreMismatched, column \"name\": Swift type String is not optional but the column allows NULL (add NOT NULL or make the property optional)"))
            #expect(lines.contains { $0.hasPrefix("entity StoreMismatched, column \"missing\": the column does not exist in table") })
            #expect(lines.contains { $0.hasPrefix("entity StoreMismatched, column \"extra\": the column is NOT NULL without a default") })
            #expect(mismatch.issues.allSatisfy { $0.entity == "StoreMismatched" })
            let age = try #require(mismatch.issues.first { $0.column == "age" })
            #expect(age.swiftType == "Optional<Int>" && age.postgresType == "text")

            let noTable = await thrownError { try await store.validate([StoreMissingTable.self]) }
            #expect((noTable as? SchemaMismatchError)?.issues.first?.message.contains("does not exist") == true)
        }
    }

    @Test func codableKeysWithoutColumnsFailClearly() async throws {
        let store = InMemoryStore()
        let error = await thrownError { try await store.insert(StoreUnmappedKey(id: 1, title: "t", note: "n")) }
        let mapping = try #require(error as? EntityMappingError)
        #expect(mapping.description == "entity StoreUnmappedKey, column \"note\": the Codable key \"note\" has no column in StoreUnmappedKey.columns")

        let extra = await thrownError { try await store.insert(StoreExtraColumn(id: 1)) }
        #expect((extra as? EntityMappingError)?.description.hasPrefix("entity StoreExtraColumn, column \"ghost\": no Codable key fills this column") == true)
    }

    /// A stored value that does not fit its property fails the fetch with the entity and column named (the
    /// decoder's fast path falls back to the detailed error).
    @Test func storedValuesThatDoNotDecodeNameEntityAndColumn() async throws {
        try await StoreTestServer.withStore(.postgres) { harness in
            try await harness.store.bulkInsert((1...3).map { StoreUser.make($0) })
            let table = harness.table(StoreUser.tableName)
            try await harness.execute("ALTER TABLE \(table) ALTER COLUMN score TYPE text; UPDATE \(table) SET score = 'not a number' WHERE id = 2")
            let score = try #require(await thrownError { _ = try await harness.store.fetch(FetchDescriptor<StoreUser>()) } as? PGError)
            #expect(score.kind == .decoding)
            #expect(score.column == "score")
            #expect(score.message.hasPrefix("entity StoreUser, column \"score\": "))
            #expect(score.message.contains("not a number"))

            try await harness.execute("UPDATE \(table) SET score = '2.5'; ALTER TABLE \(table) ALTER COLUMN name DROP NOT NULL; UPDATE \(table) SET name = NULL WHERE id = 3")
            let name = try #require(await thrownError { _ = try await harness.store.fetch(FetchDescriptor<StoreUser>()) } as? PGError)
            #expect(name.column == "name")
            #expect(name.message.hasPrefix("entity StoreUser, column \"name\": "))

            try await harness.execute("UPDATE \(table) SET name = 'back'")
            #expect(try await harness.store.fetch(FetchDescriptor<StoreUser>()).map(\.value.score) == [2.5, 2.5, 2.5])
        }
    }
}

struct StoreMismatched: Entity {
    var id: Int
    var name: String
    var age: Int?
    var tags: [String]
    var missing: String

    static let tableName = "mismatched"
    static let columns: [EntityColumn<StoreMismatched>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.age, "age"), EntityColumn(\.tags, "tags"),
        EntityColumn(\.missing, "missing"),
    ]
}

struct StoreMissingTable: Entity {
    var id: Int
    static let tableName = "no such table"
    static let columns: [EntityColumn<StoreMissingTable>] = [EntityColumn(\.id, "id")]
}

struct StoreUnmappedKey: Entity {
    var id: Int
    var title: String
    var note: String
    static let tableName = "unmapped"
    static let columns: [EntityColumn<StoreUnmappedKey>] = [EntityColumn(\.id, "id"), EntityColumn(\.title, "title")]
}

struct StoreExtraColumn: Entity {
    var id: Int
    var ghost: Int { 0 }
    static let tableName = "extra"
    static let columns: [EntityColumn<StoreExtraColumn>] = [EntityColumn(\.id, "id"), EntityColumn(\.ghost, "ghost")]
}
