import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// An entity with natural keys: a unique `email`, a unique pair of columns with hostile names (a keyword and a
/// quote) under a named constraint, a unique column named `n`, and `nick`, which has no unique index.
struct StackMember: Entity, Equatable {
    var id: Int
    var email: String?
    var name: String
    var select: String?
    var weird: String?
    var n: String?
    var nick: String?

    enum CodingKeys: String, CodingKey {
        case id, email, name, select, n, nick
        case weird = "we\"ird"
    }

    static let tableName = "stack_members"
    static let columns: [EntityColumn<StackMember>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.email, "email"), EntityColumn(\.name, "name"),
        EntityColumn(\.select, "select"), EntityColumn(\.weird, "we\"ird"), EntityColumn(\.n, "n"), EntityColumn(\.nick, "nick"),
    ]
    static let defaultSort = [SortDescriptor(\StackMember.id)]

    static let migrationSQL = """
        -- migrate:up
        CREATE TABLE stack_members (id bigint PRIMARY KEY, email text UNIQUE, name text NOT NULL, "select" text,
                                    "we""ird" text, n text UNIQUE, nick text,
                                    CONSTRAINT "members ""handle"" key" UNIQUE ("select", "we""ird"),
                                    CONSTRAINT members_name_check CHECK (name <> ''));
        """

    init(id: Int, email: String?, name: String, select: String? = nil, weird: String? = nil, n: String? = nil, nick: String? = nil) {
        (self.id, self.email, self.name, self.select, self.weird, self.n, self.nick) = (id, email, name, select, weird, n, nick)
    }
}

/// Upserts on a unique key other than the primary key (`onConflict:`), on both stores and through contexts.
@Suite("Upserts on any unique key")
struct UpsertConflictTests {
    /// A fresh stack of `kind` with the members table (PostgreSQL: its own schema, migrated, dropped afterwards).
    static func withStack<R>(_ kind: StackKind, _ body: (DataStack) async throws -> R) async throws -> R {
        switch kind {
        case .inMemory:
            return try await withTestStack(DataStackConfiguration(store: .inMemory), on: .inMemory, body)
        case .postgres:
            let database = TestDatabase(configuration: try TestServer.configuration)
            return try await StackTestServer.withMigrations(["1_members.sql": StackMember.migrationSQL]) { directory in
                let configuration = DataStackConfiguration(
                    store: .inMemory, migrations: .directory(directory), entities: [StackMember.self])
                return try await database.withStack(configuration, prefix: "members \"ctx\"", body)
            }
        }
    }

    @Test("The store inserts, then updates the row with the same email, which keeps its own id", arguments: StackKind.allCases)
    func storeKeepsTheStoredID(kind: StackKind) async throws {
        try await Self.withStack(kind) { stack in
            let store = stack.store
            let first = try await store.upsert(StackMember(id: 1, email: "ada@example.com", name: "Ada"), onConflict: .columns(\.email))
            #expect(first.id == 1 && first.inserted)
            let second = try await store.upsert(
                StackMember(id: 2, email: "ada@example.com", name: "Ada L.", nick: "al"), onConflict: .columns(\.email))
            #expect(second.id == 1 && !second.inserted)
            #expect(second.version != first.version)
            let rows = try await store.fetch(StackMember.self)
            #expect(rows.map(\.value) == [StackMember(id: 1, email: "ada@example.com", name: "Ada L.", nick: "al")])
            #expect(rows.first?.version == second.version)
            // By column name, and in a change set whose RowChange names the stored row.
            var changes = ChangeSet()
            changes.upsert(StackMember(id: 3, email: "ada@example.com", name: "Ada 3"), onConflict: .columns(named: ["email"]))
            let result = try await store.apply(changes)
            #expect(result.operations[0].map(\.id.text) == ["1"])
            #expect(result.operations[0].map(\.kind) == [.updated])
            #expect(try await store.object(StackMember.self, id: 1)?.value.name == "Ada 3")
            #expect(try await store.object(StackMember.self, id: 3) == nil)
            // The primary key target is the plain upsert: it writes the value's row.
            let byKey = try await store.upsert(StackMember(id: 1, email: "ada@example.com", name: "Ada K"), onConflict: .primaryKey)
            #expect(byKey.id == 1 && !byKey.inserted)
            #expect(try await store.object(StackMember.self, id: 1)?.value.name == "Ada K")
        }
    }

