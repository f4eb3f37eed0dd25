import Foundation
import SkyrosMigrations

/// The tool's terminal output: progress to stdout (flushed per line), errors to stderr.
enum Output {
    static func line(_ text: String) {
        print(text)
        fflush(nil)  // all C streams; `stdout` itself is not concurrency-safe to name
    }

    static func error(_ text: String, prefixed: Bool = true) {
        fflush(nil)  // all C streams; `stdout` itself is not concurrency-safe to name
        FileHandle.standardError.write(Data(((prefixed ? "migrate: error: " : "") + text + "\n").utf8))
    }

    static func flush() { fflush(nil) }

    /// `12.3 ms`, `1.25 s`.
    static func format(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        if seconds < 1 { return String(format: "%.1f ms", seconds * 1000) }
        return String(format: "%.2f s", seconds)
    }

    /// The progress callback: one line per migration.
    static func progress(_ event: MigrationEvent) {
        switch event {
        case .waitingForLock:
            line("Waiting for another migrator to finish…")
        case .lockAcquired(let waited):
            line("Lock acquired after \(format(waited)).")
        case .started:
            break
        case .finished(let step):
            let verb = step.direction == .up ? "Applied" : "Reverted"
            line("\(verb) \(step.migration.fileName) (\(format(step.duration)))")
        }
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
