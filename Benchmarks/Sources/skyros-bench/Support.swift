import Foundation
import Logging
import Skyros
import SkyrosPostgres

/// Median of repeated measurements, in nanoseconds per operation.
struct Measurement {
    var samples: [Double] = []
    mutating func add(totalNanoseconds: Int64, operations: Int) {
        self.samples.append(Double(totalNanoseconds) / Double(operations))
    }
    var median: Double {
        let sorted = self.samples.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }
}

func elapsedNanoseconds(_ body: () async throws -> Void) async rethrows -> Int64 {
    let clock = ContinuousClock()
    let start = clock.now
    try await body()
    let d = clock.now - start
    return d.components.seconds * 1_000_000_000 + d.components.attoseconds / 1_000_000_000
}

/// Skyros's default busy-poll window (``PGConfiguration/busyPoll``) in nanoseconds, for the raw baselines
/// that wait for replies the same way.
let defaultBusyPollNanoseconds: Int64 = {
    let window = PGConfiguration(user: "", database: "").busyPoll
    return window.components.seconds * 1_000_000_000 + window.components.attoseconds / 1_000_000_000
}()

func microseconds(_ ns: Double) -> String { String(format: "%.1f µs", ns / 1000) }
func milliseconds(_ ns: Double) -> String { String(format: "%.1f ms", ns / 1_000_000) }
func ratio(_ a: Double, _ b: Double) -> String { String(format: "%.2f×", a / b) }

/// A Markdown table printed at the end.
struct Report {
    var rows: [[String]] = []
    mutating func add(_ row: String...) { self.rows.append(row) }
    func print(header: [String]) {
        Swift.print("| " + header.joined(separator: " | ") + " |")
        Swift.print("|" + header.map { _ in "---" }.joined(separator: "|") + "|")
        for row in self.rows { Swift.print("| " + row.joined(separator: " | ") + " |") }
    }
}

struct BenchmarkFailure: Error, CustomStringConvertible {
    var description: String
}

extension DataStackConfiguration {
    /// This configuration with the capture source `SKYROS_BENCH_CAPTURE_SOURCE` names (`triggers` or `logical`;
    /// unset: the default, `.automatic`), so that `Benchmarks/compare-sources` runs the same benchmarks on each;
    /// `none` turns the change feed off (no capture installed: the write path alone; phases that need the feed,
    /// such as `observe`, do not work then).
    func benchmarkCaptureSource() -> DataStackConfiguration {
        var configuration = self
        switch ProcessInfo.processInfo.environment["SKYROS_BENCH_CAPTURE_SOURCE"] {
        case "triggers": configuration.changeFeed.captureSource = .triggers
        case "logical": configuration.changeFeed.captureSource = .logicalDecoding
        // No change feed and no capture at all: the write path alone.
        case "none": configuration.changeFeed.isEnabled = false
        default: break
        }
        return configuration
    }
}

/// The stacks' logger: silent unless `SKYROS_BENCH_LOG` names a swift-log level (`trace` … `critical`); then
/// lines at that level and above go to standard error (the report is on standard output). For finding out why a
/// phase passed its deadline.
let benchmarkLogger: Logger = {
    guard let name = ProcessInfo.processInfo.environment["SKYROS_BENCH_LOG"], let level = Logger.Level(rawValue: name) else {
        return Logger(label: "skyros-bench", factory: { _ in SwiftLogNoOpLogHandler() })
    }
    var logger = Logger(label: "skyros-bench", factory: { StreamLogHandler.standardError(label: $0) })
    logger.logLevel = level
    return logger
}()
