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
        let status = try await self.connection.withConnection { connection in
            try await ChangeCapture(log: ChangeLog(schema: schema)).status(on: connection)
        }
        if self.output.json {
            JSONOutput.print([
                "command": "capture status", "schema": status.schema,
                "source": JSONOutput.nullable(status.installedVersion == nil ? nil : "triggers"),
                "version": JSONOutput.nullable(status.installedVersion), "tables": status.capturedTables,
                "logEntries": JSONOutput.nullable(status.logEntries), "newestEntrySeconds": JSONOutput.nullable(status.newestEntryAge),
            ])
            return
        }
        guard let version = status.installedVersion else {
            Output.line("No change capture in schema \(status.schema).")
            return
        }
        Output.line("Change capture (triggers) version \(version) in schema \(status.schema).")
        Output.line("Captured tables (\(status.capturedTables.count)): \(status.capturedTables.joined(separator: ", "))")
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
        abstract: "Remove the capture's functions and every capture trigger in the schema (and the change log with --include-log).",
        discussion: """
            Other writers' statements run as before. Stop the stacks on the schema first: a running stack no longer \
            learns of other writers' changes, and a stack installs the capture again when it starts.
            """)

    @OptionGroup var connection: ConnectionOptions

    @Flag(name: .customLong("include-log"), help: "Also drop the change log and its state row.")
    var includeLog = false

    func run() async throws {
        let schema = self.connection.schema
        let dropped = try await self.connection.withConnection { connection in
            try await ChangeCapture(log: ChangeLog(schema: schema)).drop(includingLog: self.includeLog, on: connection)
        }
        Output.line(
            "Dropped change capture from \(dropped.count) table(s) in schema \(schema)"
                + (self.includeLog ? ", and the change log." : "."))
    }
}
