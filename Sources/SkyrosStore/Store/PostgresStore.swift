import Foundation
import Logging
import SkyrosPostgres
import Synchronization

/// The PostgreSQL store: entities in tables reached through a `PGConnectionPool`.
///
/// With `schema:` every table is qualified with that schema (`"tenant_a"."users"`), which sandboxes a store
/// the way a store directory sandboxes a Core Data stack: parallel tests and tenants never collide.
/// Versions are the entity's ``Entity/versionColumn`` (1 on insert, +1 on every write) or PostgreSQL's `xmin`.
///
/// ```swift
/// let pool = PGConnectionPool(postgres: try PGConfiguration(url: url))
/// let store = PostgresStore(pool: pool, schema: "tenant_a")
/// try await store.createSchemaIfNeeded()
/// try await store.validate([User.self, Post.self])         // fails on mismatched columns or types
/// let result = try await store.apply(changes)              // one transaction
/// ```
public final class PostgresStore: Store, ColumnDoorKeeping {
    /// The column definitions read by ``validate(_:)``, which writes are checked against before they are queued.
    package let columnDoor = ColumnDoor()
    /// The pool every operation leases from.
    public let pool: PGConnectionPool
    /// The sandbox schema, or `nil` for unqualified names (the connection's `search_path`).
    public let schema: String?
    /// Bulk inserts of at least this many rows use `COPY`; smaller ones use multi-row `INSERT`.
    public let copyThreshold: Int
    private let logger: Logger
    private let generationCounter = Atomic<Int>(0)
    /// How many group commits took each path.
    package let groupCommitPaths = Locked(GroupCommitPaths())
    /// Tests only: runs once, after the next group has committed, in place of returning its result (throwing
    /// makes the commit look lost with its reply, as when the connection breaks then).
    package let afterNextGroupCommitted = Locked<(@Sendable () async throws -> Void)?>(nil)

    /// Runs (and clears) ``afterNextGroupCommitted``, if set.
    func runFaultAfterCommit() async throws {
        if let fault = self.afterNextGroupCommitted.withLock({ fault in defer { fault = nil }; return fault }) { try await fault() }
    }

