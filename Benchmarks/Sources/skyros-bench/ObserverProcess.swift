import Foundation
import Skyros
import SkyrosPostgres

/// The observing side of the cross-process observation benchmark: a child process (this executable run as
/// `skyros-bench observe-node ID…`) with a stack of its own that observes `BenchCounter` rows and writes one
/// line per observed value to its standard output: `id n nanoseconds` (`CLOCK_MONOTONIC`, the same clock in
/// every process of the machine). It exits when its standard input closes.
enum ObserverNode {
    static let command = "observe-node"
    /// How long the shutdown after the parent closed our standard input may take before the process ends anyway.
    static let shutdownGrace: UInt32 = 10

    /// A sequence that ends when the parent closes our standard input (when it is done, or dies). Watched from
    /// the start, so that a child still starting (or hung anywhere) does not outlive the parent by more than
    /// ``shutdownGrace``: past it the process ends anyway.
    static func watchParent() -> AsyncStream<Void> {
        let (parentDone, parentDoneContinuation) = AsyncStream.makeStream(of: Void.self)
        Thread.detachNewThread {
            var byte: UInt8 = 0
            while read(0, &byte, 1) > 0 {}
            parentDoneContinuation.finish()
            sleep(Self.shutdownGrace)
            _exit(1)
        }
        return parentDone
    }

    static func run(url: String, ids: [Int]) async throws -> Never {
        let parentDone = Self.watchParent()
        let stack = try await DataStack.start(DataStackConfiguration(
            store: .postgres(try PGConfiguration(url: url)), entities: [BenchCounter.self]).benchmarkCaptureSource(), logger: benchmarkLogger)
        for id in ids {
            Task {
                for try await value in stack.observe(BenchCounter.self, id: id) {
                    let stamp = monotonicNanoseconds()
                    let line = Array("\(id) \(value?.n ?? -1) \(stamp)\n".utf8)
                    // One write(2) per line: atomic on a pipe (below PIPE_BUF), whichever task writes.
                    line.withUnsafeBytes { _ = write(1, $0.baseAddress, $0.count) }
                }
            }
        }
        for await _ in parentDone {}
        await stack.shutdown()
        exit(0)
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: comparable across the processes of one machine.
func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// Starts an ``ObserverNode`` and delivers its observations as they arrive.
final class ObserverProcess: Sendable {
    struct Observation: Sendable {
        let id: Int
        let n: Int
        let nanoseconds: UInt64
    }

    private let process: Process
    private let input: Pipe
    let observations: AsyncStream<Observation>

    init(url: String, ids: [Int]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        process.arguments = [ObserverNode.command] + ids.map(String.init)
        var environment = ProcessInfo.processInfo.environment
        environment["DATABASE_URL"] = url
        process.environment = environment
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        let (observations, continuation) = AsyncStream.makeStream(of: Observation.self)
        let reading = output.fileHandleForReading
        Thread.detachNewThread {
            var pending: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(reading.fileDescriptor, $0.baseAddress, 4096) }
                if count <= 0 { break }
                pending.append(contentsOf: buffer[0..<count])
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let fields = String(decoding: pending[..<newline], as: UTF8.self).split(separator: " ")
                    pending.removeSubrange(...newline)
                    if fields.count == 3, let id = Int(fields[0]), let n = Int(fields[1]), let ns = UInt64(fields[2]) {
                        continuation.yield(Observation(id: id, n: n, nanoseconds: ns))
                    }
                }
            }
            continuation.finish()
        }
        try process.run()
        ChildProcesses.add(process.processIdentifier)
        self.process = process
        self.input = input
        self.observations = observations
    }

    /// Closes the child's standard input and waits for it to exit.
    func stop() {
        try? self.input.fileHandleForWriting.close()
        self.process.waitUntilExit()
        ChildProcesses.remove(self.process.processIdentifier)
    }
}
