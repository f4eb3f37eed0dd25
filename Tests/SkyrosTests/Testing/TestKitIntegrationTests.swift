import Foundation
import Skyros
import SkyrosMigrations
import SkyrosPostgres
import SkyrosTestEntities
import SkyrosTestSupport
import Testing

/// SkyrosTesting's per-test schema on the server under test: created, migrated, isolated, and dropped with its
/// logical-decoding capture, whether the test returned or threw; and one test body on PostgreSQL and in memory.
@Suite struct TestKitIntegrationTests {
    static var migrations: MigrationSource {
        get throws { .migrations([try SchemaMigration(fileName: "1_kit_tasks.sql", contents: KitTask.migrationSQL)]) }
    }

    static var app: DataStackConfiguration {
        get throws { DataStackConfiguration(store: .inMemory, migrations: try migrations, entities: [KitTask.self]) }
    }

    struct Thrown: Error {}

    /// The schemas named `names` that exist, and the replication slots and publications left of their captures.
    static func leftOver(_ names: [String]) async throws -> (schemas: Int, captures: Int) {
        let slots = names.map { CaptureSources.slotName(schema: $0) }
        return try await TestServer.withConnection { connection in
            let row = try await connection.query("""
                SELECT (SELECT count(*) FROM pg_namespace WHERE nspname = ANY(\(names)))::int,
                       ((SELECT count(*) FROM pg_replication_slots WHERE slot_name = ANY(\(slots)))
                        + (SELECT count(*) FROM pg_publication AS p, unnest(\(names)::text[]) AS n(name)
                           WHERE obj_description(p.oid, 'pg_publication') = 'skyros change capture of schema ' || n.name))::int
                """)[0]
            return (try row.decode(Int.self, at: 0), try row.decode(Int.self, at: 1))
        }
    }