    /// Creates a store over a pool.
    /// - Parameters:
    ///   - pool: the connection pool.
    ///   - schema: a schema to qualify every table with (create it with ``createSchemaIfNeeded()``).
    ///   - copyThreshold: the batch size from which ``ChangeSet/bulkInsert(_:)`` uses `COPY`.
    ///   - logger: debug-level logging of writes; a no-op logger by default.
    public init(
        pool: PGConnectionPool, schema: String? = nil, copyThreshold: Int = 500,
        logger: Logger = Logger(label: "skyros.store", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.pool = pool
        self.schema = schema
        self.copyThreshold = max(1, copyThreshold)
        self.logger = logger
    }

    public var generation: Int { self.generationCounter.load(ordering: .acquiring) }

    /// Creates the sandbox schema if it does not exist (no-op without a schema).
    public func createSchemaIfNeeded() async throws {
        guard let schema else { return }
        try await self.pool.withConnection { connection in
            _ = try await connection.query("CREATE SCHEMA IF NOT EXISTS \(identifier: schema)")
        }
    }

    /// Checks entity types against the tables in this store's schema (see ``EntitySchema``).
    ///
    /// ```swift
    /// try await store.validate([User.self, Post.self])
    /// ```
    /// - Throws: ``SchemaMismatchError`` listing every issue (entity, column, Swift and PostgreSQL types).
    /// The column definitions read here are kept: a stack on this store checks each written value against its
    /// column before the write is queued (``ColumnValueError``).
    public func validate(_ types: [any Entity.Type]) async throws {
        let tables = try await self.pool.withConnection { connection in
            try await EntitySchema.validateAndDescribe(types, on: connection, schema: self.schema)
        }
        for (table, columns) in tables { self.columnDoor.define(table: table, columns: columns) }
    }

    // MARK: Reads

    public func fetch<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> [Versioned<T>] {
        try await self.pool.withConnection { try await self.fetch(descriptor, on: $0) }
    }

    /// ``fetch(_:)`` on a connection the caller holds (a prefetch runs every level on one).
    package func fetch<T: Entity>(_ descriptor: FetchDescriptor<T>, on connection: PGConnection) async throws -> [Versioned<T>] {
        let plan = try EntityPlan<T>.shared
        let query = try SQLQueryBuilder.select(descriptor, schema: self.schema, includeVersion: true)
        return try RowDecoder(plan: plan).decode(try await connection.query(query))
    }

    public func count<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> Int {
        let query = try SQLQueryBuilder.count(descriptor, schema: self.schema)
        let rows = try await self.pool.withConnection { try await $0.query(query) }
        guard let row = rows.first else { return 0 }
        return try row.decode(Int.self, at: 0)
    }

    public func object<T: Entity>(_ type: T.Type, id: T.ID) async throws -> Versioned<T>? {
        let plan = try EntityPlan<T>.shared
        let query = try self.selectByID(plan, id: plan.idValue(id))
        let rows = try await self.pool.withConnection { try await $0.query(query) }
        return try RowDecoder(plan: plan).decode(rows).first
    }

    public func findOrCreate<T: Entity>(_ value: T) async throws -> (value: Versioned<T>, created: Bool) {
        try await self.findOrCreate(value, announcing: nil)
    }

    /// ``findOrCreate(_:)`` for a stack: with `hook` (its change feed), a row it creates is announced like a
    /// commit's — its change-log entry and hint written in the same transaction — so other processes' observers
    /// see it. A row found is read in one statement, outside a transaction; a row created takes one more round
    /// trip, a pipeline holding the insert and the announcement (the insert fails the pipeline when the row
    /// exists by then, so that nothing is announced: a third round trip reads it).
    package func findOrCreate<T: Entity>(
        _ value: T, announcing hook: (any CommitTransactionHook)?
    ) async throws -> (value: Versioned<T>, created: Bool) {
        let plan = try EntityPlan<T>.shared
        let values = try RowEncoder(plan: plan).encode(value)
        var insert = PostgresWriteContext.insertStatement(plan, schema: self.schema, rows: [values])
        insert.append(
            PGQuery(
                unsafeSQL: " ON CONFLICT (\(plan.quotedKeyColumns)) DO NOTHING RETURNING \(self.selectList(plan))"))
        let select = try self.selectByID(plan, id: plan.key(of: values))
        let decoder = RowDecoder(plan: plan)
        // The announcement, sent in one pipeline after an insert that must insert.
        let creation = RowChange(entity: plan.entityName, table: plan.tableName, id: plan.key(of: values), kind: .inserted, version: nil)
        let announcement = try? hook?.pipelinedStatement(announcing: [creation])
        // The row can vanish between the two statements (deleted concurrently): then insert again.
        for _ in 0..<3 {
            let (created, row) = try await self.pool.withConnection { connection -> (Bool, Versioned<T>?) in
                guard let hook else {
                    let inserted = try await connection.query(insert)
                    if !inserted.isEmpty { return (true, try decoder.decode(inserted).first) }
                    return (false, try decoder.decode(try await connection.query(select)).first)
                }
                if let found = try decoder.decode(try await connection.query(select)).first { return (false, found) }
                if let announcement {
                    let mustInsert = PGQuery(
                        unsafeSQL: "WITH skyros_insert AS (\(insert.sql)) SELECT skyros_insert.*, 1 / (SELECT count(*) FROM skyros_insert) "
                            + "AS skyros_inserted FROM (SELECT) AS skyros_one LEFT JOIN skyros_insert ON true",
                        binds: insert.binds)
                    do {
                        let rows = try await connection.pipeline([mustInsert, announcement])
                        return (true, try decoder.decode(rows[0]).first)
                    } catch let error as PGError where error.statementIndex == 0 && error.sqlState == .divisionByZero {
                        // Inserted by someone else since the select: nothing was written.
                        try? await connection.rollback()
                        return (false, try decoder.decode(try await connection.query(select)).first)
                    } catch {
                        try? await connection.rollback()
                        throw error
                    }
                }
                return try await connection.withTransaction { connection in
                    guard let inserted = try decoder.decode(try await connection.query(insert)).first else {
                        return (false, try decoder.decode(try await connection.query(select)).first)
                    }
                    let change = RowChange(
                        entity: plan.entityName, table: plan.tableName, id: plan.key(of: values), kind: .inserted,
                        version: inserted.version)
                    try await hook.willCommit(batch: [ChangeSetResult(operations: [[change]])], on: connection)
                    return (true, inserted)
                }
            }
            if let row { return (row, created) }
        }
        throw PGError(
            kind: .serializationFailure,
            message: "findOrCreate \(plan.entityName): the row was deleted concurrently three times in a row")
    }

    // MARK: Writes

    public func apply(_ changes: ChangeSet) async throws -> ChangeSetResult {
        try self.checkGeneration(changes)
        if changes.isEmpty { return ChangeSetResult(operations: []) }
        return try await self.pool.withTransaction { connection in
            try await self.apply(changes, on: connection)
        }
    }

    /// Runs a change set's statements on a connection inside the caller's transaction (for a commit queue that
    /// adds its own statements — change log, `pg_notify` — to the same transaction). Does not BEGIN or COMMIT.
    ///
    /// ```swift
    /// try await pool.withTransaction { connection in
    ///     let result = try await store.apply(changes, on: connection)
    ///     try await connection.query("SELECT pg_notify('skyros', \(payload))")
    /// }
    /// ```
    public func apply(_ changes: ChangeSet, on connection: PGConnection) async throws -> ChangeSetResult {
        try self.checkGeneration(changes)
        let context = PostgresWriteContext(connection: connection, schema: self.schema, copyThreshold: self.copyThreshold)
        var results: [[RowChange]] = []
        results.reserveCapacity(changes.operations.count)
        for operation in changes.operations {
            self.logger.debug("store write", metadata: ["skyros.store.operation": "\(operation)"])
            results.append(try await operation.change.run(on: context))
        }
        return ChangeSetResult(operations: results)
    }

    /// With a schema, drops it and creates it again, empty. Without one, empties the tables of the entities this
    /// store validated (`TRUNCATE … RESTART IDENTITY` in one statement), and nothing else of `current_schema()`:
    /// not other tables, not the migration history, not the change log. A table outside them whose foreign key
    /// references one of them makes it fail (`PGError` `.featureNotSupported`, SQLSTATE 0A000), with nothing deleted.
    public func destroy(confirm: DestroyConfirmation) async throws {
        try await self.pool.withTransaction { connection in
            if let schema = self.schema {
                _ = try await connection.execute(
                    script: "DROP SCHEMA IF EXISTS \(quoteIdentifier(schema)) CASCADE; CREATE SCHEMA \(quoteIdentifier(schema))")
            } else {
                let tables = self.columnDoor.tables
                guard !tables.isEmpty else { return }
                _ = try await connection.query(
                    PGQuery(unsafeSQL: "TRUNCATE \(tables.map(quoteIdentifier).joined(separator: ", ")) RESTART IDENTITY"))
            }
        }
        let generation = self.generationCounter.add(1, ordering: .acquiringAndReleasing).newValue
        self.logger.info(
            "store destroyed", metadata: ["skyros.store.schema": "\(self.schema ?? "current_schema()")", "skyros.store.generation": "\(generation)"])
    }

    // MARK: Helpers

    private func checkGeneration(_ changes: ChangeSet) throws {
        if let expected = changes.expectedGeneration, expected != self.generation {
            throw StoreError.storeDestroyed(generation: self.generation)
        }
    }

    private func selectList<T>(_ plan: EntityPlan<T>) -> String {
        "\(plan.quotedColumns), \(SQLQueryBuilder.versionSelection(plan.versionColumn)) AS \(quoteIdentifier(SQLQueryBuilder.versionAlias))"
    }

    /// The query reading row `id` with its version (``object(_:id:)``; a change feed's listener reads observed
    /// rows again with it).
    package func selectByID<T>(_ plan: EntityPlan<T>, id: PGValue) throws -> PGQuery {
        PGQuery(unsafeSQL: plan.selectByIDSQL(schema: self.schema), binds: try plan.keyBinds(id))
    }
}

/// Where a change set's operations run: a connection inside a transaction, and the store's schema.
struct PostgresWriteContext: Sendable {
    let connection: PGConnection
    let schema: String?
    let copyThreshold: Int

