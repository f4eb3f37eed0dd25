import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// A row of a table whose primary key has two columns, with names the capture's SQL and record quoting must
/// survive: key columns `n` and `o` (the capture's former aliases), a keyword and a quote in the others.
struct Enrollment: Entity, Equatable, Hashable {
    var course: Int64
    var student: String
    var grade: Int
    var remark: String?

    var id: CompositeKey<Int64, String> { CompositeKey(self.course, self.student) }

    enum CodingKeys: String, CodingKey {
        case course = "n", student = "o", grade = "select", remark = #"re"mark"#
    }

    static let tableName = "enroll ment"
    static let columns: [EntityColumn<Enrollment>] = [
        EntityColumn(\.course, "n"), EntityColumn(\.student, "o"), EntityColumn(\.grade, "select"),
        EntityColumn(\.remark, #"re"mark"#),
    ]
    static let primaryKey = PrimaryKey<Enrollment>(\.course, \.student)
}

/// A composite key whose columns are named `prefix` (a variable of the capture's trigger function) and `$1`, in
/// a table named `order`, with a 63-byte column name beside them.
struct HostileKeyed: Entity, Equatable {
    var a: Int64
    var b: String
    var v: Int

    var id: CompositeKey<Int64, String> { CompositeKey(self.a, self.b) }

    static let longName = String(repeating: "w", count: 63)

    enum CodingKeys: String, CodingKey {
        case a = "prefix", b = "$1", v = "wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww"
    }

