import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// `write(…, deadline:)`, `DataStackConfiguration.writeTimeout` and task cancellation: a write ends by its
/// deadline, says whether its changes may still commit, and saves nothing when they were not queued.
@Suite("WriteDeadline", .timeLimit(.minutes(2)))
struct WriteDeadlineTests {
    @Test("A write whose deadline passed before its changes were queued saves nothing", arguments: StackKind.allCases)
    func passedDeadlineSavesNothing(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            for durability in [WriteDurability.visible, .committed] {
                let error = await #expect(throws: DataStackError.self) {
                    try await stack.write(durability: durability, deadline: .now - .milliseconds(1)) { try $0.insert(note(1)) }
                }
                #expect(error?.code == .deadlineExceeded)
                #expect(error?.mayStillCommit == false)
            }
            try await stack.write(durability: .committed) { try $0.insert(note(2)) }
            #expect(try await stack.read { try await $0.fetch(StackNote.self) }.map(\.id) == [2])
        }
    }

    @Test("A write in a cancelled task throws writeCancelled and saves nothing", arguments: StackKind.allCases)
    func cancelledTaskSavesNothing(kind: StackKind) async throws {
        try await StackTestServer.withStack(kind) { stack in
            let outcome = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                do {
                    try await stack.write(durability: .committed) { try $0.insert(note(1)) }
                    return nil as DataStackError?
                } catch let error as DataStackError {
                    return error
                }
            }
            let error = try #require(await outcome.value)
            #expect(error.code == .writeCancelled)
            #expect(error.mayStillCommit == false)
            try await stack.write(durability: .committed) { try $0.insert(note(2)) }
            #expect(try await stack.read { try await $0.fetch(StackNote.self) }.map(\.id) == [2])
        }
    }

    @Test("A durable write whose commit waits on a row lock ends at its deadline; its commit follows when the lock goes")
    func queuedCommitOutlivesItsDeadline() async throws {
        try await StackTestServer.withQueueStack({ $0.commitQueue.maximumQueuedCommits = 1 }) { stack in
            let schema = try #require((stack.store as? PostgresStore)?.schema)
            // Another session inserts row 7 and keeps its transaction open: the stack's insert of row 7 waits.
            let blocker = try await TestServer.connect()
            _ = try await blocker.query("BEGIN")
            _ = try await blocker.query(
                "INSERT INTO \(qualified: [schema, "stack_notes"]) (id, title, rank) VALUES (7, 'other', 7)")
            let timedOut = await #expect(throws: DataStackError.self) {
                try await stack.write(durability: .committed, deadline: .now + .milliseconds(500)) { try $0.insert(note(7)) }
            }
            #expect(timedOut?.code == .deadlineExceeded)
            #expect(timedOut?.mayStillCommit == true, "the insert was queued: the queue keeps it")
            // The queue is full (one commit, still waiting): a second write's deadline passes while it waits for
            // room, before anything of it is queued.
            let noRoom = await #expect(throws: DataStackError.self) {
                try await stack.write(durability: .visible, deadline: .now + .milliseconds(300)) { try $0.insert(note(8)) }
            }
            #expect(noRoom?.code == .deadlineExceeded)
            #expect(noRoom?.mayStillCommit == false)
            // The other session gives row 7 up: the queued insert commits after all.
            _ = try await blocker.query("ROLLBACK")
            await blocker.close()
            try await stack.write(durability: .committed) { try $0.insert(note(9)) }
            let rows = try await CommitQueueTestServer.query(
                "SELECT id::int8, title FROM \(qualified: [schema, "stack_notes"]) ORDER BY id")
            #expect(try rows.map { try $0.decode(Int.self, at: 0) } == [7, 9])
            #expect(try rows[0].decode(String.self, at: 1) == "note 7")
        }
    }

    @Test("writeTimeout applies to writes that name no deadline")
    func configuredTimeout() async throws {
        try await StackTestServer.withQueueStack({ $0.writeTimeout = .milliseconds(400) }) { stack in
            let schema = try #require((stack.store as? PostgresStore)?.schema)
            let blocker = try await TestServer.connect()
            _ = try await blocker.query("BEGIN")
            _ = try await blocker.query(
                "INSERT INTO \(qualified: [schema, "stack_notes"]) (id, title, rank) VALUES (3, 'other', 3)")
            let error = await #expect(throws: DataStackError.self) {
                try await stack.write(durability: .committed) { try $0.insert(note(3)) }
            }
            #expect(error?.code == .deadlineExceeded)
            #expect(error?.mayStillCommit == true)
            var failures = stack.errors.makeAsyncIterator()
            _ = try await blocker.query("COMMIT")
            await blocker.close()
            // The queued insert meets the committed row 3: its failure reaches `errors`, as for any queued write.
            let failure = await failures.next()
            #expect(failure?.code == .commitFailed)
        }
    }
}
