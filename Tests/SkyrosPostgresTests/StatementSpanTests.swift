import InMemoryTracing
import SkyrosPostgres
import SkyrosTestSupport
import Testing
import Tracing

/// Statements traced under the caller's span, with OpenTelemetry's database attributes and never a bound
/// value; an untraced statement makes no span.
@Suite("Statement spans")
struct StatementSpanTests {
    @Test func queriesPipelinesAndFailuresAreSpansUnderTheCallersSpan() async throws {
        try await TestServer.withSchema { schema in
            let tracer = InMemoryTracer()
            let secret = "s3cr3t-bound-value"
            let connection = try await TestServer.connect()
            let configuration = try TestServer.configuration
            try await connection.execute(script: "CREATE TABLE \(quoteIdentifier(schema)).t (id int PRIMARY KEY, v text)")
            let requestID = try await withTracer(tracer) {
                try await withSpan("request") { span in
                    try await connection.query("INSERT INTO \(qualified: [schema, "t"]) VALUES (\(1), \(secret))")
                    try await connection.pipeline([
                        "INSERT INTO \(qualified: [schema, "t"]) VALUES (\(2), \(secret))",
                        "INSERT INTO \(qualified: [schema, "t"]) VALUES (\(3), \(secret))",
                    ])
                    await #expect(throws: PGError.self) {
                        try await connection.query("INSERT INTO \(qualified: [schema, "t"]) VALUES (\(1), \(secret))")
                    }
                    return span.context.inMemorySpanContext!.spanID
                }
            }
            // Outside any span: no span.
            try await withTracer(tracer) { _ = try await connection.query("SELECT 1") }
            await connection.close()

            let spans = tracer.finishedSpans
            let statements = spans.filter { $0.operationName != "request" }
            #expect(statements.map(\.operationName) == [
                "INSERT \(configuration.database!)", "BATCH INSERT \(configuration.database!)", "INSERT \(configuration.database!)",
            ])
            for span in statements {
                #expect(span.parentSpanID == requestID)
                #expect(span.kind == .client)
                #expect(span.attributes["db.system.name"]?.toSpanAttribute() == .string("postgresql"))
                #expect(span.attributes["db.system"]?.toSpanAttribute() == .string("postgresql"))
                #expect(span.attributes["db.namespace"]?.toSpanAttribute() == .string(configuration.database!))
                #expect(span.attributes["db.operation.name"]?.toSpanAttribute() == .string(span.operationName.split(separator: " ").dropLast().joined(separator: " ")))
                let text = "\(span.attributes["db.query.text"]?.toSpanAttribute() ?? .string(""))"
                #expect(text.contains("INSERT INTO"))
                var everything = ""
                span.attributes.forEach { key, value in everything += "\(key)=\(value);" }
                #expect(!everything.contains(secret), "a bound value reached a span: \(everything)")
            }
            #expect(statements[1].attributes["db.operation.batch.size"]?.toSpanAttribute() == .int64(2))
            let failed = statements[2]
            #expect(failed.status?.code == .error)
            #expect(failed.errors.count == 1)
            #expect(failed.attributes["db.response.status_code"]?.toSpanAttribute() == .string("23505"))
            #expect(failed.attributes["error.type"]?.toSpanAttribute() == .string("23505"))
            #expect(statements[0].status == nil)
        }
    }

    @Test func operationNamesSkipSpaceAndComments() {
        #expect(StatementSpanTarget.operationName(of: "select 1") == "SELECT")
        #expect(StatementSpanTarget.operationName(of: "\n  -- why\n /* what */ (WITH x AS (SELECT 1) SELECT * FROM x)") == "WITH")
        #expect(StatementSpanTarget.operationName(of: "  ") == "QUERY")
        #expect(StatementSpanTarget.operationName(of: "/* unterminated") == "QUERY")
    }
}
