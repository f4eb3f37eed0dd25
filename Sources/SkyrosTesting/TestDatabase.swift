import Foundation
import Logging
import Skyros
import SkyrosMigrations
import SkyrosPostgres

/// A PostgreSQL database that tests share, each test in a schema of its own: ``withSchema(prefix:migrations:_:)``
/// creates a uniquely named schema, applies the app's migrations into it, runs the test, and drops the schema
/// (with the logical-decoding slot and publication a stack may have installed for it) whether the test returned
/// or threw. Tests running in parallel never see each other's rows, and nothing is left behind.
///
/// ```swift
/// func addingAnAuthor() async throws {
///     guard let database = try TestDatabase.fromEnvironment() else { return }   // DATABASE_URL unset: skip
///     try await database.withSchema(migrations: .directory(path: "migrations")) { schema in
///         let stack = try await DataStack.start(schema.stackConfiguration(
///             DataStackConfiguration(store: .inMemory, entities: [Author.self])))
///         try await stack.write(durability: .committed) { try $0.insert(Author(id: UUID(), name: "Ada")) }
///         await stack.shutdown()
///     }
/// }
/// ```
///
/// ``withStack(_:prefix:logger:_:)`` does the same and also starts (and shuts down) the stack; see
/// ``TestStore`` to run one test body on PostgreSQL and in memory.
///
/// ## Topics
/// - ``init(url:logger:)``
/// - ``init(configuration:logger:)``
/// - ``fromEnvironment(_:logger:)``
/// - ``withSchema(prefix:migrations:_:)``
/// - ``withStack(_:prefix:logger:_:)``
/// - ``createSchema(prefix:migrations:)``
/// - ``dropSchema(_:)``
/// - ``schemaNames(prefix:)``
/// - ``TestSchema``
/// - ``TestSchemaError``
public struct TestDatabase: Sendable {
    /// Where the database is.
    public let configuration: PGConfiguration
    /// Receives the kit's own records (schemas created and dropped, the migrator's); a no-op logger by default.
    public var logger: Logger

    /// A database at `url` (`postgres://user:password@host:port/database`).
    ///
    /// ```swift
    /// let database = try TestDatabase(url: "postgres://postgres@localhost:5432/app_test")
    /// ```
    /// - Parameters:
    ///   - url: the database's URL.
    ///   - logger: receives the kit's records.
    /// - Throws: `PGError` when the URL cannot be parsed.
    public init(url: String, logger: Logger = TestDatabase.noOpLogger) throws {
        self.init(configuration: try PGConfiguration(url: url), logger: logger)
    }

