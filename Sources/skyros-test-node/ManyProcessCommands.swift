import Foundation
import Skyros
import SkyrosTestFixtures
import SkyrosPostgres

/// Process-level commands for the many-processes tests (writers, observers, cache coherence).
///
/// Every command takes `--schema <name>` (the test made the tables `mp_items` and `mp_done` in it) and reads
/// `DATABASE_URL`. Lines on stdout: `ready <listener application_name>`, progress, then a verdict.
enum ManyProcessCommands {
    /// Runs `command` if it is one of these; `nil` otherwise.
    static func run(_ command: String, _ arguments: [String]) async throws -> Int32? {
        switch command {
        case "mp-update": return try await self.update(Options(arguments))
        case "mp-stream-updates": return try await self.streamUpdates(Options(arguments))
        case "mp-writer": return try await self.writer(Options(arguments))
        case "mp-increment": return try await self.increment(Options(arguments))
        default: return nil
        }
    }

    /// `mp-update --schema S --id N --value V`: one durable update of a row, then exit.
    private static func update(_ options: Options) async throws -> Int32 {
        let stack = try await self.stack(options)
        let id = Int64(options["id"]) ?? 0
        let value = Int(options["value"]) ?? 0
        try await stack.write(durability: .committed) { context in
            guard var item = try await context.object(MPItem.self, id: id) else { throw NodeError("row \(id) is missing") }
            item.value = value
            item.title = "updated by \(ProcessInfo.processInfo.processIdentifier)"
            try await context.update(item)
        }
        say("updated \(id) \(value)")
        await stack.shutdown()
        return 0
    }

