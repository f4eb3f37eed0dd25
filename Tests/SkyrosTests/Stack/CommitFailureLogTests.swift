import Foundation
import Logging
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// A queued write that fails for good is not silent: one `error` record names the entity, the row, the SQLSTATE
/// and the constraint (never a value), and the failure is counted; a durable writer, which gets the error
/// thrown, gets no `error` record.
@Suite("Commit failure log", .timeLimit(.minutes(2)))
struct CommitFailureLogTests {
    /// A stack logging every level into swift-log's in-memory handler, with row `id` already in `stack_notes`
    /// (unknown to the stack: inserting it fails at commit).
    static func withLoggedStack(
        existing id: Int, configure: (inout DataStackConfiguration) -> Void = { _ in },
        _ body: (DataStack, RecordingLogHandler) async throws -> Void
    ) async throws {
        let (logger, handler) = RecordingLogHandler.logger()
        try await StackTestServer.withQueueStack(logger: logger, configure) { stack in
            try await StackTestServer.execute(stack, "INSERT INTO stack_notes (id, title, rank) VALUES (\(id), 'there first', 0)")
            try await body(stack, handler)
        }
    }

    @Test("A queued write that violates a unique constraint: one error record naming entity and constraint, counted once")
    func queuedFailureIsLoggedOnceAtError() async throws {
        try await Self.withLoggedStack(existing: 7) { stack, handler in
            var errors = stack.errors.makeAsyncIterator()
            try await stack.write { try $0.insert(StackNote(id: 7, title: "secret-title-value", rank: 1)) }
            let reported = await errors.next()
            #expect(reported?.code == .commitFailed)

            let failures = handler.entries.filter { $0.level == .error }
            #expect(failures.count == 1)
            let record = try #require(failures.first)
            #expect(record.metadata["skyros.entity"]?.description == "StackNote")
            #expect(record.metadata["skyros.row.id"]?.description == "7")
            #expect(record.metadata["skyros.error.sqlstate"]?.description == "23505")
            #expect(record.metadata["skyros.error.constraint"]?.description == "stack_notes_pkey")
            // No record carries a value the write held.
            #expect(!handler.entries.contains { $0.text.contains("secret-title-value") })
            #expect(stack.commitQueueStatistics.failures == 1)
        }
    }

