import Foundation
import SkyrosPostgres

/// A row of the history table: a migration recorded as applied, or the baseline.
public struct AppliedMigration: Sendable, Hashable {
    /// The version.
    public var version: Int64
    /// The description at the time it was applied.
    public var description: String
    /// The file name at the time it was applied.
    public var fileName: String
    /// The file's checksum when it was applied; `nil` for the baseline row.
    public var checksum: String?
    /// `true` for the row written by ``SchemaMigrator/baseline(version:description:on:)``.
    public var isBaseline: Bool
    /// When the migration committed.
    public var appliedAt: Date
    /// How long its statements took.
    public var executionTime: Duration
    /// Who applied it (`current_user` unless ``SchemaMigrator/Configuration/appliedBy`` was set).
    public var appliedBy: String
}

/// The history table (`skyros_schema_migrations` by default): one row per applied migration.
///
/// ```sql
/// version bigint PRIMARY KEY, description text, file_name text, checksum text, kind text,
/// applied_at timestamptz, execution_ms bigint, applied_by text,
/// repairs jsonb   -- [{old_checksum, new_checksum, repaired_at, repaired_by}]; added by the first repair
/// ```
///
/// Readers and writers name their columns, so a table with more columns than a build knows is fine: an older
/// build keeps reading and inserting after a newer one added `repairs`.
struct MigrationHistory: Sendable {
    let schema: String
    let table: String

    private var name: String { "\(quoteIdentifier(self.schema)).\(quoteIdentifier(self.table))" }

    /// Whether the table exists (without creating anything).
    func exists(on connection: PGConnection) async throws -> Bool {
        let rows = try await self.run(
            on: connection,
            """
            SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = \(self.schema) AND c.relname = \(self.table)
            """)
        return !rows.isEmpty
    }

    /// Creates the schema (if missing) and the table (if missing). Call with the migration lock held.
    func create(on connection: PGConnection) async throws {
        let schemaRows = try await self.run(
            on: connection, "SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = \(self.schema)")
        if schemaRows.isEmpty {
            do {
                try await connection.query("CREATE SCHEMA IF NOT EXISTS \(identifier: self.schema)")
            } catch let error as PGError where error.kind == .uniqueViolation {
                // A runner with another history table in the same schema created it at the same moment.
            } catch let error as PGError {
                throw self.failure("cannot create the schema \(self.schema)", error)
            }
        }
        if try await self.exists(on: connection) { return }
        try await self.run(
            on: connection,
            """
            CREATE TABLE IF NOT EXISTS \(unsafeRaw: self.name) (
                version bigint PRIMARY KEY,
                description text NOT NULL,
                file_name text NOT NULL,
                checksum text,
                kind text NOT NULL DEFAULT 'migration' CHECK (kind IN ('migration', 'baseline')),
                applied_at timestamptz NOT NULL DEFAULT clock_timestamp(),
                execution_ms bigint NOT NULL DEFAULT 0,
                applied_by text NOT NULL DEFAULT current_user,
                repairs jsonb NOT NULL DEFAULT '[]'::jsonb
            )
            """)
    }

    /// Adds the `repairs` column to a table an older build created; does nothing when it is there (checked
    /// first, so that the usual case takes no `ACCESS EXCLUSIVE` lock). Call with the migration lock held.
    func addRepairsColumn(on connection: PGConnection) async throws {
        let rows = try await self.run(
            on: connection,
            """
            SELECT 1 FROM pg_catalog.pg_attribute a
            JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
            JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = \(self.schema) AND c.relname = \(self.table) AND a.attname = 'repairs'
                AND NOT a.attisdropped
            """)
        guard rows.isEmpty else { return }
        // A constant default: no table rewrite (PostgreSQL 11+); IF NOT EXISTS keeps it idempotent.
        try await self.run(
            on: connection,
            "ALTER TABLE \(unsafeRaw: self.name) ADD COLUMN IF NOT EXISTS repairs jsonb NOT NULL DEFAULT '[]'::jsonb")
    }

