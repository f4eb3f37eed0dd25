import Foundation
import InMemoryTracing
import Skyros
import SkyrosTestSupport
import Testing
import Tracing

struct TracedNote: Entity, Equatable {
    var id: Int
    var text: String
    static let tableName = "traced_notes"
    static let columns: [EntityColumn<TracedNote>] = [EntityColumn(\.id, "id"), EntityColumn(\.text, "text")]
}

/// Spans for migrations, group commits and observation refreshes, each under the span of the task that caused
/// it, with the statements they send as children (an in-memory tracer scoped to the test with `withTracer`).
@Suite("Tracing", .timeLimit(.minutes(2)))
struct TracingTests {
    static let migration = "-- migrate:up\nCREATE TABLE traced_notes (id bigint PRIMARY KEY, text text NOT NULL);\n"

    @Test func migrationsCommitsAndRefreshesAreParentedUnderTheCaller() async throws {
        let tracer = InMemoryTracer()
        let schema = StackTestServer.uniqueSchemaName()
        try await StackTestServer.withMigrations(["1_notes.sql": Self.migration]) { directory in
            let configuration = DataStackConfiguration(
                store: .postgres(try TestServer.configuration, schema: schema), migrations: .directory(directory),
                entities: [TracedNote.self])
            try await withTracer(tracer) {
                let (stack, bootID) = try await withSpan("boot") { span in
                    (try await DataStack.start(configuration), span.context.inMemorySpanContext!.spanID)
                }
                try await withCleanup {
                    // Eight traced writers at once: the queue may group them; each must be the parent or a link
                    // of exactly one group commit.
                    let requestIDs = try await withThrowingTaskGroup(of: String.self) { group in
                        for i in 0..<8 {
                            group.addTask {
                                try await withSpan("request \(i)") { span in
                                    try await stack.write(durability: .committed) { try $0.insert(TracedNote(id: i, text: "n\(i)")) }
                                    return span.context.inMemorySpanContext!.spanID
                                }
                            }
                        }
                        return try await group.reduce(into: []) { $0.append($1) }
                    }
                    let refreshID = try await withSpan("stream") { span in
                        var iterator = stack.observe(FetchDescriptor<TracedNote>()).makeAsyncIterator()
                        let first = try await iterator.next()
                        #expect(first?.values.count == 8)
                        // Another writer's row reaches the observer through the change feed, whose statements
                        // must not land under this span.
                        let other = try await TestServer.connect()
                        try await other.query("INSERT INTO \(qualified: [schema, "traced_notes"]) VALUES (\(100), \("psql"))")
                        await other.close()
                        let second = try await iterator.next()
                        #expect(second?.values.count == 9)
                        return span.context.inMemorySpanContext!.spanID
                    }

                    let spans = tracer.finishedSpans
                    let byParent = Dictionary(grouping: spans, by: { $0.parentSpanID ?? "" })
                    // Migrations: one span per file under the caller's span, its script a child of it.
                    let migrations = spans.filter { $0.operationName == "skyros.migration 1" }
                    #expect(migrations.count == 1)
                    #expect(migrations.first?.parentSpanID == bootID)
                    #expect(migrations.first?.attributes["skyros.migration.file"]?.toSpanAttribute() == .string("1_notes.sql"))
                    if let migration = migrations.first {
                        #expect(!(byParent[migration.spanID] ?? []).isEmpty, "the migration's statements are its children")
                    }
                    // Group commits: each under one writer's request span, linked to the others it carried.
                    let commits = spans.filter { $0.operationName == "skyros.commit" }
                    #expect(!commits.isEmpty && commits.count <= 8)
                    var carried: [String] = []
                    for commit in commits {
                        #expect(commit.kind == .client)
                        #expect(commit.attributes["db.system.name"]?.toSpanAttribute() == .string("postgresql"))
                        carried.append(commit.parentSpanID ?? "none")
                        carried += commit.links.compactMap { $0.context.inMemorySpanContext?.spanID }
                        let statements = byParent[commit.spanID] ?? []
                        #expect(!statements.isEmpty, "the group's statements are children of its span")
                        #expect(statements.allSatisfy { $0.traceID == commit.traceID && $0.kind == .client })
                    }
                    #expect(carried.sorted() == requestIDs.sorted())
                    // Observation: the refresh under the consuming task's span, its read under the refresh.
                    let refreshes = spans.filter { $0.operationName == "skyros.observe.refresh" && $0.parentSpanID == refreshID }
                    #expect(refreshes.count == 2)
                    #expect(refreshes.first?.attributes["skyros.observation.tables"]?.toSpanAttribute() == .stringArray(["traced_notes"]))
                    // Background work (the change feed's queries) makes no span of its own: every span has a
                    // parent except the test's own roots.
                    let roots = spans.filter { $0.parentSpanID == nil }.map(\.operationName)
                    #expect(Set(roots).isSubset(of: Set(["boot", "stream"] + (0..<8).map { "request \($0)" })), "roots: \(roots)")
                    // Nor does it hide under a caller's span: no span of the test's roots' trees ends after its
                    // parent (the drain and the feed, started from traced tasks, outlive them).
                    let byID = Dictionary(uniqueKeysWithValues: spans.map { ($0.spanID, $0) })
                    for span in spans {
                        guard let parent = span.parentSpanID.flatMap({ byID[$0] }) else { continue }
                        #expect(
                            span.endInstant.nanosecondsSinceEpoch <= parent.endInstant.nanosecondsSinceEpoch,
                            "\(span.operationName) outlived its parent \(parent.operationName)")
                    }
                } cleanup: {
                    await stack.shutdown()
                    await TestServer.dropSchema(schema)
                }
            }
        }
    }
}
