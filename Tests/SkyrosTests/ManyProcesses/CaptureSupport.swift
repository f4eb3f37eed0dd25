import Foundation
import Skyros
import SkyrosTestFixtures
import SkyrosPostgres
import SkyrosTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Schemas, stacks, `capture-node` children and psql for the capture tests (every committed change, by any
/// writer, reaches every stack's cache and observers).
enum CaptureHarness {
    /// How long a change may take to reach a stack, and a child to answer.
    static let deadline: Duration = .seconds(15)

    /// The seeded books: 1–3 by author 1, 4–6 by author 2, titled `book1`…`book6`.
    static let seededBooks: [(id: Int64, title: String)] = (1...6).map { (Int64($0), "book\($0)") }

    /// Runs `body` with a fresh schema holding `cap_authors`, `cap_books` (cascading from its author) and
    /// `cap_audit`, seeded with authors 1 and 2 and ``seededBooks``; drops it afterwards.
    static func withSchema<R>(_ body: (String) async throws -> R) async throws -> R {
        try await TestServer.withSchema("cap") { schema in
            let qualified = quoteIdentifier(schema)
            try await TestServer.withConnection { connection in
                _ = try await connection.execute(script: """
                    CREATE TABLE \(qualified).cap_authors (id bigint PRIMARY KEY, name text NOT NULL);
                    CREATE TABLE \(qualified).cap_books (
                        id bigint PRIMARY KEY,
                        author_id bigint NOT NULL REFERENCES \(qualified).cap_authors ON DELETE CASCADE,
                        title text NOT NULL);
                    CREATE TABLE \(qualified).cap_audit (id bigint PRIMARY KEY, note text NOT NULL);
                    INSERT INTO \(qualified).cap_authors VALUES (1, 'author1'), (2, 'author2');
                    INSERT INTO \(qualified).cap_books VALUES
                        (1, 1, 'book1'), (2, 1, 'book2'), (3, 1, 'book3'), (4, 2, 'book4'), (5, 2, 'book5'), (6, 2, 'book6');
                    """)
            }
            return try await body(schema)
        }
    }

    /// A stack in this process on `schema` with the capture entities, capturing with `source` (the default's
    /// choice unless a test is about one source).
    static func stack(schema: String, source: ChangeCaptureSource = .automatic) async throws -> DataStack {
        var configuration = DataStackConfiguration(
            store: .postgres(try TestServer.configuration, schema: schema),
            entities: [CaptureAuthor.self, CaptureBook.self, CaptureAudit.self])
        configuration.pool.leaseTimeout = .seconds(30)
        configuration.changeFeed.captureSource = source
        return try await DataStack.start(configuration)
    }

    /// Runs `body` with `count` `capture-node` children on `schema`, each watching book `watchBook`, ready;
    /// stops them afterwards (and records an issue for a child that did not exit with 0).
    static func withNodes<R>(
        _ count: Int, schema: String, watchBook: Int64, logical: Bool = false, _ body: ([CaptureNode]) async throws -> R
    ) async throws -> R {
        var nodes: [CaptureNode] = []
        return try await withCleanup {
            for number in 1...count {
                nodes.append(try CaptureNode.spawn(name: "child \(number)", schema: schema, watchBook: watchBook, logical: logical))
            }
            for node in nodes { try await node.waitUntilReady() }
            return try await body(nodes)
        } cleanup: {
            for node in nodes {
                let status = await node.stop()
                if await !node.wasKilled { #expect(status == 0, "\(node.name) exited with \(status): \(node.report)") }
                node.removeOutput()
            }
        }
    }

    /// The books in PostgreSQL, read over a plain connection, rendered as the children render theirs:
    /// `<count> <id:title,…>` (`-` for none).
    static func storedBooks(schema: String) async throws -> String {
        try await TestServer.withConnection { connection in
            let rows = try await connection.query("SELECT id, title FROM \(qualified: [schema, "cap_books"]) ORDER BY id")
            return self.rendered(try rows.map { (try $0.decode(Int64.self, at: 0), try $0.decode(String.self, at: 1)) })
        }
    }

    /// `<count> <id:title,…>`, `<count> -` for no books (titles in the tests need no escaping).
    static func rendered(_ books: [(id: Int64, title: String)]) -> String {
        let list = books.map { "\($0.id):\($0.title)" }.joined(separator: ",")
        return "\(books.count) \(list.isEmpty ? "-" : list)"
    }
}

/// What a `capture-node` child answered about its main context and its observers.
struct CaptureNodeState: Equatable, CustomStringConvertible {
    /// `object <id>` for each asked id: the cached title, or `nil`.
    var objects: [Int64: String?] = [:]
    /// `observed`: the query observer's latest result, `<count> <id:title,…>`.
    var observedBooks: String?
    /// `observed`: the watched-book observer's latest result (`nil`: no book).
    var observedBook: String??

    var description: String {
        let objects = self.objects.keys.sorted().map { "\($0)=\(self.objects[$0].map { $0 ?? "nil" } ?? "?")" }
        return "objects [\(objects.joined(separator: " "))] "
            + "observed [\(self.observedBooks ?? "?")] book [\(self.observedBook.map { $0 ?? "nil" } ?? "?")]"
    }
}

/// A `skyros-test-node capture-node` child: commands on its stdin, one answer line each on its stdout.
actor CaptureNode {
    nonisolated let name: String
    nonisolated let process: NodeProcess
    private let input: NodeInput
    /// Lines of stdout already taken as answers.
    private var consumed = 0
    /// The `application_name` of its listener, from its `ready` line.
    private(set) var listenerName = ""
    /// Whether the test killed it (``kill()``): its exit status is then not a failure.
    private(set) var wasKilled = false

    /// SIGKILLs the child, as a crash or an OOM kill would end it.
    func kill() {
        self.wasKilled = true
        self.process.signal(SIGKILL)
    }

    private init(name: String, process: NodeProcess, input: NodeInput) {
        self.name = name
        self.process = process
        self.input = input
    }

    /// - Parameter logical: the child's stack captures with logical decoding (else the default, triggers).
    static func spawn(name: String, schema: String, watchBook: Int64, logical: Bool = false) throws -> CaptureNode {
        let (process, input) = try NodeProcess.spawnWithInput(
            TestNode.executablePath,
            ["capture-node", "--schema", schema, "--watch-book", String(watchBook)] + (logical ? ["--source", "logical"] : []))
        return CaptureNode(name: name, process: process, input: input)
    }

    nonisolated var report: String { self.process.report }

    nonisolated func removeOutput() { self.process.removeOutput() }

    /// Waits (30 s: children start side by side on a busy machine) for its `ready` line.
    func waitUntilReady() async throws {
        let end = ContinuousClock.now + .seconds(30)
        var line = self.completeLines.first { $0.hasPrefix("ready") }
        while line == nil, ContinuousClock.now < end {
            try await Task.sleep(for: .milliseconds(20))
            line = self.completeLines.first { $0.hasPrefix("ready") }
        }
        guard let line else {
            throw CaptureNodeError("\(self.name) was not ready within 30 s: \(self.report)")
        }
        self.listenerName = String(line.dropFirst("ready".count)).trimmingCharacters(in: .whitespaces)
        self.consumed = self.completeLines.count
    }

    /// Sends `command` and waits (``CaptureHarness/deadline``) for its answer: the first new line that starts
    /// with the command's name.
    func ask(_ command: String) async throws -> String {
        try self.input.send(command)
        let name = command.split(separator: " ").first.map(String.init) ?? command
        let end = ContinuousClock.now + CaptureHarness.deadline
        var answer: String?
        while answer == nil {
            let lines = self.completeLines
            if let index = lines.indices.dropFirst(self.consumed).first(where: { lines[$0].hasPrefix(name + " ") }) {
                self.consumed = index + 1
                answer = lines[index]
            } else if ContinuousClock.now < end {
                try await Task.sleep(for: .milliseconds(5))
            } else {
                break
            }
        }
        guard let answer else {
            throw CaptureNodeError("\(self.name) did not answer \"\(command)\" within \(CaptureHarness.deadline): \(self.report)")
        }
        if answer.hasPrefix(name + " error ") { throw CaptureNodeError("\(self.name) failed \"\(command)\": \(answer)") }
        return String(answer.dropFirst(name.count + 1))
    }

    /// Its stdout's lines that end in a newline (the last one may still be being written).
    private var completeLines: [String] {
        let output = self.process.output
        guard let end = output.lastIndex(of: "\n") else { return [] }
        return output[..<end].split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    /// `object <id>`: the main context's cached read of book `id` (its title, or `nil`).
    func object(_ id: Int64) async throws -> String? {
        let answer = try await self.ask("object \(id)")
        let title = answer.split(separator: " ", maxSplits: 1).last.map(String.init)
        return title == "nil" ? nil : title
    }

    /// `query`: a main-context fetch of every book, `<count> <id:title,…>`.
    func query() async throws -> String { try await self.ask("query") }

    /// `observed`: the latest results of the query observer (`<count> <id:title,…>`) and of the watched-book
    /// observer (its title, or `nil`).
    func observed() async throws -> (books: String, book: String?) {
        let answer = try await self.ask("observed")
        let parts = answer.components(separatedBy: " | book ")
        guard parts.count == 2 else { throw CaptureNodeError("\(self.name): unexpected answer \"observed \(answer)\"") }
        return (parts[0], parts[1] == "nil" ? nil : parts[1])
    }

    /// `stats`: the change feed's count of catch-ups.
    func catchUps() async throws -> Int {
        let answer = try await self.ask("stats")
        let field = answer.split(separator: " ").first { $0.hasPrefix("catchUps=") }
        return field.flatMap { Int($0.dropFirst("catchUps=".count)) } ?? -1
    }

    /// Asks `object` for each of `ids`, then `observed` (not `query`: a main-context fetch refills the cache
    /// with what it reads, so it would hide a stale `object` on the next poll).
    func state(objects ids: [Int64]) async throws -> CaptureNodeState {
        var state = CaptureNodeState()
        for id in ids { state.objects[id] = .some(try await self.object(id)) }
        let observed = try await self.observed()
        state.observedBooks = observed.books
        state.observedBook = .some(observed.book)
        return state
    }

    /// Sends `quit` and waits 20 s for the exit; kills the child when it does not exit. Its exit status.
    func stop() async -> Int32 {
        try? self.input.send("quit")
        self.input.finish()
        return await self.process.exitStatus(killingAfter: .seconds(20))
    }
}

struct CaptureNodeError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension NodeProcess {
    /// Waits for the exit at most `deadline`, then kills the process (SIGKILL) and waits for that: the exit
    /// status (128 + 9 when killed).
    func exitStatus(killingAfter deadline: Duration) async -> Int32 {
        await withTaskGroup(of: Int32?.self) { group in
            group.addTask { await self.exitStatus() }
            group.addTask {
                try? await Task.sleep(for: deadline)
                return nil
            }
            if let status = await group.next() ?? nil {
                group.cancelAll()
                return status
            }
            self.signal(SIGKILL)
            while let next = await group.next() { if let status = next { return status } }
            return -1
        }
    }
}

/// psql: the writer outside Skyros.
enum Psql {
    /// `$SKYROS_TEST_PG_BIN/psql` (the throw-away cluster's binaries), else `psql` on `PATH`, else the newest
    /// `/usr/lib/postgresql/<version>/bin/psql`.
    static var path: String? {
        let environment = ProcessInfo.processInfo.environment
        var candidates: [String] = []
        if let bin = environment["SKYROS_TEST_PG_BIN"] { candidates.append(bin + "/psql") }
        for directory in (environment["PATH"] ?? "").split(separator: ":") { candidates.append("\(directory)/psql") }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
            candidates.append("/usr/lib/postgresql/\(version)/bin/psql")
        }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs `script` with psql (`-v ON_ERROR_STOP=1`, one transaction per statement) against the server under
    /// test, with `search_path` set to `schema`; returns its stdout (`-At`: unaligned, tuples only). Throws
    /// when psql fails or takes longer than 60 s.
    @discardableResult
    static func run(_ script: String, schema: String) async throws -> String {
        guard let psql = self.path else { throw CaptureNodeError("psql not found (SKYROS_TEST_PG_BIN, PATH, /usr/lib/postgresql)") }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("skyros-psql-\(UUID().uuidString).sql")
        try Data((script + "\n").utf8).write(to: file)    // a COPY's `\.` must end its line
        defer { try? FileManager.default.removeItem(at: file) }
        // `env` sets PGOPTIONS for psql alone (setenv here would reach every test of the process). The URL is
        // an argument, never part of a message.
        let process = try NodeProcess.spawn(
            "/usr/bin/env",
            ["PGOPTIONS=-c search_path=\(schema)", psql, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", TestServer.url, "-f", file.path])
        defer { process.removeOutput() }
        let status = await process.exitStatus(killingAfter: .seconds(60))
        guard status == 0 else { throw CaptureNodeError("psql exited with \(status): \(process.report)") }
        return process.output
    }
}