    /// A database at `configuration`.
    ///
    /// ```swift
    /// let database = TestDatabase(configuration: try PGConfiguration(url: "postgres://postgres@localhost/app_test"))
    /// ```
    /// - Parameters:
    ///   - configuration: the database's connection configuration.
    ///   - logger: receives the kit's records.
    public init(configuration: PGConfiguration, logger: Logger = TestDatabase.noOpLogger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// The database whose URL is in the environment variable `name`, or `nil` when it is unset or empty (so a
    /// test can skip, or run on ``TestStore/inMemory`` only).
    ///
    /// ```swift
    /// let stores = [TestStore.inMemory] + (try TestDatabase.fromEnvironment().map { [.postgres($0)] } ?? [])
    /// ```
    /// - Parameters:
    ///   - name: the variable (`DATABASE_URL` by default).
    ///   - logger: receives the kit's records.
    /// - Returns: the database, or `nil`.
    /// - Throws: `PGError` when the URL cannot be parsed.
    public static func fromEnvironment(
        _ name: String = "DATABASE_URL", logger: Logger = TestDatabase.noOpLogger
    ) throws -> TestDatabase? {
        guard let url = ProcessInfo.processInfo.environment[name], !url.isEmpty else { return nil }
        return try TestDatabase(url: url, logger: logger)
    }

    /// The default logger: records nothing.
    public static let noOpLogger = Logger(label: "skyros.testing", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A schema name no other test uses: `prefix`, an underscore and 8 random hexadecimal digits.
    package static func uniqueSchemaName(_ prefix: String) -> String {
        "\(prefix)_\(UUID().uuidString.prefix(8).lowercased())"
    }

    /// Creates a uniquely named schema and applies `migrations` into it. Pair it with ``dropSchema(_:)``;
    /// prefer ``withSchema(prefix:migrations:_:)``, which drops it for you.
    ///
    /// ```swift
    /// let orders = try await database.createSchema(prefix: "orders")
    /// // … test …
    /// try await database.dropSchema(orders.name)
    /// ```
    /// - Parameters:
    ///   - prefix: the start of the schema's name (letters, digits, underscores).
    ///   - migrations: the app's migrations, applied with their history table in the new schema; `nil` for
    ///     none.
    /// - Returns: the schema.
    /// - Throws: `PGError` when the server cannot be reached; `MigrationError` when a migration fails (the
    ///   schema is dropped again first).
    public func createSchema(prefix: String = "test", migrations: MigrationSource? = nil) async throws -> TestSchema {
        let name = Self.uniqueSchemaName(prefix)
        try await self.withConnection { connection in
            _ = try await connection.execute(script: "CREATE SCHEMA \(quoteIdentifier(name))")
        }
        self.logger.debug("test schema created", metadata: ["skyros.testing.schema": "\(name)"])
        let schema = TestSchema(name: name, database: self.configuration)
        guard let migrations else { return schema }
        do {
            try await SchemaMigrator(source: migrations, configuration: .init(schema: name), logger: self.logger)
                .migrate(database: self.configuration)
        } catch {
            try? await self.dropSchema(name)
            throw error
        }
        return schema
    }

    /// Drops schema `name` (`CASCADE`) and the logical-decoding capture a stack installed for it: the
    /// publications that name it or publish its tables, and their replication slots, which live outside the
    /// schema (a slot left behind keeps WAL for ever and takes one of the server's slots). A stack still
    /// streaming the slot is cut off; that is retried for up to 10 s. A schema that does not exist is no error.
    ///
    /// ```swift
    /// try await database.dropSchema("orders_1a2b3c4d")
    /// ```
    /// - Parameter name: the schema.
    /// - Throws: `PGError` when the server cannot be reached or the schema cannot be dropped;
    ///   ``TestSchemaError`` when a replication slot is still in use after 10 s.
    public func dropSchema(_ name: String) async throws {
        try await self.withConnection { connection in
            // The schema goes even when its capture could not be dropped; that error is thrown afterwards.
            let captureError: (any Error)?
            do {
                try await Self.dropLogicalCapture(schema: name, on: connection)
                captureError = nil
            } catch {
                captureError = error
            }
            _ = try await connection.execute(script: "DROP SCHEMA IF EXISTS \(quoteIdentifier(name)) CASCADE")
            if let captureError { throw captureError }
        }
        self.logger.debug("test schema dropped", metadata: ["skyros.testing.schema": "\(name)"])
    }

    /// The names of this database's schemas that begin with `prefix`, in order: what tests using that prefix
    /// have not dropped (yet). The kit names a schema `prefix`, an underscore and 8 hexadecimal digits, so a
    /// prefix unique to a test run finds that run's schemas, and a check after the run's tests (zero left)
    /// proves each one was dropped.
    ///
    /// ```swift
    /// let run = "notes_\(UInt32.random(in: 0 ... .max))"
    /// let during = try await database.withSchema(prefix: run) { _ in try await database.schemaNames(prefix: run) }
    /// let after = try await database.schemaNames(prefix: run)
    /// precondition(during.count == 1 && after.isEmpty)
    /// ```
    /// - Parameter prefix: the start of the names (compared character for character: `_` and `%` are no
    ///   wildcards).
    /// - Returns: the schemas' names.
    /// - Throws: `PGError` when the server cannot be reached.
    public func schemaNames(prefix: String) async throws -> [String] {
        try await self.withConnection { connection in
            try await connection.query(
                "SELECT nspname::text FROM pg_namespace WHERE starts_with(nspname::text, \(prefix)) ORDER BY 1"
            ).map { try $0.decode(String.self, at: 0) }
        }
    }

    /// Runs `body` in a new schema (``createSchema(prefix:migrations:)``) and drops it afterwards
    /// (``dropSchema(_:)``), whether `body` returned or threw.
    ///
    /// ```swift
    /// try await database.withSchema(migrations: .directory(path: "migrations")) { schema in
    ///     let stack = try await DataStack.start(schema.stackConfiguration(DataStackConfiguration(store: .inMemory)))
    ///     await stack.shutdown()
    /// }
    /// ```
    /// - Parameters:
    ///   - prefix: the start of the schema's name.
    ///   - migrations: the app's migrations; `nil` for none.
    ///   - body: the test.
    /// - Returns: the body's value.
    /// - Throws: the body's error (the schema is dropped first); otherwise the errors of creating, migrating
    ///   or dropping the schema.
    public func withSchema<R>(
        prefix: String = "test", migrations: MigrationSource? = nil, _ body: (TestSchema) async throws -> R
    ) async throws -> R {
        let schema = try await self.createSchema(prefix: prefix, migrations: migrations)
        let result: R
        do {
            result = try await body(schema)
        } catch {
            try? await self.dropSchema(schema.name)
            throw error
        }
        try await self.dropSchema(schema.name)
        return result
    }

    /// Runs `body` with a stack started in a new schema: `configuration` (its entities, migrations, cache,
    /// commit queue…) with its store replaced by this database and the schema. The stack applies the
    /// migrations at start. Afterwards the stack is shut down and the schema dropped, whether `body` returned
    /// or threw. When this database is a transaction-mode pooler (PgBouncer), set the configuration's
    /// `DataStackConfiguration/directConnection`: the schema is then created and dropped over it, as
    /// the migrations are.
    ///
    /// ```swift
    /// func addingAnAuthor(database: TestDatabase) async throws {
    ///     let app = DataStackConfiguration(store: .inMemory, migrations: .directory(path: "migrations"),
    ///                                      entities: [Author.self])
    ///     try await database.withStack(app) { stack in
    ///         try await stack.write(durability: .committed) { try $0.insert(Author(id: UUID(), name: "Ada")) }
    ///     }
    /// }
    /// ```
    /// - Parameters:
    ///   - configuration: the app's configuration; its `store` is replaced.
    ///   - prefix: the start of the schema's name.
    ///   - logger: the stack's logger.
    ///   - body: the test.
    /// - Returns: the body's value.
    /// - Throws: the body's error, or the errors of `DataStack/start(_:logger:)` and of the schema's creation
    ///   and drop.
    public func withStack<R>(
        _ configuration: DataStackConfiguration, prefix: String = "test", logger: Logger = TestDatabase.noOpLogger,
        _ body: (DataStack) async throws -> R
    ) async throws -> R {
        // The schema's DDL needs a session of its own, which a transaction-mode pooler does not give: when the
        // stack names a direct connection for its migrations, the schema is made and dropped there too.
        let sessions = configuration.directConnection.map { TestDatabase(configuration: $0, logger: self.logger) } ?? self
        return try await sessions.withSchema(prefix: prefix) { schema in
            var configuration = configuration
            configuration.store = .postgres(self.configuration, schema: schema.name)
            let stack = try await DataStack.start(configuration, logger: logger)
            let result: R
            do {
                result = try await body(stack)
            } catch {
                await stack.shutdown()
                throw error
            }
            await stack.shutdown()
            return result
        }
    }

    /// Runs `body` on a new connection and closes it, whatever `body` does.
    private func withConnection<R>(_ body: (PGConnection) async throws -> R) async throws -> R {
        let connection = try await PGConnection.connect(to: self.configuration, logger: self.logger)
        do {
            let result = try await body(connection)
            await connection.close()
            return result
        } catch {
            await connection.close()
            throw error
        }
    }

    /// The publications of `schema`'s capture: by their comment, or because they publish its tables. Read from
    /// the catalogs, not `pg_publication_tables`, whose function fails on a publication dropped meanwhile.
    package static func capturePublicationsSQL(schema: String) -> PGQuery {
        """
        SELECT p.pubname::text FROM pg_publication AS p
        WHERE obj_description(p.oid, 'pg_publication') = \("skyros change capture of schema " + schema)
           OR EXISTS (SELECT FROM pg_publication_rel AS r JOIN pg_class AS c ON c.oid = r.prrelid
                      JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE r.prpubid = p.oid AND n.nspname = \(schema))
        """
    }

    /// Drops the publications of `schema`'s capture and the replication slots named like them (a capture's slot
    /// and publication share their name). A stack still running may stream the slot again after its walsender
    /// is ended, so the slot is dropped in a loop: end the walsender, drop, for up to 10 s.
    package static func dropLogicalCapture(schema: String, on connection: PGConnection) async throws {
        let names = try await connection.query(Self.capturePublicationsSQL(schema: schema)).map { try $0.decode(String.self, at: 0) }
        for name in names {
            _ = try await connection.execute(script: "DROP PUBLICATION IF EXISTS \(quoteIdentifier(name))")
            let dropped = await eventually(within: .seconds(10), every: .milliseconds(20)) {
                _ = try? await connection.query(
                    "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = \(name) AND active_pid IS NOT NULL")
                _ = try? await connection.query(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = \(name) AND NOT active")
                return (try? await connection.query("SELECT count(*)::int FROM pg_replication_slots WHERE slot_name = \(name)")
                    .first?.decode(Int.self, at: 0)) == 0
            }
            if !dropped { throw TestSchemaError(schema: schema, slot: name) }
        }
    }
}

/// One test's schema, made by ``TestDatabase/withSchema(prefix:migrations:_:)``.
///
/// ```swift
/// try await database.withSchema { schema in
///     var configuration = schema.stackConfiguration(DataStackConfiguration(store: .inMemory, entities: [Author.self]))
///     configuration.defaultDurability = .committed
///     let stack = try await DataStack.start(configuration)
///     await stack.shutdown()
/// }
/// ```
public struct TestSchema: Sendable, Hashable {
    /// The schema's name (unquoted).
    public let name: String
    /// The database it is in.
    public let database: PGConfiguration

    /// `configuration` with its store moved to this schema: `.postgres(database, schema: name)`. Everything
    /// else (entities, migrations, cache, commit queue, change feed) is kept.
    ///
    /// ```swift
    /// let configuration = schema.stackConfiguration(DataStackConfiguration(store: .inMemory, entities: [Author.self]))
    /// ```
    /// - Parameter configuration: the app's configuration.
    /// - Returns: the configuration for a stack in this schema.
    public func stackConfiguration(_ configuration: DataStackConfiguration) -> DataStackConfiguration {
        var configuration = configuration
        configuration.store = .postgres(self.database, schema: self.name)
        return configuration
    }
}

/// A test schema could not be dropped completely: a replication slot of its capture was still in use after
/// 10 s (a stack of the test still streams it: shut the test's stacks down before the schema is dropped).
///
/// ```swift
/// do {
///     try await database.dropSchema("orders_1a2b3c4d")
/// } catch let error as TestSchemaError {
///     print(error.description)
/// }
/// ```
public struct TestSchemaError: Error, Sendable, CustomStringConvertible {
    /// The schema.
    public let schema: String
    /// The replication slot that could not be dropped.
    public let slot: String

    /// What was left behind.
    public var description: String {
        "the replication slot \(self.slot) of schema \(self.schema) could not be dropped within 10 s"
    }
}

/// Runs `body` in a new schema of the database at `url`, with `migrations` applied, and drops the schema
/// afterwards, whether `body` returned or threw (``TestDatabase/withSchema(prefix:migrations:_:)``).
///
/// ```swift
/// try await withTestSchema(url: "postgres://postgres@localhost/app_test", migrations: .directory(path: "migrations")) { schema in
///     let stack = try await DataStack.start(schema.stackConfiguration(DataStackConfiguration(store: .inMemory)))
///     await stack.shutdown()
/// }
/// ```
/// - Parameters:
///   - url: the database's URL.
///   - migrations: the app's migrations; `nil` for none.
///   - prefix: the start of the schema's name.
///   - body: the test.
/// - Returns: the body's value.
/// - Throws: the body's error, or the errors of creating, migrating or dropping the schema.
public func withTestSchema<R>(
    url: String, migrations: MigrationSource? = nil, prefix: String = "test", _ body: (TestSchema) async throws -> R
) async throws -> R {
    try await TestDatabase(url: url).withSchema(prefix: prefix, migrations: migrations, body)
}