    @Test("A queued write whose second row breaks a unique constraint: the error record names that row, not the first")
    func theRowThatFailedIsNamed() async throws {
        try await Self.withLoggedStack(existing: 30) { stack, handler in
            try await StackTestServer.execute(
                stack, "INSERT INTO stack_counters (id, name, note) VALUES ('taken', 'there first', 'x')")
            var errors = stack.errors.makeAsyncIterator()
            // A note (fine), then a counter whose key is taken: the second row fails, and with it the set.
            try await stack.write { context in
                try context.insert(StackNote(id: 31, title: "fine", rank: 1))
                try context.insert(StackCounter(id: "taken", name: "secret-name-value", note: "secret-note-value"))
            }
            #expect(await errors.next()?.code == .commitFailed)

            let failures = handler.entries.filter { $0.level == .error }
            #expect(failures.count == 1)
            let record = try #require(failures.first)
            #expect(record.metadata["skyros.entity"]?.description == "StackCounter")
            #expect(record.metadata["skyros.row.table"]?.description == "stack_counters")
            #expect(record.metadata["skyros.row.id"]?.description == "taken")
            #expect(record.metadata["skyros.error.constraint"]?.description == "stack_counters_pkey")
            #expect(record.metadata["skyros.error.sqlstate"]?.description == "23505")
            #expect(record.metadata["skyros.stack.rows"]?.description == "2")
            #expect(!handler.entries.contains { $0.text.contains("secret-name-value") || $0.text.contains("secret-note-value") })
            // The whole set was reverted: the note is not there either.
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 31) } == nil)
        }
    }

    @Test("The record carries the server's DETAIL with its values redacted, or as it came when the configuration opts in", arguments: [false, true])
    func detailIsRedactedUnlessOptedIn(logsRowValues: Bool) async throws {
        try await Self.withLoggedStack(existing: 40, configure: { $0.commitQueue.logsRowValues = logsRowValues }) { stack, handler in
            try await StackTestServer.execute(stack, "CREATE UNIQUE INDEX stack_notes_title_key ON stack_notes (title)")
            // Written by the stack, so the value travels as a bound parameter and no SQL text logged holds it.
            try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 41, title: "secret-title-value", rank: 0)) }
            var errors = stack.errors.makeAsyncIterator()
            try await stack.write { try $0.insert(StackNote(id: 42, title: "secret-title-value", rank: 1)) }
            #expect(await errors.next()?.code == .commitFailed)
            let record = try #require(handler.entries.first { $0.level == .error })
            #expect(record.metadata["skyros.error.constraint"]?.description == "stack_notes_title_key")
            let detail = record.metadata["skyros.error.detail"]?.description
            if logsRowValues {
                #expect(detail == "Key (title)=(secret-title-value) already exists.")
            } else {
                #expect(detail == "Key (title)=(<redacted>) already exists.")
                #expect(!handler.entries.contains { $0.text.contains("secret-title-value") })
            }
        }
    }

    @Test("A durable write that fails throws to its caller and logs no error record")
    func durableFailureIsThrownNotLoggedAtError() async throws {
        try await Self.withLoggedStack(existing: 8) { stack, handler in
            let error = await thrownError {
                try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 8, title: "durable", rank: 1)) }
            }
            #expect((error as? PGError)?.constraint == "stack_notes_pkey")
            #expect(handler.entries.filter { $0.level == .error }.isEmpty)
            #expect(stack.commitQueueStatistics.failures == 1)
        }
    }

    @Test("defaultDurability .committed: write {} returns after the commit and throws its error")
    func committedDefaultDurabilityThrows() async throws {
        try await Self.withLoggedStack(existing: 9, configure: { $0.defaultDurability = .committed }) { stack, _ in
            let error = await thrownError { try await stack.write { try $0.insert(StackNote(id: 9, title: "default", rank: 1)) } }
            #expect((error as? PGError)?.sqlState == .uniqueViolation)
            // Written and committed before it returned: a fresh read of another row sees it at once.
            try await stack.write { try $0.insert(StackNote(id: 10, title: "committed", rank: 2)) }
            #expect(stack.commitQueueStatistics.queueDepth == 0)
        }
    }

    @Test("A queued write given a request's logger: its failure is logged there, with the request's metadata")
    func queuedFailureGoesToTheWritersLogger() async throws {
        try await Self.withLoggedStack(existing: 11) { stack, stackHandler in
            let requestHandler = RecordingLogHandler()
            var requestLogger = Logger(label: "request", factory: { _ in requestHandler })
            requestLogger[metadataKey: "request-id"] = "req-4f1c"
            var errors = stack.errors.makeAsyncIterator()
            try await stack.write(logger: requestLogger) { try $0.insert(StackNote(id: 11, title: "from a request", rank: 1)) }
            #expect(await errors.next()?.code == .commitFailed)

            let record = try #require(requestHandler.entries.first { $0.level == .error })
            #expect(requestHandler.entries.filter { $0.level == .error }.count == 1)
            #expect(record.metadata["request-id"]?.description == "req-4f1c")
            #expect(record.metadata["skyros.error.constraint"]?.description == "stack_notes_pkey")
            #expect(record.metadata["skyros.row.id"]?.description == "11")
            // One record in all: the stack's logger does not repeat it.
            #expect(stackHandler.entries.filter { $0.level == .error }.isEmpty)
            #expect(stack.commitQueueStatistics.failures == 1)

            // A write with a logger and a durability and merge policy of its own commits like any other.
            let stored = try await stack.write(durability: .committed, mergePolicy: .contextWins, logger: requestLogger) {
                try $0.insert(StackNote(id: 12, title: "ok", rank: 2))
                return 12
            }
            #expect(stored == 12)
            #expect(try await stack.read { try await $0.object(StackNote.self, id: 12) }?.title == "ok")
        }
    }
}
