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
                let first: PGQuery = "INSERT INTO \(qualified: [schema, "items"]) (label) VALUES (\("first"))"
                let table = "\(quoteIdentifier(schema)).items"
                let withNUL = PGQuery(
                    unsafeSQL: "INSERT INTO \(table) (label) VALUES ($1)", binds: [PGValue(type: .text, text: "a\u{0}b")])
                let tooManyBinds = PGQuery(
                    unsafeSQL: "INSERT INTO \(table) (label) VALUES ($1)",
                    binds: Array(repeating: PGValue(type: .text, text: "x"), count: 70_000))
                let withNULInText = PGQuery(unsafeSQL: "INSERT INTO \(table) (label) VALUES ('a\u{0}b')")
                for (name, failing) in [("NUL in a bind", withNUL), ("70,000 binds", tooManyBinds), ("NUL in the text", withNULInText)] {
                    // Twice: the second time `first` is a prepared statement.
                    for _ in 0..<2 {
                        let error = await #expect(throws: PGError.self, "\(name)") {
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
                // Should sending still fail part way (here: unchecked), what was sent does not commit: the pipeline
                // fails as if the statement had failed on the server.
                let begin: PGQuery = "BEGIN"
                func count() async throws -> Int {
                    try await connection.query("SELECT count(*) FROM \(qualified: [schema, "items"])")[0].decode(Int.self, at: 0)
                }
                for (name, failing) in [("NUL in a bind", withNUL), ("70,000 binds", tooManyBinds)] {
                    let implicit = await #expect(throws: PGError.self, "\(name)") {
                        try await connection.pipelineWithoutChecking([first, first, failing, first])
                    }
                    #expect(implicit?.kind == .encoding || implicit?.kind == .protocolViolation, "\(name)")
                    #expect(implicit?.statementIndex == 2, "\(name)")
                    #expect(try await count() == 0, "\(name): nothing was committed")
                    #expect(await !connection.isInTransaction, "\(name): the implicit transaction was rolled back")

                    // A transaction the pipeline began is left failed (as after a server error): nothing commits.
                    let own = await #expect(throws: PGError.self, "\(name)") {
                        try await connection.pipelineWithoutChecking([begin, first, failing, "COMMIT"])
                    }
                    #expect(own?.statementIndex == 2, "\(name)")
                    #expect(await connection.isInTransaction, "\(name): the failed transaction waits for its rollback")
                    try await connection.execute(script: "COMMIT")  // ends a failed transaction as ROLLBACK
                    #expect(try await count() == 0, "\(name): nothing was committed")

                    // A transaction begun before the pipeline stays open, failed: the caller's COMMIT rolls back.
                    try await connection.execute(script: "BEGIN")
                    try await connection.query("INSERT INTO \(qualified: [schema, "items"]) (label) VALUES (\("before"))")
                    await #expect(throws: PGError.self, "\(name)") {
                        try await connection.pipelineWithoutChecking([first, failing])
                    }
                    #expect(await connection.isInTransaction, "\(name): the caller's transaction was not ended")
                    await #expect(throws: PGError.self, "\(name): statements after it do not run outside it") {
                        try await connection.query("INSERT INTO \(qualified: [schema, "items"]) (label) VALUES (\("after"))")
                    }
                    try await connection.execute(script: "COMMIT")
                    #expect(try await count() == 0, "\(name): nothing of the caller's transaction was committed")
                }
                // The connection is still usable, and a valid pipeline commits.
                try await connection.pipeline([first, first])
                #expect(try await connection.query("SELECT count(*) FROM \(qualified: [schema, "items"])")[0].decode(Int.self, at: 0) == 2)
            }
        }
    }
}
