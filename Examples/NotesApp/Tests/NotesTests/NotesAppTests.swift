import Foundation
import Notes
import Skyros
import SkyrosTesting
import Synchronization
import Testing

/// Every test of this package, in one suite whose trait checks, once all of them have run (in parallel), that
/// each schema they made was dropped: `.dropsEverySchema` (below) counts this run's schemas in `pg_namespace`
/// before and after the suite, and compares the kit's own records of the schemas it created and dropped.
///
/// The tests themselves are nested suites in the other files; most take a ``TestStore`` and run once on
/// PostgreSQL (a schema of their own, through `withTestStack`) and once on the in-memory stack.
@Suite(.dropsEverySchema)
struct NotesAppTests {}

/// What the whole run shares.
enum TestRun {
    /// The kit's records (`test schema created`, `test schema dropped`), to count the schemas.
    static let records = RecordingLogHandler.logger(label: "notes.tests")

    /// The database of `DATABASE_URL`, or `nil` when it is unset (the tests then run in memory only). A URL that
    /// does not parse stops the run: that is a broken environment, not a reason to skip.
    static let database: TestDatabase? = {
        do {
            return try TestDatabase.fromEnvironment(logger: records.logger)
        } catch {
            fatalError("DATABASE_URL: \(error)")
        }
    }()

    /// Where each test runs: in memory, and in a schema of its own on PostgreSQL when there is one.
    static let stores: [TestStore] = [.inMemory] + (database.map { [.postgres($0)] } ?? [])

    /// The start of every schema name of this run (`notes_` and 8 hexadecimal digits, then `_` and the test's
    /// tag): nothing else on the server begins with it and an underscore, even when other runs of these tests
    /// share the database.
    static let prefix: String = {
        let hex = String(UInt32.random(in: 0 ... .max), radix: 16)
        return "notes_" + String(repeating: "0", count: 8 - hex.count) + hex
    }()

    /// The prefix of one test's schemas: the run's, then the test's own `tag` (the letters and digits of its
    /// name, without the parameters of a `#function`).
    static func prefix(_ tag: String) -> String {
        let name = tag.prefix { $0 != "(" }.lowercased()
        let letters = name.filter { ("a"..."z").contains($0) || ("0"..."9").contains($0) }
        return "\(Self.prefix)_\(letters.prefix(24))"
    }

    /// The app's stack, with its entities and migrations; the kit moves its store.
    static let app = NotesStack.configuration()

    /// The most schemas of this run a test saw at once: how parallel the run was (printed, not asserted).
    static let peak = Peak()
}

/// The largest of the values recorded.
final class Peak: Sendable {
    private let value = Mutex(0)
    var maximum: Int { self.value.withLock { $0 } }
    func record(_ count: Int) { self.value.withLock { $0 = max($0, count) } }
}

/// Runs `body` with a ready `NotesService` on a stack of `store` (a schema of its own on PostgreSQL, made and
/// dropped by the kit), then checks that no schema of this test is left.
func withService(
    on store: TestStore, tag: String = #function, _ body: (NotesService, DataStack) async throws -> Void
) async throws {
    let prefix = TestRun.prefix(tag)
    try await withTestStack(TestRun.app, on: store, prefix: prefix) { stack in
        let service = NotesService(stack: stack)
        #expect(await service.start() == .ready)
        if case .postgres(let database) = store {
            TestRun.peak.record(try await database.schemaNames(prefix: TestRun.prefix + "_").count)
        }
        try await body(service, stack)
    }
    if case .postgres(let database) = store {
        #expect(try await database.schemaNames(prefix: prefix + "_").isEmpty, "left by \(tag)")
    }
}

/// The suite trait of ``NotesAppTests``: around the whole suite (all its tests, run in parallel), it checks that
/// the run starts with no schema of its prefix and ends with none, that the kit dropped every schema it created,
/// and that the tests did make schemas (at least 20: one per PostgreSQL test).
struct DropsEverySchema: SuiteTrait, TestScoping {
    /// Once, around the suite: not again around each test.
    var isRecursive: Bool { false }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard let database = TestRun.database else {
            try await function()
            return
        }
        #expect(try await database.schemaNames(prefix: TestRun.prefix + "_").isEmpty)
        try await function()
        let left = try await database.schemaNames(prefix: TestRun.prefix + "_")
        let entries = TestRun.records.handler.entries
        func schemas(_ message: String) -> Set<String> {
            Set(entries.filter { $0.message.description == message }
                .compactMap { $0.metadata["skyros.testing.schema"]?.description })
        }
        let created = schemas("test schema created")
        let dropped = schemas("test schema dropped")
        #expect(left.isEmpty, "left in pg_namespace: \(left)")
        #expect(created == dropped, "created but not dropped: \(created.subtracting(dropped).sorted())")
        #expect(created.allSatisfy { $0.hasPrefix(TestRun.prefix + "_") })
        #expect(created.count >= 20, "only \(created.count) schemas were made")
        // `./smoke` checks for this line: it proves the PostgreSQL half ran.
        print("NotesApp: \(created.count) test schemas created, \(dropped.count) dropped, "
            + "\(left.count) left in pg_namespace (prefix \(TestRun.prefix)); up to \(TestRun.peak.maximum) at once")
    }
}

extension Trait where Self == DropsEverySchema {
    /// Checks that every schema this run's tests made is dropped once they have all run.
    static var dropsEverySchema: Self { DropsEverySchema() }
}
