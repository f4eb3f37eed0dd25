import Dispatch
import Foundation
import Skyros
import SkyrosPostgres

/// Process-level commands for the commit-queue tests (durable writer killed with SIGKILL, SIGTERM drain).
///
/// Both take `<schema> <count>` and read `DATABASE_URL`; the test created the tables `cq_items` and
/// `cq_parts` (see CommitQueueProcessTests) in that schema. Acknowledgements go to stdout unbuffered.
enum CommitQueueCommands {
    /// Runs `command` if it is one of these; `nil` otherwise.
    static func run(_ command: String, _ arguments: [String]) async throws -> Int32? {
        switch command {
        case "durable-writer": return try await self.durableWriter(arguments)
        case "queued-writer": return try await self.queuedWriter(arguments)
        case "write-shutdown-exit": return try await self.writeShutdownExit(arguments)
        default: return nil
        }
    }

    struct Item: Entity, Equatable {
        var id: Int
        var label: String
        static let tableName = "cq_items"
        static let columns: [EntityColumn<Item>] = [EntityColumn(\.id, "id"), EntityColumn(\.label, "label")]
    }

    struct Part: Entity, Equatable {
        var id: Int
        var itemID: Int
        enum CodingKeys: String, CodingKey {
            case id
            case itemID = "item_id"
        }
        static let tableName = "cq_parts"
        static let columns: [EntityColumn<Part>] = [EntityColumn(\.id, "id"), EntityColumn(\.itemID, "item_id")]
    }

    private static func acknowledge(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    private static func stack(_ arguments: [String]) async throws -> (DataStack, Int) {
        guard arguments.count == 2, let count = Int(arguments[1]),
            let url = ProcessInfo.processInfo.environment["DATABASE_URL"]
        else {
            throw PGError(kind: .invalidConfiguration, message: "usage: <command> <schema> <count> with DATABASE_URL set")
        }
        let stack = try await DataStack.start(DataStackConfiguration(
            store: .postgres(try PGConfiguration(url: url), schema: arguments[0]), entities: [Item.self, Part.self]))
        return (stack, count)
    }

    /// `write-shutdown-exit <schema> <id> <application name>`: starts a stack whose connections (pool and
    /// listener) carry the application name, observes the items, makes one durable write, awaits `shutdown()`,
    /// prints `shutdown <ms since 1970>` unbuffered and exits at once (no cleanup after it): whatever the stack
    /// still ran would run into the process's teardown.
    private static func writeShutdownExit(_ arguments: [String]) async throws -> Int32 {
        guard arguments.count == 3, let id = Int(arguments[1]), let url = ProcessInfo.processInfo.environment["DATABASE_URL"] else {
            throw PGError(kind: .invalidConfiguration, message: "usage: write-shutdown-exit <schema> <id> <application name>")
        }
        var postgres = try PGConfiguration(url: url)
        postgres["application_name"] = arguments[2]
        var configuration = DataStackConfiguration(store: .postgres(postgres, schema: arguments[0]), entities: [Item.self, Part.self])
        configuration.changeFeed.applicationName = arguments[2]
        let stack = try await DataStack.start(configuration)
        let observation = stack.observe(FetchDescriptor<Item>())
        var results = observation.makeAsyncIterator()
        _ = try await results.next()
        try await stack.write(durability: .committed) { context in
            try context.insert(Item(id: id, label: "item \(id)"))
        }
        await stack.shutdown()
        acknowledge("shutdown \(Int64((Date().timeIntervalSince1970 * 1000).rounded(.up)))")
        exit(0)
    }

    /// `durable-writer <schema> <count>`: `count` durable writes, each an item and its two parts (one set);
    /// prints `ack <id>` after each returns. Meant to be killed with SIGKILL.
    private static func durableWriter(_ arguments: [String]) async throws -> Int32 {
        let (stack, count) = try await self.stack(arguments)
        acknowledge("ready")
        for id in 1...count {
            try await stack.write(durability: .committed) { context in
                try context.insert(Item(id: id, label: "item \(id)"))
                try context.insert(Part(id: id * 2, itemID: id))
                try context.insert(Part(id: id * 2 + 1, itemID: id))
            }
            acknowledge("ack \(id)")
        }
        await stack.shutdown()
        return 0
    }

    /// `queued-writer <schema> <count>`: holds the commit queue, saves `count` queued (visible) writes, prints
    /// `queued <count>`, and on SIGTERM or SIGINT shuts the stack down — draining the queue — then exits 0
    /// (1 when a write failed).
    private static func queuedWriter(_ arguments: [String]) async throws -> Int32 {
        let signals = self.terminationSignals()
        let (stack, count) = try await self.stack(arguments)
        stack.holdCommits()
        for id in 1...count {
            try await stack.write { context in
                try context.insert(Item(id: id, label: "queued \(id)"))
                try context.insert(Part(id: id * 2, itemID: id))
                try context.insert(Part(id: id * 2 + 1, itemID: id))
            }
        }
        acknowledge("queued \(stack.queuedCommits)")
        let failures = Task {
            var failed = 0
            for await _ in stack.errors { failed += 1 }
            return failed
        }
        var iterator = signals.makeAsyncIterator()
        if let signal = await iterator.next() { acknowledge("signal \(signal)") }
        await stack.shutdown()
        let failed = await failures.value
        acknowledge("drained, \(failed) failed")
        return failed == 0 ? 0 : 1
    }

    /// Keeps the signal sources alive for the life of the process (set once, before any write).
    nonisolated(unsafe) private static var signalSources: [any DispatchSourceSignal] = []

    /// SIGTERM and SIGINT as an async sequence (the default actions are disabled).
    private static func terminationSignals() -> AsyncStream<Int32> {
        let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        let queue = DispatchQueue(label: "skyros-test-node.signals")
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGTERM, SIGINT] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            sources.append(source)
        }
        self.signalSources = sources
        return stream
    }
}