    /// Replaces a row's checksum with the file's and appends the old and new checksums to its `repairs`.
    /// Only the row still holding `repair.oldChecksum` is changed.
    func recordRepair(_ repair: MigrationRepair, repairedBy: String?, on connection: PGConnection) async throws {
        let old = PGValue(type: .text, text: repair.oldChecksum)
        let by = PGValue(type: .text, text: repairedBy)
        try await self.run(
            on: connection,
            """
            UPDATE \(unsafeRaw: self.name)
            SET checksum = \(repair.newChecksum),
                repairs = repairs || jsonb_build_array(jsonb_build_object(
                    'old_checksum', \(old)::text, 'new_checksum', \(repair.newChecksum)::text,
                    'repaired_at', clock_timestamp(), 'repaired_by', COALESCE(\(by)::text, current_user)))
            WHERE version = \(repair.version) AND checksum IS NOT DISTINCT FROM \(old)::text
            """)
    }

    /// The rows, by version; empty when the table does not exist.
    func read(on connection: PGConnection) async throws -> [AppliedMigration] {
        guard try await self.exists(on: connection) else { return [] }
        let rows = try await self.run(
            on: connection,
            """
            SELECT version, description, file_name, checksum, kind, applied_at, execution_ms, applied_by
            FROM \(unsafeRaw: self.name) ORDER BY version
            """)
        do {
            return try rows.map { row in
                AppliedMigration(
                    version: try row.decode(Int64.self, at: 0),
                    description: try row.decode(String.self, at: 1),
                    fileName: try row.decode(String.self, at: 2),
                    checksum: try row.decode(String?.self, at: 3),
                    isBaseline: try row.decode(String.self, at: 4) == "baseline",
                    appliedAt: try row.decode(Date.self, at: 5),
                    executionTime: .milliseconds(try row.decode(Int64.self, at: 6)),
                    appliedBy: try row.decode(String.self, at: 7))
            }
        } catch let error as PGError {
            throw self.failure("cannot read \(self.schema).\(self.table)", error)
        }
    }

    /// Records an applied migration (inside the migration's transaction, when it has one).
    func insert(_ migration: SchemaMigration, executionTime: Duration, appliedBy: String?, on connection: PGConnection)
        async throws
    {
        let milliseconds = Int64(executionTime.components.seconds * 1000)
            + Int64(executionTime.components.attoseconds / 1_000_000_000_000_000)
        try await self.run(
            on: connection,
            """
            INSERT INTO \(unsafeRaw: self.name)
                (version, description, file_name, checksum, kind, execution_ms, applied_by)
            VALUES (\(migration.version), \(migration.description), \(migration.fileName), \(migration.checksum),
                'migration', \(milliseconds), COALESCE(\(PGValue(type: .text, text: appliedBy)), current_user))
            """)
    }

    /// Records the baseline row.
    func insertBaseline(version: Int64, description: String, appliedBy: String?, on connection: PGConnection)
        async throws
    {
        try await self.run(
            on: connection,
            """
            INSERT INTO \(unsafeRaw: self.name) (version, description, file_name, checksum, kind, applied_by)
            VALUES (\(version), \(description), '', NULL, 'baseline', COALESCE(\(PGValue(type: .text, text: appliedBy)), current_user))
            """)
    }

    /// Removes the row of a rolled-back migration.
    func delete(version: Int64, on connection: PGConnection) async throws {
        try await self.run(on: connection, "DELETE FROM \(unsafeRaw: self.name) WHERE version = \(version)")
    }

    @discardableResult
    private func run(on connection: PGConnection, _ query: PGQuery) async throws -> PGRows {
        do {
            return try await connection.query(query)
        } catch let error as PGError {
            throw self.failure("history table \(self.schema).\(self.table)", error)
        }
    }

    private func failure(_ message: String, _ error: PGError) -> MigrationError {
        MigrationError(kind: .history, message: "\(message): \(error.message)", underlying: error)
    }
}