    static let tableName = "order"
    static let columns: [EntityColumn<HostileKeyed>] = [
        EntityColumn(\.a, "prefix"), EntityColumn(\.b, "$1"), EntityColumn(\.v, longName),
    ]
    static let primaryKey = PrimaryKey<HostileKeyed>(\.a, \.b)
}

/// Student names that need quoting in a row's text: white space, a comma, parentheses, quotes, a backslash,
/// the empty string, non-ASCII.
let hostileStudents = ["ann", "x y", "a,b", "(p)", #"q"t"#, #"back\slash"#, "", "naïve表", "tab\there", "o'neil"]

func enrollment(_ course: Int64, _ student: String, grade: Int = 1, remark: String? = nil) -> Enrollment {
    Enrollment(course: course, student: student, grade: grade, remark: remark)
}

enum CompositeKeyServer {
    static let migration = """
        -- migrate:up
        CREATE TABLE "enroll ment" (n bigint NOT NULL, o text NOT NULL, "select" integer NOT NULL, "re""mark" text,
                                    PRIMARY KEY (n, o));
        """

    /// A stack of `kind` whose entities are ``Enrollment`` (PostgreSQL: its own schema, migrated, dropped
    /// afterwards; `source`: the change capture).
    static func withStack<R>(
        _ kind: StackKind, source: ChangeCaptureSource? = nil, _ body: (DataStack) async throws -> R
    ) async throws -> R {
        try await StackTestServer.withMigrations(["1_enroll.sql": migration]) { directory in
            var configuration = DataStackConfiguration(store: .inMemory, migrations: .directory(directory), entities: [Enrollment.self])
            if let source { configuration.changeFeed.captureSource = source }
            switch kind {
            case .inMemory:
                return try await withTestStack(configuration, on: .inMemory, body)
            case .postgres:
                return try await withTestStack(configuration, on: .postgres(TestDatabase(configuration: try TestServer.configuration)), prefix: "composite", body)
            }
        }
    }
}

/// Entities whose primary key has several columns (`CompositeKey`, `Entity.primaryKey`): every operation on
/// both stores, change capture of another writer's changes, and start's check of the key.
@Suite("Composite primary keys", .timeLimit(.minutes(2)))
struct CompositeKeyTests {
    @Test("Insert, fetch by id, update, upsert and delete by a two-column key", arguments: StackKind.allCases)
    func crudByCompositeKey(kind: StackKind) async throws {
        try await CompositeKeyServer.withStack(kind) { stack in
            let rows = hostileStudents.enumerated().map { enrollment(Int64($0.offset % 3), $0.element, grade: $0.offset) }
            try await stack.write(durability: .committed) { context in
                for row in rows { try context.insert(row) }
            }
            for row in rows {
                #expect(try await stack.read { try await $0.object(Enrollment.self, id: row.id) } == row, "\(row.id)")
                #expect(try await stack.store.object(Enrollment.self, id: row.id)?.value == row, "\(row.id)")
            }
            // The same student in another course is another row.
            #expect(try await stack.read { try await $0.object(Enrollment.self, id: CompositeKey(9, "ann")) } == nil)
            // Ties broken by the key, course then student (code-point order), on both stores.
            let expected = rows.sorted {
                $0.course != $1.course ? $0.course < $1.course : $0.student.unicodeScalars.lexicographicallyPrecedes($1.student.unicodeScalars)
            }
            #expect(try await stack.read { try await $0.fetch(FetchDescriptor<Enrollment>()) } == expected)

            try await stack.write(durability: .committed) { context in
                var changed = try #require(try await context.object(Enrollment.self, id: CompositeKey(1, "x y")))
                changed.remark = "moved"
                try await context.update(changed)
                try context.upsert(enrollment(2, "a,b", grade: 50, remark: "upserted"))   // exists: updated
                try context.upsert(enrollment(7, "new, one", grade: 70))                     // inserted
                try await context.delete(Enrollment.self, id: CompositeKey(0, "ann"))
            }
            let stored = try await stack.store.fetch(Enrollment.self).map(\.value)
            let cached = try await stack.read { try await $0.fetch(FetchDescriptor<Enrollment>()) }
            #expect(Set(stored) == Set(cached))
            #expect(stored.count == rows.count)
            #expect(stored.contains(enrollment(1, "x y", grade: 1, remark: "moved")))
            #expect(stored.contains(enrollment(2, "a,b", grade: 50, remark: "upserted")))
            #expect(stored.contains(enrollment(7, "new, one", grade: 70)))
            #expect(!stored.contains { $0.id == CompositeKey(0, "ann") })

            // findOrCreate by the composite key: found, then created.
            let (found, created) = try await stack.findOrCreate(enrollment(1, "x y", grade: 99))
            #expect(!created && found.remark == "moved")
            let made = try await stack.write(durability: .committed) { try await $0.findOrCreate(enrollment(8, "(p)")) }
            #expect(made.created)
            #expect(try await stack.store.object(Enrollment.self, id: CompositeKey(8, "(p)"))?.value == enrollment(8, "(p)"))
        }
    }

    @Test("A second insert of a key fails naming the key's constraint, and saves nothing", arguments: StackKind.allCases)
    func duplicateKeyFails(kind: StackKind) async throws {
        try await CompositeKeyServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { try $0.insert(enrollment(1, "a,b")) }
            let error = await thrownError {
                try await stack.write(durability: .committed) { context in
                    try context.insert(enrollment(2, "a,b"))   // another course: a new key
                    try context.insert(enrollment(1, "a,b", grade: 5))
                }
            }
            let failure = try #require(error as? PGError, "\(String(describing: error))")
            #expect(failure.kind == .uniqueViolation)
            #expect(failure.constraint == "enroll ment_pkey")
            #expect(try await stack.store.fetch(Enrollment.self).map(\.value) == [enrollment(1, "a,b")])
        }
    }

    @Test("Set-based updates and deletes announce each row by its composite key", arguments: StackKind.allCases)
    func setBasedWrites(kind: StackKind) async throws {
        try await CompositeKeyServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { context in
                for (index, student) in hostileStudents.enumerated() { try context.insert(enrollment(Int64(index % 2), student, grade: index)) }
            }
            // Cached first, so that the set-based writes must reach the cache.
            _ = try await stack.read { try await $0.fetch(FetchDescriptor<Enrollment>()) }
            try await stack.write(durability: .committed) { context in
                try context.update(where: #Predicate<Enrollment> { $0.course == 1 }, set: [.set(\.grade, to: \.grade + 100)])
            }
            let deleted = try await stack.write(durability: .committed) { context in
                try await context.delete(where: #Predicate<Enrollment> { $0.course == 0 && $0.grade < 4 })
            }
            #expect(deleted == 2)
            let expected = hostileStudents.enumerated().compactMap { index, student -> Enrollment? in
                if index % 2 == 0 { return index < 4 ? nil : enrollment(0, student, grade: index) }
                return enrollment(1, student, grade: index + 100)
            }
            #expect(Set(try await stack.store.fetch(Enrollment.self).map(\.value)) == Set(expected))
            #expect(Set(try await stack.read { try await $0.fetch(FetchDescriptor<Enrollment>()) }) == Set(expected))
            for row in expected {
                #expect(try await stack.read { try await $0.object(Enrollment.self, id: row.id) } == row)
            }
        }
    }

    @Test("Keyset pages over a sort that ties are broken by every key column", arguments: StackKind.allCases)
    func keysetPages(kind: StackKind) async throws {
        try await CompositeKeyServer.withStack(kind) { stack in
            try await stack.write(durability: .committed) { context in
                for course in Int64(0)..<4 { for student in hostileStudents { try context.insert(enrollment(course, student, grade: Int(course % 2))) } }
            }
            let sort = [SortDescriptor(\Enrollment.grade, order: .reverse)]
            let all = try await stack.read { try await $0.fetch(FetchDescriptor<Enrollment>(sortBy: sort)) }
            #expect(all.count == 4 * hostileStudents.count)
            var paged: [Enrollment] = []
            var cursor: PageCursor?
            repeat {
                let page = try await stack.read { try await $0.fetchPage(FetchDescriptor<Enrollment>(sortBy: sort, fetchLimit: 7), after: cursor) }
                paged += page.items
                cursor = page.nextCursor
            } while cursor != nil
            #expect(paged == all)
        }
    }

    /// psql inserts, updates, re-keys and deletes rows: each change, named by the key's row text as PostgreSQL
    /// prints it, reaches the cache and an observer of the row, through either capture.
    @Test("psql's changes to rows with composite keys reach the cache and observers", arguments: CaptureSources.both)
    func otherWritersChangesAreCaptured(source: ChangeCaptureSource) async throws {
        try await CompositeKeyServer.withStack(.postgres, source: source) { stack in
            let store = try #require(stack.store as? PostgresStore)
            let schema = try #require(store.schema)
            try await stack.write(durability: .committed) { context in
                for student in hostileStudents { try context.insert(enrollment(1, student)) }
            }
            final class Latest: @unchecked Sendable {
                let lock = NSLock()
                var values: [String: Enrollment?] = [:]
                func set(_ key: String, _ value: Enrollment?) { self.lock.withLock { self.values[key] = .some(value) } }
                func get(_ key: String) -> Enrollment?? { self.lock.withLock { self.values[key] } }
            }
            let latest = Latest()
            let observers = hostileStudents.map { student in
                Task { for try await row in stack.observe(Enrollment.self, id: CompositeKey(1, student)) { latest.set(student, row) } }
            }
            defer { observers.forEach { $0.cancel() } }
            await expectEventually("first results") { hostileStudents.allSatisfy { latest.get($0) == .some(enrollment(1, $0)) } }

            // Each student's row gets a grade only psql wrote; one row is re-keyed, one deleted.
            let updates = hostileStudents.enumerated().map { index, student in
                #"UPDATE "enroll ment" SET "select" = \#(index + 10) WHERE n = 1 AND o = \#(sqlLiteral(student));"#
            }
            try await CompositeKeyTests.psql(updates.joined(separator: "\n"), schema: schema)
            await expectEventually("psql's updates reached every observer") {
                hostileStudents.enumerated().allSatisfy { index, student in latest.get(student) == .some(enrollment(1, student, grade: index + 10)) }
            }
            for (index, student) in hostileStudents.enumerated() {
                #expect(try await stack.read { try await $0.object(Enrollment.self, id: CompositeKey(1, student)) }?.grade == index + 10)
            }
            try await CompositeKeyTests.psql(
                #"UPDATE "enroll ment" SET n = 2 WHERE n = 1 AND o = 'x y'; DELETE FROM "enroll ment" WHERE n = 1 AND o = 'a,b';"#
                    + #" INSERT INTO "enroll ment" VALUES (3, '(p) q', 7, NULL);"#, schema: schema)
            await expectEventually("the re-keyed and deleted rows are gone from their observers") {
                latest.get("x y") == .some(nil) && latest.get("a,b") == .some(nil)
            }
            #expect(try await stack.read { try await $0.object(Enrollment.self, id: CompositeKey(2, "x y")) }?.grade == 11)
            #expect(try await stack.read { try await $0.object(Enrollment.self, id: CompositeKey(1, "a,b")) } == nil)
            #expect(try await stack.read { try await $0.object(Enrollment.self, id: CompositeKey(3, "(p) q")) } == enrollment(3, "(p) q", grade: 7))
            try await CaptureSources.expectInstalled(source, schema: schema, context: "composite key")
        }
    }

    @Test("A transaction locks, updates and deletes rows by their composite keys; the cache follows")
    func transactionsByCompositeKey() async throws {
        try await CompositeKeyServer.withStack(.postgres) { stack in
            try await stack.write(durability: .committed) { context in
                for student in hostileStudents.prefix(4) { try context.insert(enrollment(5, student)) }
            }
            _ = try await stack.read { try await $0.fetch(FetchDescriptor<Enrollment>()) }   // cached
            let locked = try await stack.transaction { tx -> Enrollment? in
                guard var row = try await tx.object(Enrollment.self, id: CompositeKey(5, "x y"), lock: .forUpdate(.noWait)) else { return nil }
                row.grade = 42
                try await tx.update(row)
                #expect(try await tx.delete(Enrollment.self, id: CompositeKey(5, "a,b")))
                _ = try await tx.insert(enrollment(6, "(p)", grade: 6))
                return row
            }
            #expect(locked == enrollment(5, "x y", grade: 42))
            #expect(try await stack.read { try await $0.object(Enrollment.self, id: CompositeKey(5, "x y")) }?.grade == 42)
            #expect(try await stack.read { try await $0.object(Enrollment.self, id: CompositeKey(5, "a,b")) } == nil)
            #expect(try await stack.read { try await $0.object(Enrollment.self, id: CompositeKey(6, "(p)")) }?.grade == 6)
        }
    }

    @Test("Start refuses a key declared in another order than the table's columns, or other columns than its key")
    func startChecksTheKey() async throws {
        let database = TestDatabase(configuration: try TestServer.configuration)
        for (sql, expected) in [
            (#"CREATE TABLE "enroll ment" (o text, n bigint, "select" integer NOT NULL, "re""mark" text, PRIMARY KEY (o, n));"#,
             "declare it in the table's column order, (o, n)"),
            (#"CREATE TABLE "enroll ment" (n bigint, o text, "select" integer NOT NULL, "re""mark" text, PRIMARY KEY (n));"#,
             "but the table's primary key is (n)"),
        ] {
            let error = await thrownError {
                try await StackTestServer.withMigrations(["1_enroll.sql": "-- migrate:up\n" + sql]) { directory in
                    let configuration = DataStackConfiguration(store: .inMemory, migrations: .directory(directory), entities: [Enrollment.self])
                    try await withTestStack(configuration, on: .postgres(database), prefix: "composite") { _ in }
                }
            }
            let mismatch = try #require((error as? DataStackError)?.underlying as? SchemaMismatchError, "\(String(describing: error))")
            #expect(mismatch.description.contains(expected), "\(mismatch)")
        }
    }

    /// The key's text is the one PostgreSQL prints for `ROW(…)` of its values, and decodes back to the key.
    @Test("A composite key's text is PostgreSQL's row text of its values")
    func keyTextIsTheServersRowText() async throws {
        try await TestServer.withConnection { connection in
            for (index, student) in (hostileStudents + ["\\", "\"", "  ", "\n", "a\"b\"c", "NULL", "()"]).enumerated() {
                let key = CompositeKey(Int64(index - 3), student)
                let printed = try await connection.query("SELECT ROW(\(Int64(index - 3)), \(student))::text")[0].decode(String.self, at: 0)
                #expect(try key.postgresText() == printed)
                #expect(try CompositeKey<Int64, String>(postgresText: ArraySlice(printed.utf8), type: .record) == key)
            }
        }
    }

    /// Key columns named `prefix` and `$1`, a 63-byte column, a table named `order`, in a schema whose name holds
    /// quotes, `$1` and a space: every statement by a composite key, and another writer's update and delete,
    /// through each capture.
    @Test("Composite keys under hostile names: writes by key, and another writer's changes captured", arguments: CaptureSources.both)
    func hostileNames(source: ChangeCaptureSource) async throws {
        let migration = """
            -- migrate:up
            CREATE TABLE "order" (prefix bigint NOT NULL, "$1" text NOT NULL, \(quoteIdentifier(HostileKeyed.longName)) integer NOT NULL,
                                  PRIMARY KEY (prefix, "$1"));
            """
        try await StackTestServer.withMigrations(["1_order.sql": migration]) { directory in
            var configuration = DataStackConfiguration(store: .inMemory, migrations: .directory(directory), entities: [HostileKeyed.self])
            configuration.changeFeed.captureSource = source
            let database = TestDatabase(configuration: try TestServer.configuration)
            try await withTestStack(configuration, on: .postgres(database), prefix: #"comp "o'k" $1"#) { stack in
                let schema = try #require((stack.store as? PostgresStore)?.schema)
                try await stack.write(durability: .committed) { context in
                    for (index, b) in hostileStudents.enumerated() { try context.insert(HostileKeyed(a: 1, b: b, v: index)) }
                }
                try await stack.write(durability: .committed) { context in
                    try context.upsert(HostileKeyed(a: 1, b: "x y", v: 100))
                    try await context.delete(HostileKeyed.self, id: CompositeKey(1, "a,b"))
                    try context.update(where: #Predicate<HostileKeyed> { $0.v < 3 }, set: [.set(\.v, to: \.v + 50)])
                }
                #expect(try await stack.read { try await $0.object(HostileKeyed.self, id: CompositeKey(1, "x y")) }?.v == 100)
                #expect(try await stack.read { try await $0.object(HostileKeyed.self, id: CompositeKey(1, "a,b")) } == nil)
                #expect(try await stack.read { try await $0.object(HostileKeyed.self, id: CompositeKey(1, "ann")) }?.v == 50)
                let seen = Latest()
                let observer = Task { for try await row in stack.observe(HostileKeyed.self, id: CompositeKey(1, "(p)")) { seen.set("(p)", row) } }
                defer { observer.cancel() }
                await expectEventually("the first result") { seen.get("(p)")??.v == 3 }
                // Another writer, outside Skyros.
                try await TestServer.withConnection { connection in
                    _ = try await connection.query("SELECT set_config('search_path', \(quoteIdentifier(schema)), false)")
                    _ = try await connection.execute(script: #"UPDATE "order" SET "\#(HostileKeyed.longName)" = 77 WHERE prefix = 1 AND "$1" = '(p)'"#)
                    _ = try await connection.execute(script: #"DELETE FROM "order" WHERE prefix = 1 AND "$1" = 'ann'"#)
                }
                await expectEventually("the other writer's update reached the observer") { seen.get("(p)")??.v == 77 }
                await expectEventually("the other writer's delete reached the cache") {
                    (try? await stack.read { try await $0.object(HostileKeyed.self, id: CompositeKey(1, "ann")) }) == .some(nil)
                }
                #expect(try await stack.read { try await $0.object(HostileKeyed.self, id: CompositeKey(1, "(p)")) }?.v == 77)
            }
        }
    }

    /// The latest value an observer of a row saw, by a key of the test's choosing.
    final class Latest: @unchecked Sendable {
        let lock = NSLock()
        var values: [String: HostileKeyed?] = [:]
        func set(_ key: String, _ value: HostileKeyed?) { self.lock.withLock { self.values[key] = .some(value) } }
        func get(_ key: String) -> HostileKeyed?? { self.lock.withLock { self.values[key] } }
    }

    /// Runs `script` with psql, a writer outside Skyros, in `schema`.
    static func psql(_ script: String, schema: String) async throws {
        try await Psql.run(script, schema: schema)
    }
}

/// `text` as a SQL string literal (test data only; the library binds every value).
private func sqlLiteral(_ text: String) -> String {
    "E'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'").replacingOccurrences(of: "\t", with: "\\t") + "'"
}