    @Test("NULL in the conflict column never conflicts: each such upsert inserts a row", arguments: StackKind.allCases)
    func nullInserts(kind: StackKind) async throws {
        try await Self.withStack(kind) { stack in
            let store = stack.store
            let a = try await store.upsert(StackMember(id: 1, email: nil, name: "A"), onConflict: .columns(\.email))
            let b = try await store.upsert(StackMember(id: 2, email: nil, name: "B"), onConflict: .columns(\.email))
            #expect(a.inserted && b.inserted && a.id == 1 && b.id == 2)
            #expect(try await store.fetch(StackMember.self).map(\.value.name) == ["A", "B"])
            // A partly NULL pair does not conflict either.
            _ = try await store.upsert(StackMember(id: 3, email: "x", name: "C", select: "s", weird: nil), onConflict: .columns(\.select, \.weird))
            let d = try await store.upsert(StackMember(id: 4, email: "y", name: "D", select: "s", weird: nil), onConflict: .columns(\.select, \.weird))
            #expect(d.inserted && d.id == 4)
        }
    }

    @Test("Hostile conflict column names (n, a keyword, a quote) are quoted", arguments: StackKind.allCases)
    func hostileNames(kind: StackKind) async throws {
        try await Self.withStack(kind) { stack in
            let store = stack.store
            _ = try await store.upsert(StackMember(id: 1, email: "a", name: "A", select: "from", weird: "'\"$1", n: "n"), onConflict: .columns(\.n))
            let byN = try await store.upsert(StackMember(id: 5, email: "a", name: "A2", select: "from", weird: "'\"$1", n: "n"), onConflict: .columns(\.n))
            #expect(byN.id == 1 && !byN.inserted)
            let byPair = try await store.upsert(
                StackMember(id: 6, email: "a", name: "A3", select: "from", weird: "'\"$1", n: "n"), onConflict: .columns(\.select, \.weird))
            #expect(byPair.id == 1 && !byPair.inserted)
            #expect(try await store.fetch(StackMember.self).map(\.value) == [StackMember(id: 1, email: "a", name: "A3", select: "from", weird: "'\"$1", n: "n")])
            if kind == .postgres {
                let byConstraint = try await store.upsert(
                    StackMember(id: 7, email: "a", name: "A4", select: "from", weird: "'\"$1", n: "n"), onConflict: .constraint("members \"handle\" key"))
                #expect(byConstraint.id == 1 && !byConstraint.inserted)
                #expect(try await store.object(StackMember.self, id: 1)?.value.name == "A4")
            }
        }
    }

    @Test("A target without a unique index, an unknown constraint or column, fails with a typed error naming it", arguments: StackKind.allCases)
    func refusedTargets(kind: StackKind) async throws {
        try await Self.withStack(kind) { stack in
            let store = stack.store
            _ = try await store.upsert(StackMember(id: 1, email: "a", name: "A", nick: "ace"), onConflict: .columns(\.email))
            let unknown = await thrownError { _ = try await store.upsert(StackMember(id: 2, email: "b", name: "B"), onConflict: .columns(named: ["nope"])) }
            #expect(unknown as? StoreError == .unknownColumn(entity: "StackMember", column: "nope"))
            let empty = await thrownError { _ = try await store.upsert(StackMember(id: 2, email: "b", name: "B"), onConflict: .columns(named: [])) }
            #expect(empty as? UpsertConflictError == .noUniqueIndex(entity: "StackMember", columns: [], sqlState: nil))
            let constraint = await thrownError {
                _ = try await store.upsert(StackMember(id: 2, email: "b", name: "B"), onConflict: .constraint("stack_members_missing"))
            }
            switch kind {
            case .postgres:
                // No unique index on nick: PostgreSQL's 42P10, named.
                let noIndex = await thrownError {
                    _ = try await store.upsert(StackMember(id: 2, email: "b", name: "B", nick: "ace"), onConflict: .columns(\.nick))
                }
                #expect(noIndex as? UpsertConflictError == .noUniqueIndex(entity: "StackMember", columns: ["nick"], sqlState: SQLState("42P10")))
                #expect("\(noIndex.map { "\($0)" } ?? "")".contains("(nick)"))
                #expect(constraint as? UpsertConflictError == .noUniqueConstraint(entity: "StackMember", constraint: "stack_members_missing", sqlState: SQLState("42704")))
                // A constraint that exists but has no index (a check): 42809, named.
                let check = await thrownError {
                    _ = try await store.upsert(StackMember(id: 2, email: "b", name: "B"), onConflict: .constraint("members_name_check"))
                }
                #expect(check as? UpsertConflictError == .noUniqueConstraint(entity: "StackMember", constraint: "members_name_check", sqlState: SQLState("42809")))
            case .inMemory:
                #expect(constraint as? UpsertConflictError == .constraintNotSupportedInMemory(entity: "StackMember", constraint: "stack_members_missing"))
            }
            // A conflict on the primary key while the target is email: a unique violation, as an insert.
            let duplicate = await thrownError { _ = try await store.upsert(StackMember(id: 1, email: "other", name: "B"), onConflict: .columns(\.email)) }
            #expect((duplicate as? PGError)?.sqlState == .uniqueViolation)
            #expect(try await store.fetch(StackMember.self).map(\.value) == [StackMember(id: 1, email: "a", name: "A", nick: "ace")])
        }
    }

