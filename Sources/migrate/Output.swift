import Foundation
import SkyrosMigrations
import Synchronization

/// The tool's terminal output: results to stdout (flushed per line), errors, notes and live progress to stderr.
enum Output {
    static func line(_ text: String) {
        print(text)
        fflush(nil)  // all C streams; `stdout` itself is not concurrency-safe to name
    }

    /// A result line: stdout, or stderr when stdout carries the JSON document.
    static func result(_ text: String, json: Bool) {
        if json { self.stderr(text + "\n") } else { self.line(text) }
    }

    static func error(_ text: String, prefixed: Bool = true) {
        self.stderr((prefixed ? "migrate: error: " : "") + text + "\n")
    }

    /// A diagnostic line on stderr (`migrate: …`), e.g. each attempt while waiting for the database.
    static func note(_ text: String) {
        self.stderr("migrate: " + text + "\n")
    }

    static func stderr(_ text: String) {
        fflush(nil)  // keep stdout's earlier lines ahead of this one on a shared terminal
        FileHandle.standardError.write(Data(text.utf8))
    }

    static func flush() { fflush(nil) }

    /// `12.3 ms`, `1.25 s`.
    static func format(_ duration: Duration) -> String {
        let seconds = self.seconds(duration)
        if seconds < 1 { return String(format: "%.1f ms", seconds * 1000) }
        return String(format: "%.2f s", seconds)
    }

    /// `8 s`, `2 min 05 s`: elapsed time while a migration runs.
    static func elapsed(_ duration: Duration) -> String {
        let whole = Int(self.seconds(duration))
        return whole < 60 ? "\(whole) s" : String(format: "%d min %02d s", whole / 60, whole % 60)
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// The SQL a dry run would execute.
    static func dryRun(_ report: MigrationReport) {
        let verb = report.direction == .up ? "apply" : "revert"
        if report.planned.isEmpty {
            line("Dry run: nothing to \(verb); nothing was changed.")
            return
        }
        line("Dry run: would \(verb) \(report.planned.count) migration(s); nothing was changed.")
        for migration in report.planned {
            guard let script = report.direction == .up ? migration.up : migration.down else { continue }
            let mode = migration.isTransactional ? "in a transaction" : "without a transaction"
            line("")
            line("-- \(migration.fileName) (\(report.direction.rawValue), \(mode))")
            line(script.sql.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    /// A fixed-width table.
    static func table(_ header: [String], _ rows: [[String]]) {
        var widths = header.map(\.count)
        for row in rows {
            for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
        }
        func render(_ cells: [String]) -> String {
            cells.enumerated().map { index, cell in
                index == cells.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }
        line(render(header))
        line(render(widths.map { String(repeating: "-", count: $0) }))
        rows.forEach { line(render($0)) }
    }

    static func timestamp(_ date: Date?) -> String {
        guard let date else { return "-" }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss 'UTC'"
        return formatter.string(from: date)
    }
}

/// Reports the migrator's events: a line when each migration starts and, while it runs, its elapsed time every
/// ``interval`` on stderr. On a terminal the running line is rewritten in place; elsewhere (CI logs, pipes)
/// each report is a plain line of its own. "Applied …" lines are results: stdout (stderr under `--json`).
final class ProgressReporter: Sendable {
    /// How often a running migration reports its elapsed time.
    static let interval = Duration.seconds(5)

    private struct State: Sendable {
        /// Counts started migrations: a tick of an earlier migration prints nothing.
        var generation = 0
        var ticker: Task<Void, Never>?
        /// A terminal line without its newline yet (being rewritten in place).
        var lineOpen = false
    }

    private let json: Bool
    private let isTerminal: Bool
    private let state = Mutex(State())

    init(json: Bool) {
        self.json = json
        self.isTerminal = isatty(STDERR_FILENO) == 1
    }

    /// The migrator's progress callback.
    func handle(_ event: MigrationEvent) {
        switch event {
        case .waitingForLock:
            Output.result("Waiting for another migrator to finish…", json: self.json)
        case .lockAcquired(let waited):
            Output.result("Lock acquired after \(Output.format(waited)).", json: self.json)
        case .started(let migration, let direction):
            self.started(migration.fileName, verb: direction == .up ? "Applying" : "Reverting")
        case .finished(let step):
            self.stopTicking()
            let verb = step.direction == .up ? "Applied" : "Reverted"
            Output.result("\(verb) \(step.migration.fileName) (\(Output.format(step.duration)))", json: self.json)
        }
    }

    /// Runs `body` (a migration run reporting to this), then ends the running line and its ticker, whether the
    /// run finished or failed.
    func ticking<R>(_ body: () async throws -> R) async throws -> R {
        defer { self.stopTicking() }
        return try await body()
    }

    /// Ends the running line, if any, and stops its ticker (the run finished or failed).
    private func stopTicking() {
        self.state.withLock { state in
            state.generation += 1
            state.ticker?.cancel()
            state.ticker = nil
            if state.lineOpen {
                Output.stderr("\r\u{1B}[K")
                state.lineOpen = false
            }
        }
    }

    private func started(_ file: String, verb: String) {
        self.state.withLock { state in
            state.generation += 1
            state.ticker?.cancel()
            let generation = state.generation
            if self.isTerminal {
                Output.stderr("\r\u{1B}[K\(verb) \(file)…")
                state.lineOpen = true
            } else {
                Output.stderr("\(verb) \(file)…\n")
            }
            state.ticker = Task {
                let clock = ContinuousClock()
                let start = clock.now
                while true {
                    do { try await Task.sleep(for: Self.interval) } catch { return }
                    self.tick(generation, file: file, verb: verb, elapsed: clock.now - start)
                }
            }
        }
    }

    private func tick(_ generation: Int, file: String, verb: String, elapsed: Duration) {
        self.state.withLock { state in
            guard state.generation == generation else { return }
            if self.isTerminal {
                Output.stderr("\r\u{1B}[K\(verb) \(file)… \(Output.elapsed(elapsed))")
            } else {
                Output.stderr("  \(file): still running, \(Output.elapsed(elapsed)) elapsed\n")
            }
        }
    }
}
