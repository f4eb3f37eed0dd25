import ArgumentParser
import SkyrosPostgres
import SkyrosSync

/// `migrate capture-sql`: prints the SQL that installs Skyros's change capture on the given tables, for a DBA to
/// run with a role that owns them (the stacks install it themselves when their role may).
struct CaptureSQL: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "capture-sql",
        abstract: "Print the SQL that installs change capture (the change log and its triggers) on mapped tables.",
        discussion: """
            Every table a DataStack maps needs Skyros's capture triggers, so that every writer's changes reach \
            every stack. A stack installs them at start when its role may create triggers; otherwise a role that \
            owns the tables runs this SQL once (it is idempotent). The primary keys are read from the database.
            """)

    @OptionGroup var connection: ConnectionOptions

    // Positional: `--table` is the history table's option (ConnectionOptions).
    @Argument(help: "The mapped tables, in --schema.")
    var tables: [String] = []

    func validate() throws {
        guard !self.tables.isEmpty else { throw ValidationError("name at least one table") }
    }

    func run() async throws {
        let schema = self.connection.schema
        let sql = try await self.connection.withConnection { connection in
            let capture = ChangeCapture(log: ChangeLog(schema: schema))
            let inspection = try await capture.inspect(tables: self.tables, on: connection)
            if let missing = inspection.missingTables.sorted().first {
                throw ValidationError("table \(schema).\(missing) does not exist")
            }
            return try await capture.installSQL(inspection.tables, on: connection)
        }
        print(sql, terminator: "")
    }
}
