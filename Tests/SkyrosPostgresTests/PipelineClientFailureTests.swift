import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// A statement of a pipeline that cannot be sent (found on this side, before it reaches the server) fails the
/// whole pipeline, and nothing of it commits: the statements before it must not be committed by a sync.
@Suite("Pipeline: a statement that cannot be sent commits nothing")
struct PipelineClientFailureTests {
    @Test(.timeLimit(.minutes(1))) func aLaterStatementThatCannotBeSentCommitsNothing() async throws {
        try await TestServer.withSchema { schema in
            try await TestServer.withConnection { connection in
                try await connection.execute(script: "CREATE TABLE \(quoteIdentifier(schema)).items (label text)")
                let first: PostgresQuery = "INSERT INTO \(qualified: [schema, "items"]) (label) VALUES (\("first"))"
                let table = "\(quoteIdentifier(schema)).items"
                let withNUL = PostgresQuery(
                    unsafeSQL: "INSERT INTO \(table) (label) VALUES ($1)", binds: [PostgresValue(type: .text, text: "a\u{0}b")])
                let tooManyBinds = PostgresQuery(
                    unsafeSQL: "INSERT INTO \(table) (label) VALUES ($1)",
                    binds: Array(repeating: PostgresValue(type: .text, text: "x"), count: 70_000))
                let withNULInText = PostgresQuery(unsafeSQL: "INSERT INTO \(table) (label) VALUES ('a\u{0}b')")
                for (name, failing) in [("NUL in a bind", withNUL), ("70,000 binds", tooManyBinds), ("NUL in the text", withNULInText)] {
                    // Twice: the second time `first` is a prepared statement.
                    for _ in 0..<2 {
                        let error = await #expect(throws: PostgresError.self, "\(name)") {
                            try await connection.pipeline([first, failing])
                        }
                        #expect(error?.kind == .encoding, "\(name): \(String(describing: error))")
                        #expect(error?.statementIndex == 1, "\(name)")
                        let count = try await connection.query("SELECT count(*) FROM \(qualified: [schema, "items"])")[0]
                            .decode(Int.self, at: 0)
                        #expect(count == 0, "\(name): nothing was committed")
                        #expect(await !connection.isInTransaction)
                    }
                }
                // Should sending still fail part way (here: unchecked), what was sent is rolled back, not synced.
                let begin: PostgresQuery = "BEGIN"
                for (name, failing) in [("NUL in a bind", withNUL), ("70,000 binds", tooManyBinds)] {
                    for batch in [[first, first, failing, first], [begin, first, failing]] {
                        let error = await #expect(throws: PostgresError.self, "\(name)") {
                            try await connection.pipelineWithoutChecking(batch)
                        }
                        #expect(error?.statementIndex == 2, "\(name)")
                        let count = try await connection.query("SELECT count(*) FROM \(qualified: [schema, "items"])")[0]
                            .decode(Int.self, at: 0)
                        #expect(count == 0, "\(name), \(batch.count) statements: nothing was committed")
                        #expect(await !connection.isInTransaction, "\(name): the transaction the pipeline began was rolled back")
                    }
                }
                // The connection is still usable, and a valid pipeline commits.
                try await connection.pipeline([first, first])
                #expect(try await connection.query("SELECT count(*) FROM \(qualified: [schema, "items"])")[0].decode(Int.self, at: 0) == 2)
            }
        }
    }
}
