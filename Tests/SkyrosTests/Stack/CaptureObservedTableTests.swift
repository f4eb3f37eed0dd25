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
                await eventually("the observer gave no first result") { await latest.title == "book2" }

                _ = try await Psql.run("UPDATE cap_books SET title = 'renamed by psql' WHERE id = 2", schema: schema)
                await eventually("psql's update did not reach the observer of a table the stack does not list") {
                    await latest.title == "renamed by psql"
                }
            } cleanup: {
                await stack.shutdown()
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