    /// Bind parameters per statement stay below PostgreSQL's limit of 65535.
    static let maximumBinds = 60_000

    /// `INSERT INTO t (columns[, version]) VALUES (…), (…)` with binds for every row (the columns the database
    /// sets, ``EntityPlan/readBackIndices``, left out).
    static func insertStatement<T>(_ plan: EntityPlan<T>, schema: String?, rows: [[PGValue]]) -> PGQuery {
        var sql = plan.insertPrefix(schema: schema)
        var binds: [PGValue] = []
        binds.reserveCapacity(rows.count * plan.insertedIndices.count)
        for (r, row) in rows.enumerated() {
            sql += r == 0 ? "(" : ", ("
            for (i, c) in plan.insertedIndices.enumerated() {
                binds.append(row[c])
                sql += i == 0 ? "$\(binds.count)" : ", $\(binds.count)"
            }
            if plan.versionColumn != nil { sql += ", 1" }
            sql += ")"
        }
        return PGQuery(unsafeSQL: sql, binds: binds)
    }
}

/// An entity operation as PostgreSQL runs it.
protocol PostgresOperation: Sendable {
    func run(on context: PostgresWriteContext) async throws -> [RowChange]
    /// The operation as one statement whose outcome its rows tell (for pipelined group commits), or `nil`
    /// when it needs a round trip of its own (version checks, COPY, follow-up reads).
    func pipelined(on context: PostgresWriteContext) throws -> PipelinedStatement?
    /// The operation as part of a group sent in one pipeline, or `nil` when it needs round trips of its own
    /// (COPY, a delete by predicate: rows known only after it ran).
    func groupOperation(schema: String?, copyThreshold: Int) throws -> GroupOperation?
}

extension EntityChange: PostgresOperation {
    func run(on context: PostgresWriteContext) async throws -> [RowChange] {
        let plan = try EntityPlan<T>.shared
        let table = plan.quotedTable(schema: context.schema)
        let version = plan.versionExpression
        let connection = context.connection
        func change(_ key: PGValue, _ kind: RowChange.Kind, _ version: Int64?) -> RowChange {
            RowChange(entity: plan.entityName, table: plan.tableName, id: key, kind: kind, version: version)
        }
        /// The current version of a row, or nil when it does not exist (after a guarded write matched nothing).
        func currentVersion(_ key: PGValue) async throws -> Int64? {
            let rows = try await connection.query(
                PGQuery(unsafeSQL: "SELECT \(version) FROM \(table) WHERE \(plan.keyCondition(first: 1))", binds: try plan.keyBinds(key)))
            return try rows.first?.decode(Int64.self, at: 0)
        }

        switch self.payload {
        case .insert:
            let statement = try self.pipelined(on: context)!
            return try statement.decode(try await connection.query(statement.query))

        case .bulkInsert(let values):
            if values.isEmpty { return [] }
            let encoder = RowEncoder(plan: plan)
            let encoded = try values.map(encoder.encode)
            return try await self.bulkInsert(encoded, plan: plan, context: context)

        case .update(let value, let columns, let expected):
            guard let (query, key, _, asWrittenColumn) = try Self.updateQuery(
                value, columns, expected: expected, resolution: self.resolution, schema: context.schema, encoded: self.encodedRows?.first)
            else {
                return []
            }
            let rows = try await connection.query(query)
            if let row = rows.first {
                var updated = change(key, .updated, try row.decode(Int64.self, at: 0))
                if let asWrittenColumn { updated.isStoredAsWritten = try row.decode(Bool?.self, at: asWrittenColumn) == true }
                if plan.hasReadBack { updated.readBack = plan.readBack(row, from: asWrittenColumn.map { $0 + 1 } ?? 1) }
                return [updated]
            }
            if case .skip = self.resolution, expected != nil { return [] }
            let actual = try await currentVersion(key)
            if case .compareColumns = self.resolution, actual != nil || expected != nil {
                throw StoreError.versionConflict(entity: plan.entityName, id: plan.describe(id: key), expected: expected ?? 0, actual: actual)
            }
            if let expected {
                throw StoreError.versionConflict(entity: plan.entityName, id: plan.describe(id: key), expected: expected, actual: actual)
            }
            throw StoreError.notFound(entity: plan.entityName, id: plan.describe(id: key))

        case .delete(let id, let expected):
            let (query, key) = try Self.deleteQuery(id, expected: expected, schema: context.schema)
            let rows = try await connection.query(query)
            if rows.affectedRows > 0 { return [change(key, .deleted, nil)] }
            guard let expected else { return [] }
            if case .skip = self.resolution { return [] }
            let actual = try await currentVersion(key)
            throw StoreError.versionConflict(entity: plan.entityName, id: plan.describe(id: key), expected: expected, actual: actual)

        case .upsert(let value):
            let (query, key) = try Self.upsertQuery(value, schema: context.schema)
            let rows = try await connection.query(query)
            guard let row = rows.first else { return [] }
            let inserted = try row.decode(Bool.self, at: 1)
            var upserted = change(key, inserted ? .inserted : .updated, try row.decode(Int64.self, at: 0))
            if plan.hasReadBack { upserted.readBack = plan.readBack(row, from: 2) }
            return [upserted]

        case .upsertOn(let value, let conflict):
            return try await self.upsert(value, onConflict: conflict, context: context)

        case .deleteWhere(let predicate):
            let query = try SQLQueryBuilder.delete(where: predicate, schema: context.schema)
            let rows = try await connection.query(query)
            return try rows.map { row in
                let id = try row.decode(T.ID.self, at: 0)
                return change(try plan.idValue(id), .deleted, nil)
            }

        case .updateWhere(let predicate, let assignments):
            let query = try SQLQueryBuilder.update(where: predicate, set: assignments, schema: context.schema)
            let rows = try await connection.query(query)
            return try rows.map { row in
                let id = try row.decode(T.ID.self, at: 0)
                return change(try plan.idValue(id), .updated, try row.decode(Int64.self, at: 1))
            }
        }
    }

