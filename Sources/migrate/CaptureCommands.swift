import ArgumentParser
import SkyrosPostgres
import SkyrosSync

/// `migrate capture status|drop`: what Skyros's change capture has installed in a schema, and removing it.
struct Capture: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Inspect or remove Skyros's change capture (its functions, triggers and change log) in a schema.",
        subcommands: [CaptureStatus.self, CaptureDrop.self])
}

/// `migrate capture status [--json]`.
struct CaptureStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Print the installed capture version, the captured tables and the change log's size and age.")

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let schema = self.connection.schema
        let (status, logical) = try await self.connection.withConnection { connection in
            let log = ChangeLog(schema: schema)
            return (try await ChangeCapture(log: log).status(on: connection), try await LogicalCapture(log: log).status(on: connection))
        }
        let source: String? = logical.hasPublication || logical.slotExists ? "logical" : status.installedVersion == nil ? nil : "triggers"
        let tables = source == "logical" ? logical.tables : status.capturedTables
        if self.output.json {
            var document: [String: Any] = [
                "command": "capture status", "schema": status.schema, "source": JSONOutput.nullable(source),
                "version": JSONOutput.nullable(status.installedVersion), "tables": tables,
                "logEntries": JSONOutput.nullable(status.logEntries), "newestEntrySeconds": JSONOutput.nullable(status.newestEntryAge),
            ]
            if source == "logical" {
                document["slot"] = [
                    "name": logical.slot, "exists": logical.slotExists, "active": logical.slotActive,
                    "retainedBytes": JSONOutput.nullable(logical.retainedBytes), "confirmedFlushLSN": JSONOutput.nullable(logical.confirmedFlush),
                    "walStatus": JSONOutput.nullable(logical.walStatus),
                ]
            }
            JSONOutput.print(document)
            return
        }
        switch source {
        case nil:
            Output.line("No change capture in schema \(status.schema).")
            return
        case "logical":
            Output.line("Change capture (logical decoding) in schema \(status.schema): publication and slot \(logical.slot).")
            if logical.walStatus == "lost" {
                Output.line(
                    "Slot: lost (PostgreSQL removed WAL it had not relayed, past max_slot_wal_keep_size); the next stack to relay "
                        + "creates it again and every stack drops its cached rows of the captured tables.")
            } else if logical.slotExists {
                let retained = logical.retainedBytes.map { "\($0 / 1024) KiB of WAL retained" } ?? "no WAL retained"
                Output.line(
                    "Slot: \(logical.slotActive ? "relayed by a stack" : "no stack relays it"), \(retained), "
                        + "confirmed through \(logical.confirmedFlush ?? "-").")
            } else {
                Output.line("Slot: missing (a stack creates it when it starts).")
            }
        default:
            Output.line("Change capture (triggers) version \(status.installedVersion ?? 0) in schema \(status.schema).")
        }
        Output.line("Captured tables (\(tables.count)): \(tables.joined(separator: ", "))")
        if let entries = status.logEntries {
            let age = status.newestEntryAge.map { ", newest committed \(Output.format(.milliseconds(Int64($0 * 1000)))) ago" } ?? ""
            Output.line("Change log: \(entries) entries\(age).")
        }
    }
}

/// `migrate capture drop [--include-log]`.
struct CaptureDrop: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "drop",
        abstract: "Remove the schema's change capture: its replication slot and publication, or its functions and triggers "
            + "(and the change log with --include-log).",
        discussion: """
            Other writers' statements run as before, and a dropped slot stops holding WAL. Stop the stacks on the \
            schema first: a running stack no longer learns of other writers' changes, and a stack installs the \
            capture again when it starts.
            """)

    @OptionGroup var connection: ConnectionOptions

    @Flag(name: .customLong("include-log"), help: "Also drop the change log and its state row.")
    var includeLog = false

    func run() async throws {
        let schema = self.connection.schema
        let (dropped, slot) = try await self.connection.withConnection { connection in
            let log = ChangeLog(schema: schema)
            let logical = LogicalCapture(log: log)
            let status = try await logical.status(on: connection)
            if status.hasPublication || status.slotExists { try await logical.drop(includingLog: false, on: connection) }
            let tables = try await ChangeCapture(log: log).drop(includingLog: self.includeLog, on: connection)
            return (status.hasPublication || status.slotExists ? status.tables : tables, status.slotExists ? status.slot : nil)
        }
        Output.line(
            "Dropped change capture from \(dropped.count) table(s) in schema \(schema)"
                + (slot.map { " (replication slot and publication \($0))" } ?? "")
                + (self.includeLog ? ", and the change log." : "."))
    }
}
