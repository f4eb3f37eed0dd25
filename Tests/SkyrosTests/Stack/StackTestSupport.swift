import Foundation
import Skyros
import SkyrosMigrations
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// The context suite's entity.
struct StackNote: Entity, Equatable, Hashable {
    var id: Int
    var title: String
    var rank: Int
    var tag: String?

    static let tableName = "stack_notes"
    static let columns: [EntityColumn<StackNote>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.rank, "rank"), EntityColumn(\.tag, "tag"),
    ]
    static let defaultSort = [SortDescriptor(\StackNote.rank)]
}

/// An entity with a version column (an outside write that does not bump it is not a conflict).
struct StackCounter: Entity, Equatable {
    var id: String
    var name: String
    var note: String

    static let tableName = "stack_counters"
    static let columns: [EntityColumn<StackCounter>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.note, "note"),
    ]
    static let versionColumn: String? = "row_version"
}

/// The stores the context suite runs on.
enum StackKind: String, Sendable, CaseIterable, CustomTestStringConvertible {
    case inMemory, postgres
    var testDescription: String { self.rawValue }
}

enum StackTestServer {
    static let migrationSQL = """
        -- migrate:up
        CREATE TABLE stack_notes (id bigint PRIMARY KEY, title text NOT NULL, rank integer NOT NULL, tag text);
        CREATE TABLE stack_counters (id text PRIMARY KEY, name text NOT NULL, note text NOT NULL,
                                     row_version bigint NOT NULL DEFAULT 1);
        """

    static func uniqueSchemaName() -> String { "stack \"ctx\" \(UUID().uuidString.prefix(8).lowercased())" }

    /// A temporary directory holding the given migration files; removed after `body`.
    static func withMigrations<R>(_ files: [String: String], _ body: (URL) async throws -> R) async throws -> R {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("skyros-stack-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for (name, text) in files {
            try text.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        return try await body(directory)
    }

    /// Runs `body` with a fresh stack of `kind` (PostgreSQL: its own schema, migrated, dropped afterwards).
    /// `listening: false` disables the change feed (and so the capture): another writer's change then stays out
    /// of the stack's cache, so a test can make it hold a stale row on purpose.
    static func withStack<R>(
        _ kind: StackKind, cacheLimit: CacheLimit = .default, listening: Bool = true, _ body: (DataStack) async throws -> R
    ) async throws -> R {
        switch kind {
        case .inMemory:
            return try await withTestStack(DataStackConfiguration(store: .inMemory, cacheLimit: cacheLimit), on: .inMemory, body)
        case .postgres:
            return try await withQueueStack(
                {
                    $0.cacheLimit = cacheLimit
                    $0.changeFeed.isEnabled = listening
                }, body)
        }
    }

    /// Runs SQL in the stack's schema (PostgreSQL only).
    static func execute(_ stack: DataStack, _ sql: String) async throws {
        guard let store = stack.store as? PostgresStore else { return }
        try await store.pool.withConnection { connection in
            if let schema = store.schema { _ = try await connection.query("SELECT set_config('search_path', \(quoteIdentifier(schema)), false)") }
            _ = try await connection.execute(script: sql)
            _ = try await connection.execute(script: "RESET search_path")
        }
    }
}

func note(_ id: Int, rank: Int? = nil, tag: String? = nil) -> StackNote {
    StackNote(id: id, title: "note \(id)", rank: rank ?? id, tag: tag)
}

extension DataStack {
    /// One write that reads row `id` of `T` (it must exist), changes it with `change`, and updates it (guarded
    /// by the version read); `policy`: the write's merge policy (`nil`: the stack's).
    func edit<T: Entity>(
        _ type: T.Type, id: T.ID, durability: WriteDurability = .visible, policy: MergePolicy? = nil,
        _ change: @Sendable (inout T) throws -> Void
    ) async throws {
        let body: (DataContext) async throws -> Void = { context in
            var row = try #require(try await context.object(T.self, id: id))
            try change(&row)
            try await context.update(row)
        }
        if let policy {
            try await self.write(durability: durability, mergePolicy: policy, body)
        } else {
            try await self.write(durability: durability, body)
        }
    }

    /// ``edit(_:id:durability:policy:_:)`` for note `id`.
    func editNote(
        _ id: Int, durability: WriteDurability = .visible, policy: MergePolicy? = nil,
        _ change: @Sendable (inout StackNote) throws -> Void
    ) async throws {
        try await self.edit(StackNote.self, id: id, durability: durability, policy: policy, change)
    }
}