    private func bulkInsert(
        _ encoded: [[PGValue]], plan: EntityPlan<T>, context: PostgresWriteContext
    ) async throws -> [RowChange] {
        let connection = context.connection
        let version = plan.versionExpression
        let ids = encoded.map(plan.key(of:))
        func changes(_ versions: [Int64]) -> [RowChange] {
            zip(ids, versions).map {
                RowChange(entity: plan.entityName, table: plan.tableName, id: $0, kind: .inserted, version: $1)
            }
        }
        if encoded.count >= context.copyThreshold {
            var columns = plan.insertedIndices.map { plan.columnNames[$0] }
            var rows = plan.hasReadBack ? encoded.map { row in plan.insertedIndices.map { row[$0] } } : encoded
            if let versionColumn = plan.versionColumn {
                columns.append(versionColumn)
                let one = PGValue(type: .int8, text: "1")
                for i in rows.indices { rows[i].append(one) }
            }
            try await connection.copyFrom(table: plan.table(schema: context.schema), columns: columns, rows: rows)
            if plan.versionColumn != nil { return changes(Array(repeating: 1, count: ids.count)) }
            // Every row copied by one (sub)transaction has the same xmin.
            let query = PGQuery(
                unsafeSQL: "SELECT \(version) FROM \(plan.quotedTable(schema: context.schema)) WHERE \(plan.keyCondition(first: 1))",
                binds: try plan.keyBinds(ids[0]))
            let xmin = try await connection.query(query).first?.decode(Int64.self, at: 0) ?? 0
            return changes(Array(repeating: xmin, count: ids.count))
        }
        // Multi-row INSERT in chunks under the bind limit; versions matched back by primary key.
        let chunkSize = max(1, PostgresWriteContext.maximumBinds / max(1, plan.columnNames.count))
        var versionByID: [PGValue: Int64] = [:]
        versionByID.reserveCapacity(encoded.count)
        var readBackByID: [PGValue: [PGValue]] = [:]
        var start = 0
        while start < encoded.count {
            let end = min(start + chunkSize, encoded.count)
            var query = PostgresWriteContext.insertStatement(plan, schema: context.schema, rows: Array(encoded[start..<end]))
            query.append(PGQuery(unsafeSQL: " RETURNING \(plan.keyExpression), \(version)\(plan.returningReadBack)"))
            for row in try await connection.query(query) {
                let id = try plan.idValue(try row.decode(T.ID.self, at: 0))
                versionByID[id] = try row.decode(Int64.self, at: 1)
                if plan.hasReadBack { readBackByID[id] = plan.readBack(row, from: 2) }
            }
            start = end
        }
        var inserted = changes(ids.map { versionByID[$0] ?? 0 })
        if plan.hasReadBack {
            for index in inserted.indices { inserted[index].readBack = readBackByID[inserted[index].id] }
        }
        return inserted
    }
}
