import Logging
import SkyrosPostgres

/// Runs one migration (up or down) and records it, in one transaction unless the file opted out.
struct MigrationRunner: Sendable {
    let history: MigrationHistory
    let configuration: SchemaMigrator.Configuration
    let logger: Logger

    /// Refuses, before anything runs, a transactional migration containing a statement that cannot run in a
    /// transaction.
    static func checkTransactional(
        _ migration: SchemaMigration, direction: MigrationDirection, serverVersion: Int
    ) throws {
        guard migration.isTransactional, let script = direction == .up ? migration.up : migration.down else {
            return
        }
        for statement in script.statements {
            if let reason = NonTransactionalStatement.reason(for: statement, serverVersion: serverVersion) {
                throw MigrationError(
                    kind: .nonTransactionalStatement,
                    message: "\(reason); migrations run in a transaction unless the file starts with "
                        + "`-- migrate:no-transaction` (add it as the first line and keep the other statements "
                        + "re-runnable)",
                    fileName: migration.fileName, line: statement.line, version: migration.version)
            }
        }
    }

    /// Runs `migration` in `direction` and updates the history; returns the time taken.
    func run(_ migration: SchemaMigration, direction: MigrationDirection, on connection: PGConnection) async throws
        -> Duration
    {
        guard let script = direction == .up ? migration.up : migration.down else {
            throw MigrationError(
                kind: .irreversible, message: "the migration has no -- migrate:down section",
                fileName: migration.fileName, version: migration.version)
        }
        let statements = script.statements
        let clock = ContinuousClock()
        var logger = self.logger
        logger[metadataKey: "skyros.migrations.file"] = "\(migration.fileName)"
        logger[metadataKey: "skyros.migrations.direction"] = "\(direction.rawValue)"
        logger.debug("running migration")

        if migration.isTransactional {
            return try await connection.withTransaction { connection in
                let start = clock.now
                try await self.applySettings(for: migration, local: true, on: connection)
                try await self.execute(statements, of: migration, on: connection)
                let elapsed = clock.now - start
                try await self.record(migration, direction: direction, elapsed: elapsed, on: connection)
                return elapsed
            }
        }
        // No transaction: each statement commits on its own, then the history row is written.
        let start = clock.now
        do {
            try await self.applySettings(for: migration, local: false, on: connection)
            try await self.execute(statements, of: migration, on: connection)
            let elapsed = clock.now - start
            try await self.record(migration, direction: direction, elapsed: elapsed, on: connection)
            await self.resetSettings(on: connection)
            return elapsed
        } catch {
            await self.resetSettings(on: connection)
            throw error
        }
    }

    private func execute(_ statements: [SQLStatement], of migration: SchemaMigration, on connection: PGConnection)
        async throws
    {
        for (index, statement) in statements.enumerated() {
            do {
                try await connection.execute(script: statement.text)
            } catch let error as PGError {
                let line = error.position.map { statement.line(ofPosition: $0) } ?? statement.line
                var message = error.message
                if !migration.isTransactional {
                    message += index == 0
                        ? " (no-transaction migration: nothing of it was applied)"
                        : " (no-transaction migration: the statements before this one stay applied and it is not "
                            + "recorded; make them re-runnable, e.g. IF NOT EXISTS, drop any INVALID index a failed "
                            + "CREATE INDEX CONCURRENTLY left, then run migrate again)"
                }
                throw MigrationError(
                    kind: .statementFailed, message: message, fileName: migration.fileName, line: line,
                    version: migration.version, underlying: error)
            }
        }
    }

    private func record(
        _ migration: SchemaMigration, direction: MigrationDirection, elapsed: Duration, on connection: PGConnection
    ) async throws {
        switch direction {
        case .up:
            try await self.history.insert(
                migration, executionTime: elapsed, appliedBy: self.configuration.appliedBy, on: connection)
        case .down:
            try await self.history.delete(version: migration.version, on: connection)
        }
    }

    /// `lock_timeout` / `statement_timeout`: the file's directive, else the migrator's default.
    private func applySettings(for migration: SchemaMigration, local: Bool, on connection: PGConnection) async throws {
        let settings: [(String, String, String?)] = [
            ("lock_timeout", "lock-timeout", migration.lockTimeout ?? self.configuration.lockTimeout),
            ("statement_timeout", "statement-timeout", migration.statementTimeout ?? self.configuration.statementTimeout),
        ]
        for (name, directive, value) in settings {
            guard let value else { continue }
            do {
                try await connection.query("SELECT set_config(\(name), \(value), \(local))")
            } catch let error as PGError {
                throw MigrationError(
                    kind: .invalidFile, message: "invalid \(directive) value \"\(value)\": \(error.message)",
                    fileName: migration.fileName, version: migration.version, underlying: error)
            }
        }
    }

    private func resetSettings(on connection: PGConnection) async {
        guard !(await connection.isInTransaction) else { return }
        _ = try? await connection.execute(script: "RESET lock_timeout; RESET statement_timeout")
    }
}
