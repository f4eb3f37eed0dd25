import Foundation
import SkyrosMigrations
import SkyrosPostgres

/// The `--json` documents: one per run, on stdout, keys sorted. The fields are documented in the README
/// ("Machine-readable output") and only ever added to.
enum JSONOutput {
    static func print(_ document: [String: Any]) {
        let options: JSONSerialization.WritingOptions = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        guard let data = try? JSONSerialization.data(withJSONObject: document, options: options) else {
            Output.error("cannot encode the JSON output")
            return
        }
        Output.line(String(decoding: data, as: UTF8.self))
    }

    /// `migrate up|down [--dry-run] --json`.
    static func report(_ report: MigrationReport, connection: ConnectionOptions) -> [String: Any] {
        [
            "command": report.direction == .up ? "up" : "down",
            "schema": connection.schema,
            "table": connection.table,
            "dryRun": report.isDryRun,
            "lockWaitSeconds": Output.seconds(report.lockWait),
            "currentVersion": self.nullable(report.currentVersion),
            "planned": report.planned.map { migration -> [String: Any] in
                var entry: [String: Any] = [
                    "version": migration.version, "file": migration.fileName,
                    "description": migration.description, "transactional": migration.isTransactional,
                ]
                if report.isDryRun {
                    let script = report.direction == .up ? migration.up : migration.down
                    entry["sql"] = self.nullable(script?.sql.trimmingCharacters(in: .whitespacesAndNewlines))
                }
                return entry
            },
            "completed": report.completed.map { step -> [String: Any] in
                [
                    "version": step.migration.version, "file": step.migration.fileName,
                    "direction": step.direction.rawValue, "seconds": Output.seconds(step.duration),
                ]
            },
            "newerApplied": report.newerApplied.map(self.applied),
        ]
    }

    /// `migrate status --json`.
    static func status(_ statuses: [MigrationStatus], connection: ConnectionOptions, applied: Int, pending: Int)
        -> [String: Any]
    {
        [
            "command": "status",
            "schema": connection.schema,
            "table": connection.table,
            "currentVersion": self.nullable(
                statuses.filter { [.applied, .checksumMismatch, .newerThanFiles, .baseline].contains($0.state) }
                    .map(\.version).max()),
            "applied": applied,
            "pending": pending,
            "migrations": statuses.map { status -> [String: Any] in
                [
                    "version": status.version, "description": status.description, "file": status.fileName,
                    "appliedAt": self.nullable(status.appliedAt.map(self.iso8601)),
                    "state": self.identifier(status.state),
                ]
            },
        ]
    }

    /// `migrate verify --json`.
    static func verify(_ plan: MigrationPlan) -> [String: Any] {
        [
            "command": "verify",
            "ok": plan.issues.isEmpty,
            "files": plan.migrations.count,
            "issues": plan.issues.map { issue -> [String: Any] in
                [
                    "kind": self.identifier(issue.kind), "version": issue.version, "file": issue.fileName,
                    "message": issue.message,
                ]
            },
            "newerApplied": plan.newerApplied.map(self.applied),
        ]
    }

    /// `migrate repair --json`.
    static func repair(_ repairs: [MigrationRepair], repaired: Bool) -> [String: Any] {
        [
            "command": "repair",
            "repaired": repaired,
            "migrations": repairs.map { repair -> [String: Any] in
                [
                    "version": repair.version, "file": repair.fileName,
                    "oldChecksum": self.nullable(repair.oldChecksum), "newChecksum": repair.newChecksum,
                ]
            },
        ]
    }

    /// Any command's failure: the error's fields, and the exit code.
    static func failure(_ error: any Error, exitCode: Int32) -> [String: Any] {
        var detail: [String: Any] = ["message": "\(error)"]
        if let error = error as? MigrationError {
            detail["kind"] = error.kind.description
            detail["message"] = error.message
            detail["file"] = self.nullable(error.fileName)
            detail["line"] = self.nullable(error.line)
            detail["version"] = self.nullable(error.version)
            detail["sqlState"] = self.nullable(error.sqlState?.rawValue)
            detail["issues"] = error.issues.map { issue -> [String: Any] in
                [
                    "kind": self.identifier(issue.kind), "version": issue.version, "file": issue.fileName,
                    "message": issue.message,
                ]
            }
        } else if let error = error as? PGError {
            detail["kind"] = "\(error.kind)"
            detail["message"] = error.message
            detail["sqlState"] = self.nullable(error.sqlState?.rawValue)
        }
        return ["error": detail, "exitCode": exitCode]
    }

    private static func applied(_ row: AppliedMigration) -> [String: Any] {
        ["version": row.version, "file": row.fileName, "appliedAt": self.iso8601(row.appliedAt)]
    }

    /// Stable identifiers (the library's `rawValue`s are prose for the table).
    static func identifier(_ state: MigrationStatus.State) -> String {
        switch state {
        case .applied: "applied"
        case .pending: "pending"
        case .outOfOrder: "outOfOrder"
        case .checksumMismatch: "checksumMismatch"
        case .missingFile: "missingFile"
        case .newerThanFiles: "newerThanFiles"
        case .baseline: "baseline"
        case .belowBaseline: "belowBaseline"
        }
    }

    static func identifier(_ kind: MigrationIssue.Kind) -> String {
        switch kind {
        case .checksumMismatch: "checksumMismatch"
        case .missingFile: "missingFile"
        case .unknownAppliedVersion: "unknownAppliedVersion"
        case .outOfOrder: "outOfOrder"
        }
    }

    private static func iso8601(_ date: Date) -> String {
        date.formatted(.iso8601)
    }

    static func nullable(_ value: (any Sendable)?) -> Any { value ?? NSNull() }
}
