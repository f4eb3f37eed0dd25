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
    /// Keeps every record a logger emits.
    final class CapturingLogHandler: LogHandler, @unchecked Sendable {
        // @unchecked: `records` is only touched under `lock`; the other members are set before the logger is shared.
        struct Record {
            let level: Logger.Level
            let message: String
            let metadata: Logger.Metadata
        }

        private let lock = NSLock()
        private var records: [Record] = []
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { self.metadata[key] }
            set { self.metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let record = Record(
                level: event.level, message: event.message.description, metadata: self.metadata.merging(event.metadata ?? [:]) { $1 })
            self.lock.withLock { self.records.append(record) }
        }

        var captured: [Record] { self.lock.withLock { self.records } }
    }

    /// A stack logging into a capturing handler, with row `id` already in `stack_notes` (unknown to the stack:
    /// inserting it fails at commit).
    static func withLoggedStack(
        existing id: Int, configure: (inout DataStackConfiguration) -> Void = { _ in },
        _ body: (DataStack, CapturingLogHandler) async throws -> Void
    ) async throws {
        let handler = CapturingLogHandler()
        try await StackTestServer.withQueueStack(logger: Logger(label: "skyros.test", factory: { _ in handler }), configure) { stack in
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

            let failures = handler.captured.filter { $0.level == .error }
            #expect(failures.count == 1)
            let record = try #require(failures.first)
            #expect(record.metadata["skyros.entity"]?.description == "StackNote")
            #expect(record.metadata["skyros.row.id"]?.description == "7")
            #expect(record.metadata["skyros.error.sqlstate"]?.description == "23505")
            #expect(record.metadata["skyros.error.constraint"]?.description == "stack_notes_pkey")
            // No record carries a value the write held.
            #expect(!handler.captured.contains { "\($0.message) \($0.metadata)".contains("secret-title-value") })
            #expect(stack.commitQueueStatistics.failures == 1)
        }
    }

    @Test("A durable write that fails throws to its caller and logs no error record")
    func durableFailureIsThrownNotLoggedAtError() async throws {
        try await Self.withLoggedStack(existing: 8) { stack, handler in
            let error = await thrownError {
                try await stack.write(durability: .committed) { try $0.insert(StackNote(id: 8, title: "durable", rank: 1)) }
            }
            #expect((error as? PostgresError)?.constraint == "stack_notes_pkey")
            #expect(handler.captured.filter { $0.level == .error }.isEmpty)
            #expect(stack.commitQueueStatistics.failures == 1)
        }
    }

    @Test("defaultDurability .committed: write {} returns after the commit and throws its error")
    func committedDefaultDurabilityThrows() async throws {
        try await Self.withLoggedStack(existing: 9, configure: { $0.defaultDurability = .committed }) { stack, _ in
            let error = await thrownError { try await stack.write { try $0.insert(StackNote(id: 9, title: "default", rank: 1)) } }
            #expect((error as? PostgresError)?.sqlState == .uniqueViolation)
            // Written and committed before it returned: a fresh read of another row sees it at once.
            try await stack.write { try $0.insert(StackNote(id: 10, title: "committed", rank: 2)) }
            #expect(stack.commitQueueStatistics.queueDepth == 0)
        }
    }
}