    /// Code written against `DataStackProtocol` claims a task in a transaction with a row lock, counts with
    /// raw SQL and finds-or-creates, through the double: each call reaches the wrapped PostgreSQL stack, is
    /// counted, and fails when the test says so. An in-memory stack refuses the transaction and the SQL.
    @Test func transactionsRawSQLAndFindOrCreateGoThroughTheProtocol() async throws {
        func claim(_ stack: some DataStackProtocol) async throws -> KitTask? {
            try await stack.transaction { tx in
                let descriptor = FetchDescriptor<KitTask>(predicate: #Predicate { !$0.done }, fetchLimit: 1)
                guard var task = try await tx.fetch(descriptor, lock: .forUpdate(.skipLocked)).first else { return nil }
                task.done = true
                try await tx.update(task)
                return task
            }
        }
        func openCount(_ stack: some DataStackProtocol, schema: String) async throws -> Int {
            try await stack.fetch(Int.self, sql: "SELECT count(*)::int8 FROM \(qualified: [schema, "kit_tasks"]) WHERE NOT done").first ?? -1
        }
        try await TestServer.database.withStack(try Self.app, prefix: "kit_proto") { wrapped in
            let schema = try #require((wrapped.store as? PostgresStore)?.schema)
            let stack = DataStackDouble(wrapping: wrapped)
            #expect(try await stack.findOrCreate(KitTask(id: 1, title: "one", done: false)).created)
            #expect(try await !stack.findOrCreate(KitTask(id: 1, title: "other", done: false)).created)
            #expect(try await openCount(stack, schema: schema) == 1)
            #expect(try await claim(stack) == KitTask(id: 1, title: "one", done: true))
            #expect(try await claim(stack) == nil)
            #expect(try await openCount(stack, schema: schema) == 0)
            #expect(try await stack.fetch(KitTask.self, sql: "SELECT * FROM \(qualified: [schema, "kit_tasks"])") == [KitTask(id: 1, title: "one", done: true)])
            #expect(stack.calls(.transaction) == 2 && stack.calls(.sql) == 3 && stack.calls(.findOrCreate) == 2)

            stack.fail(.transaction, with: DataStackError(code: .storeUnreachable, message: "simulated"))
            stack.fail(.sql, with: DataStackError(code: .storeUnreachable, message: "simulated"))
            await #expect(throws: DataStackError.self) { try await claim(stack) }
            await #expect(throws: DataStackError.self) { try await openCount(stack, schema: schema) }
        }
        let memory = try await DataStackDouble.inMemory(try Self.app)
        let refused = await #expect(throws: DataStackError.self) { try await claim(memory) }
        #expect(refused?.code == .unsupportedByStore)
        await #expect(throws: DataStackError.self) { try await openCount(memory, schema: "public") }
        #expect(try await memory.findOrCreate(KitTask(id: 2, title: "two", done: false)).created)
        await memory.shutdown()
    }

    /// Twenty of these run at once: each stack gets a schema of its own (it sees only its own row), and the
    /// schema is gone afterwards, with its capture's slot and publication, also when the test threw.
    @Test(arguments: 0..<20)
    func eachParallelTestGetsItsOwnSchemaAndItIsDroppedAfterwards(index: Int) async throws {
        let database = try TestServer.database
        let schema = Locked<String?>(nil)
        let throwsAtTheEnd = index % 2 == 1
        do {
            try await database.withStack(try Self.app, prefix: "kit_par") { stack in
                schema.withLock { $0 = (stack.store as? PostgresStore)?.schema }
                try await stack.write(durability: .committed) { try $0.insert(KitTask(id: index, title: "task \(index)", done: false)) }
                let ids = try await stack.readSnapshot { try await $0.fetch(FetchDescriptor<KitTask>()) }.map(\.id)
                #expect(ids == [index])
                if TestServer.allowsLogicalDecoding {
                    // The stack captures by logical decoding: a slot and a publication outside the schema to drop.
                    let name = try #require(schema.withLock { $0 })
                    #expect(try await Self.leftOver([name]).captures == 2, "the capture of \(name)")
                }
                if throwsAtTheEnd { throw Thrown() }
            }
            #expect(!throwsAtTheEnd)
        } catch is Thrown {
            #expect(throwsAtTheEnd)
        }
        let name = try #require(schema.withLock { $0 })
        #expect(name.hasPrefix("kit_par_"))
        let left = try await Self.leftOver([name])
        #expect(left.schemas == 0 && left.captures == 0, "schema \(name): \(left)")
    }

    /// Twenty schemas at once from one test, half of whose bodies throw: twenty distinct names, every one of them
    /// gone from `pg_namespace` afterwards.
    @Test func twentyConcurrentSchemasAreAllDropped() async throws {
        let database = try TestServer.database
        let names = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<20 {
                group.addTask {
                    let seen = Locked<String?>(nil)
                    do {
                        try await database.withSchema(prefix: "kit_many", migrations: try Self.migrations) { schema in
                            seen.withLock { $0 = schema.name }
                            let exists = try await TestServer.withConnection { connection in
                                try await connection.query("SELECT to_regclass(\(quoteIdentifier(schema.name) + ".kit_tasks")) IS NOT NULL")[0]
                                    .decode(Bool.self, at: 0)
                            }
                            #expect(exists, "the migration ran in \(schema.name)")
                            if index % 2 == 1 { throw Thrown() }
                        }
                    } catch is Thrown {}
                    return try #require(seen.withLock { $0 })
                }
            }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(Set(names).count == 20)
        let left = try await Self.leftOver(names)
        #expect(left.schemas == 0 && left.captures == 0, "\(left)")
    }

    /// `schemaNames(prefix:)` lists the schemas under a prefix while they exist (the prefix taken literally:
    /// `%` and `_` are no wildcards), and none once they are dropped.
    @Test func schemaNamesListsWhatIsLeftUnderAPrefix() async throws {
        let database = try TestServer.database
        let run = "kit_names_\(UInt32.random(in: 0 ... .max))"
        // The names are read into constants: a closure whose only `try` is inside `#expect` is not inferred as
        // throwing.
        try await database.withSchema(prefix: run) { first in
            try await database.withSchema(prefix: run) { second in
                let both = try await database.schemaNames(prefix: run)
                let wildcards = try await database.schemaNames(prefix: run.replacingOccurrences(of: "_", with: "%"))
                #expect(both == [first.name, second.name].sorted())
                #expect(wildcards.isEmpty)
            }
            let one = try await database.schemaNames(prefix: run)
            #expect(one == [first.name])
        }
        #expect(try await database.schemaNames(prefix: run).isEmpty)
    }

    /// A start that fails (a migration with an error) leaves no schema behind.
    @Test func aStackThatFailsToStartLeavesNoSchema() async throws {
        var app = try Self.app
        app.migrations = .migrations([try SchemaMigration(fileName: "1_broken.sql", contents: "-- migrate:up\nCREATE TABLE;")])
        let database = try TestServer.database
        let error = await #expect(throws: DataStackError.self) {
            try await database.withStack(app, prefix: "kit_broken") { _ in }
        }
        #expect(error?.code == .migrationFailed)
        let created = try await TestServer.withConnection { connection in
            try await connection.query("SELECT count(*)::int FROM pg_namespace WHERE nspname LIKE 'kit\\_broken\\_%'")[0].decode(Int.self, at: 0)
        }
        #expect(created == 0)
    }

    /// The same test body, on PostgreSQL in a schema of its own and in memory.
    @Test(arguments: ["inMemory", "postgres"])
    func oneBodyRunsOnBothStores(kind: String) async throws {
        let store: TestStore = kind == "postgres" ? .postgres(try TestServer.database) : .inMemory
        let open = try await withTestStack(try Self.app, on: store, prefix: "kit_both") { stack in
            try await stack.write(durability: .committed) { context in
                for id in 1...3 { try context.insert(KitTask(id: id, title: "task \(id)", done: id == 2)) }
            }
            let observed = Locked<[Int]>([])
            let observer = Task {
                for try await result in stack.observe(FetchDescriptor<KitTask>(predicate: #Predicate { !$0.done })) {
                    observed.withLock { $0 = result.values.map(\.id) }
                }
            }
            #expect(await eventually { observed.withLock { $0 } == [1, 3] })
            try await stack.write { context in
                var task = try #require(try await context.object(KitTask.self, id: 1))
                task.done = true
                try await context.update(task)
            }
            #expect(await eventually { observed.withLock { $0 } == [3] })
            observer.cancel()
            _ = await observer.result
            return try await stack.read { try await $0.count(FetchDescriptor<KitTask>(predicate: #Predicate { !$0.done })) }
        }
        #expect(open == 1, "\(store)")
    }
}