    @Test("Through write {}: committed atomically, read back, observers re-run, and the context refuses an unknown column", arguments: StackKind.allCases)
    func contextLevel(kind: StackKind) async throws {
        try await Self.withStack(kind) { stack in
            try await stack.write(durability: .committed) { try $0.insert(StackMember(id: 1, email: "ada@example.com", name: "Ada")) }
            // Cached and observed before the upsert.
            #expect(try await stack.read { try await $0.object(StackMember.self, id: 1) }?.name == "Ada")
            var observed = stack.observe(FetchDescriptor<StackMember>()).makeAsyncIterator()
            #expect(try await observed.next()?.values.map(\.name) == ["Ada"])

            struct BodyFailed: Error {}
            let failed = await thrownError {
                try await stack.write(durability: .committed) { context in
                    try context.upsert(StackMember(id: 9, email: "ada@example.com", name: "lost"), onConflict: .columns(\.email))
                    throw BodyFailed()
                }
            }
            #expect(failed is BodyFailed)
            #expect(try await stack.store.object(StackMember.self, id: 1)?.value.name == "Ada")

            try await stack.write(durability: .committed) { context in
                try context.upsert(StackMember(id: 9, email: "ada@example.com", name: "Ada L."), onConflict: .columns(\.email))
                try context.upsert(StackMember(id: 10, email: "bob@example.com", name: "Bob"), onConflict: .columns(\.email))
            }
            #expect(try await stack.read { try await $0.fetch(StackMember.self) }.map(\.name) == ["Ada L.", "Bob"])
            #expect(try await stack.read { try await $0.object(StackMember.self, id: 1) }?.name == "Ada L.")
            #expect(try await stack.read { try await $0.object(StackMember.self, id: 9) } == nil)
            var seen: [String]? = nil
            while seen != ["Ada L.", "Bob"] {
                guard let next = try await observed.next() else { break }
                seen = next.values.map(\.name)
            }
            #expect(seen == ["Ada L.", "Bob"])

            let context = stack.newBackgroundContext()
            #expect(throws: StoreError.self) { try context.upsert(StackMember(id: 2, email: "c", name: "C"), onConflict: .columns(named: ["nope"])) }
            #expect(!context.hasChanges)
            if kind == .postgres {
                let error = await thrownError {
                    try await stack.write(durability: .committed) { try $0.upsert(StackMember(id: 2, email: "c", name: "C"), onConflict: .columns(\.nick)) }
                }
                #expect(error as? UpsertConflictError == .noUniqueIndex(entity: "StackMember", columns: ["nick"], sqlState: SQLState("42P10")))
            }
        }
    }

    @Test("A second stack sees the committed upsert through the change feed")
    func secondStackSeesIt() async throws {
        try await Self.withStack(.postgres) { a in
            let store = try #require(a.store as? PostgresStore)
            let b = try await DataStack.start(DataStackConfiguration(
                store: .postgres(try TestServer.configuration, schema: store.schema), entities: [StackMember.self]))
            do {
                try await a.write(durability: .committed) { try $0.insert(StackMember(id: 1, email: "ada@example.com", name: "Ada")) }
                // B caches the row, then A upserts it by email under another id.
                #expect(try await b.read { try await $0.object(StackMember.self, id: 1) }?.name == "Ada")
                try await a.write(durability: .committed) { try $0.upsert(StackMember(id: 7, email: "ada@example.com", name: "Ada L."), onConflict: .columns(\.email)) }
                let converged = try await eventually(within: .seconds(20)) {
                    try await b.read { try await $0.object(StackMember.self, id: 1) }?.name == "Ada L."
                }
                #expect(converged)
                #expect(try await b.read { try await $0.object(StackMember.self, id: 7) } == nil)
                await b.shutdown()
            } catch {
                await b.shutdown()
                throw error
            }
        }
    }
}