    /// `mp-increment --schema S --id N --tasks T --rounds R`: T concurrent tasks each add 1 to row N's value R
    /// times, each addition its own queued write (`value = value + 1`, a set-based update); waits for every
    /// write to commit, then prints `incremented <T×R> failures <F> conflicts <C>` (C: version conflicts the
    /// stack counted; none are expected, as a set-based update reads no version).
    private static func increment(_ options: Options) async throws -> Int32 {
        let stack = try await self.stack(options)
        let id = Int64(options["id"]) ?? 1
        let tasks = Int(options["tasks"]) ?? 16
        let rounds = Int(options["rounds"]) ?? 1000
        say("ready \(stack.changeFeedApplicationName ?? "")")
        let failures = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<tasks {
                group.addTask {
                    var failed = 0
                    for _ in 0..<rounds {
                        do {
                            try await stack.write { context in
                                try context.update(where: #Predicate<MPItem> { $0.id == id }, set: [.set(\.value, to: \.value + 1)])
                            }
                        } catch {
                            failed += 1
                        }
                    }
                    return failed
                }
            }
            return await group.reduce(0, +)
        }
        // Every queued write settled (committed or failed and counted on `errors`).
        try await stack.write(durability: .committed) { try $0.update(where: #Predicate<MPItem> { $0.id == id }, set: [.set(\.value, to: \.value + 0)]) }
        let conflicts = stack.commitQueueStatistics.conflicts
        say("incremented \(tasks * rounds) failures \(failures + stack.commitQueueStatistics.failures) conflicts \(conflicts)")
        await stack.shutdown()
        return 0
    }

    /// `mp-stream-updates --schema S --ids 1,2,3 --rounds R`: every round sets each row's value to the round
    /// number (one durable write per round), printing `round <r>`.
    private static func streamUpdates(_ options: Options) async throws -> Int32 {
        let stack = try await self.stack(options)
        let ids = options["ids"].split(separator: ",").compactMap { Int64($0) }
        let rounds = Int(options["rounds"]) ?? 10
        for round in 1...rounds {
            try await stack.write(durability: .committed) { context in
                for id in ids {
                    guard var item = try await context.object(MPItem.self, id: id) else { throw NodeError("row \(id) is missing") }
                    item.value = round
                    try await context.update(item)
                }
            }
            say("round \(round)")
            try await Task.sleep(for: .milliseconds(20))
        }
        await stack.shutdown()
        return 0
    }

    /// `mp-writer --schema S --node K --nodes N --rows R --seed X`: inserts R rows (ids K*R+1…), waits for every
    /// node's rows, updates rows of the other nodes at random for a while (reading them through its main
    /// context), marks itself done, waits for every node, then checks that its main context and its
    /// observer (a filtered, sorted, limited query, its diffs replayed in order) agree with PostgreSQL.
    private static func writer(_ options: Options) async throws -> Int32 {
        let stack = try await self.stack(options)
        let node = Int(options["node"]) ?? 0
        let nodes = Int(options["nodes"]) ?? 4
        let rowsPerNode = Int(options["rows"]) ?? 1000
        var random = SeededGenerator(seed: UInt64(options["seed"]) ?? UInt64(node + 1))
        let observed = FetchDescriptor<MPItem>(
            predicate: #Predicate { $0.value >= 500 },
            sortBy: [SortDescriptor(\MPItem.value, order: .reverse), SortDescriptor(\MPItem.id)], fetchLimit: 25)
        let replay = ReplayObserver(stack: stack, descriptor: observed)
        let observerTask = Task { await replay.run() }
        say("ready \(stack.changeFeedApplicationName ?? "")")

        let base = Int64(node * rowsPerNode)
        for chunk in stride(from: 1, through: rowsPerNode, by: 100) {
            try await stack.write(durability: .committed) { context in
                for offset in chunk..<min(chunk + 100, rowsPerNode + 1) {
                    let id = base + Int64(offset)
                    try context.insert(MPItem(id: id, owner: node, value: Int(random.next() % 1000), title: "node \(node)"))
                }
            }
        }
        say("inserted \(rowsPerNode)")
        let total = nodes * rowsPerNode
        guard try await self.waitUntil(seconds: 60, { try await stack.store.count(FetchDescriptor<MPItem>()) == total }) else {
            let seen = (try? await stack.store.count(FetchDescriptor<MPItem>())) ?? -1
            say("timeout waiting for every node's rows: \(seen) of \(total)")
            return 1
        }
        var updates = 0
        var conflicts = 0
        for _ in 0..<rowsPerNode / 5 {
            do {
                try await stack.write(durability: .committed) { context in
                    for _ in 0..<5 {
                        let other = (node + 1 + Int(random.next() % UInt64(nodes - 1))) % nodes
                        let id = Int64(other * rowsPerNode) + Int64(1 + random.next() % UInt64(rowsPerNode))
                        guard var item = try await context.object(MPItem.self, id: id) else { throw NodeError("row \(id) is missing") }
                        item.value = Int(random.next() % 1000)
                        item.title = "node \(node) was here"
                        try await context.update(item)
                    }
                }
                updates += 5
            } catch let error as StoreError {
                // Two nodes updated the same row at once: the later one conflicts, as it should.
                conflicts += 1
                _ = error
            }
        }
        say("updated \(updates) conflicts \(conflicts)")
        try await stack.write(durability: .committed) { try $0.insert(MPDone(id: node)) }
        guard try await self.waitUntil(seconds: 60, { try await stack.store.count(FetchDescriptor<MPDone>()) == nodes }) else {
            let seen = (try? await stack.store.count(FetchDescriptor<MPDone>())) ?? -1
            say("timeout waiting for every node to finish: \(seen) of \(nodes)")
            return 1
        }
        // Every node is done writing: the main context and the observer must converge on PostgreSQL.
        let truth = try await stack.store.fetch(FetchDescriptor<MPItem>()).map(\.value)
        let expected = try await stack.store.fetch(observed).map(\.value)
        let mainAgrees = try await self.waitUntil(seconds: 20) {
            for row in truth {
                guard try await stack.mainContext.object(MPItem.self, id: row.id) == row else { return false }
            }
            return true
        }
        let observerAgrees = try await self.waitUntil(seconds: 20) { await replay.latest == expected }
        let replayErrors = await replay.mismatches
        let events = await replay.events
        observerTask.cancel()
        say("verdict main=\(mainAgrees) observer=\(observerAgrees) replayMismatches=\(replayErrors) events=\(events) remoteEntries=\(stack.changeFeedStatistics.remoteEntries) refreshedRows=\(stack.changeFeedStatistics.refreshedRows)")
        await stack.shutdown()
        return mainAgrees && observerAgrees && replayErrors == 0 ? 0 : 1
    }

    // MARK: Helpers

    private static func stack(_ options: Options) async throws -> DataStack {
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"] else { throw NodeError("DATABASE_URL is not set") }
        var configuration = DataStackConfiguration(
            store: .postgres(try PGConfiguration(url: url), schema: options["schema"]),
            entities: [MPItem.self, MPDone.self])
        configuration.pool.leaseTimeout = .seconds(30)
        // Even-numbered writers put updated rows in their hints, odd ones do not (both kinds meet, as during a
        // rolling change of the setting): every node refreshes rows from the former and evicts on the latter.
        configuration.changeFeed.includesRowsInHints = (Int(options["node"]) ?? 0).isMultiple(of: 2)
        return try await DataStack.start(configuration)
    }

    private static func waitUntil(seconds: Int, _ condition: () async throws -> Bool) async throws -> Bool {
        let end = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < end {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return try await condition()
    }
}

/// Observes a query and replays each diff on the previous result, counting results the replay got wrong.
actor ReplayObserver {
    let stack: DataStack
    let descriptor: FetchDescriptor<MPItem>
    private(set) var latest: [MPItem] = []
    private(set) var mismatches = 0
    private(set) var events = 0

    init(stack: DataStack, descriptor: FetchDescriptor<MPItem>) {
        self.stack = stack
        self.descriptor = descriptor
    }

    func run() async {
        do {
            for try await result in self.stack.observe(self.descriptor) {
                let replayed = result.diff.applied(to: self.latest)
                if replayed != result.values { self.mismatches += 1 }
                self.latest = replayed
                self.events += 1
            }
        } catch {
            say("observer ended: \(error)")
        }
    }
}

/// `--name value` pairs.
struct Options {
    private var values: [String: String] = [:]

    init(_ arguments: [String]) {
        var index = 0
        while index + 1 < arguments.count {
            if arguments[index].hasPrefix("--") { self.values[String(arguments[index].dropFirst(2))] = arguments[index + 1] }
            index += 2
        }
    }

    subscript(name: String) -> String { self.values[name] ?? "" }
}

struct NodeError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}


/// Writes one line to stdout, unbuffered.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
