import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestFixtures
import SkyrosTestSupport
import Testing

/// A table a stack only observes, without listing it among its entities or writing it, is checked and captured
/// like a listed one: another writer's change reaches the observer.
@Suite("Capture of observed tables", .timeLimit(.minutes(2)))
struct CaptureObservedTableTests {
    @Test(arguments: CaptureSources.both) func aTableTheStackOnlyObservesFollowsPsqlsUpdate(source: ChangeCaptureSource) async throws {
        try await CaptureHarness.withSchema { schema in
            var configuration = DataStackConfiguration(
                store: .postgres(try TestServer.configuration, schema: schema), entities: [CaptureAuthor.self])
            configuration.changeFeed.captureSource = source
            let stack = try await DataStack.start(configuration)
            try await withCleanup {
                let latest = LatestStamped.Titles()
                let observation = stack.observe(CaptureBook.self, id: 2)
                let observer = Task { for try await book in observation { await latest.set(book?.title) } }
                defer { observer.cancel() }
                await expectEventually("the observer gave no first result") { await latest.title == "book2" }

                _ = try await Psql.run("UPDATE cap_books SET title = 'renamed by psql' WHERE id = 2", schema: schema)
                await expectEventually("psql's update did not reach the observer of a table the stack does not list") {
                    await latest.title == "renamed by psql"
                }
            } cleanup: {
                await stack.shutdown()
            }
        }
    }

    /// Replication slots belong to the cluster, not to a database: two databases of one cluster with a schema of
    /// the same name get a slot each, and each stack follows its own database's writes.
    @Test(.enabled(if: TestServer.allowsLogicalDecoding, "needs logical decoding (scripts/test's logical-decoding pass)"))
    func aSchemaOfTheSameNameInTwoDatabasesIsCapturedInEach() async throws {
        try await CaptureHarness.withSchema { schema in
            let twin = "skyros_twin_\(UUID().uuidString.prefix(8).lowercased())"
            try await TestServer.withConnection { admin in
                _ = try await admin.execute(script: "CREATE DATABASE \(quoteIdentifier(twin))")
            }
            var twinConfiguration = try TestServer.configuration
            twinConfiguration["dbname"] = twin
            try await withCleanup {
                let twinAdmin = try await PGConnection.connect(to: twinConfiguration)
                let qualified = quoteIdentifier(schema)
                try await withCleanup {
                    _ = try await twinAdmin.execute(script: """
                        CREATE SCHEMA \(qualified);
                        CREATE TABLE \(qualified).cap_authors (id bigint PRIMARY KEY, name text NOT NULL);
                        CREATE TABLE \(qualified).cap_books (id bigint PRIMARY KEY, author_id bigint NOT NULL, title text NOT NULL);
                        CREATE TABLE \(qualified).cap_audit (id bigint PRIMARY KEY, note text NOT NULL);
                        INSERT INTO \(qualified).cap_books VALUES (2, 1, 'twin book2');
                        """)
                    var configurations: [DataStackConfiguration] = []
                    for store in [try TestServer.configuration, twinConfiguration] {
                        var configuration = DataStackConfiguration(store: .postgres(store, schema: schema), entities: [CaptureBook.self])
                        configuration.changeFeed.captureSource = .logicalDecoding
                        configurations.append(configuration)
                    }
                    let stacks = [try await DataStack.start(configurations[0]), try await DataStack.start(configurations[1])]
                    try await withCleanup {
                        let titles = [LatestStamped.Titles(), LatestStamped.Titles()]
                        let observers = (0..<2).map { index in
                            Task { for try await book in stacks[index].observe(CaptureBook.self, id: 2) { await titles[index].set(book?.title) } }
                        }
                        defer { observers.forEach { $0.cancel() } }
                        await expectEventually("first results") {
                            let (here, there) = (await titles[0].title, await titles[1].title)
                            return here == "book2" && there == "twin book2"
                        }
                        try await TestServer.withConnection { connection in
                            _ = try await connection.execute(script: "UPDATE \(qualified).cap_books SET title = 'here' WHERE id = 2")
                        }
                        _ = try await twinAdmin.execute(script: "UPDATE \(qualified).cap_books SET title = 'there' WHERE id = 2")
                        await expectEventually("each database's update reached its own stack") {
                            let (here, there) = (await titles[0].title, await titles[1].title)
                            return here == "here" && there == "there"
                        }
                        let slots = try await TestServer.withConnection { connection in
                            try await connection.query("""
                                SELECT slot_name::text, database::text FROM pg_replication_slots
                                WHERE slot_name LIKE 'skyros\\_%' AND database IN (current_database(), \(twin)) ORDER BY database
                                """).map { (try $0.decode(String.self, at: 0), try $0.decode(String.self, at: 1)) }
                        }
                        let ours = slots.filter { $0.0 == CaptureSources.slotName(schema: schema) || $0.1 == twin }
                        #expect(ours.count == 2 && Set(ours.map(\.0)).count == 2, "\(ours)")
                    } cleanup: {
                        for stack in stacks { await stack.shutdown() }
                    }
                } cleanup: {
                    await twinAdmin.close()
                }
            } cleanup: {
                _ = try? await TestServer.withConnection { admin in
                    _ = try await admin.query("""
                        SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = \(twin) AND active_pid IS NOT NULL
                        """)
                    _ = await eventually(within: defaultPollDeadline) {
                        let active = try? await admin.query("SELECT count(*)::int FROM pg_replication_slots WHERE database = \(twin) AND active")
                        return (try? active?[0].decode(Int.self, at: 0)) == 0
                    }
                    _ = try await admin.query("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = \(twin)")
                    _ = try await admin.execute(script: "DROP DATABASE IF EXISTS \(quoteIdentifier(twin)) WITH (FORCE)")
                }
            }
        }
    }

    /// An observed entity that does not match its table ends the observation with the schema check's error
    /// (the same a listed entity gets at start), not with a wrong result.
    @Test func anObservedEntityThatDoesNotMatchItsTableEndsWithTheSchemaError() async throws {
        try await CaptureHarness.withSchema { schema in
            try await TestServer.withConnection { connection in
                _ = try await connection.execute(script: "ALTER TABLE \(quoteIdentifier(schema)).cap_audit RENAME COLUMN note TO remark")
            }
            let stack = try await DataStack.start(
                DataStackConfiguration(store: .postgres(try TestServer.configuration, schema: schema), entities: [CaptureAuthor.self]))
            try await withCleanup {
                var iterator = stack.observe(CaptureAudit.self, id: 1).makeAsyncIterator()
                let error = await thrownError { _ = try await iterator.next() }
                let text = String(describing: try #require(error))
                #expect(error is SchemaMismatchError, "\(text)")
                #expect(text.contains("note"), "\(text)")
            } cleanup: {
                await stack.shutdown()
            }
        }
    }
}

extension LatestStamped {
    /// The latest title an observer of one book gave (`nil` before any, `.some(nil)` when the book is gone).
    actor Titles {
        private(set) var title: String??
        func set(_ title: String?) { self.title = .some(title) }
    }
}
