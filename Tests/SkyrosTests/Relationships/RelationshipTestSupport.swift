import Foundation
import Logging
import Skyros
import SkyrosPostgres
import SkyrosTestEntities
import SkyrosTestSupport
import SkyrosTesting
import Testing

/// A store that counts the fetches made through it (every other call is passed on as is).
final class FetchCountingStore: Store {
    let base: any Store
    private let fetches = Locked(0)

    init(_ base: any Store) { self.base = base }

    var fetchCount: Int { self.fetches.withLock { $0 } }
    var generation: Int { self.base.generation }

    func fetch<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> [Versioned<T>] {
        self.fetches.withLock { $0 += 1 }
        return try await self.base.fetch(descriptor)
    }

    func count<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> Int { try await self.base.count(descriptor) }
    func evaluate<T: Entity>(_ request: AggregateRequest<T>) async throws -> AggregateRows { try await self.base.evaluate(request) }
    func object<T: Entity>(_ type: T.Type, id: T.ID) async throws -> Versioned<T>? { try await self.base.object(type, id: id) }
    func findOrCreate<T: Entity>(_ value: T) async throws -> (value: Versioned<T>, created: Bool) { try await self.base.findOrCreate(value) }
    func apply(_ changes: ChangeSet) async throws -> ChangeSetResult { try await self.base.apply(changes) }
    func destroy(confirm: DestroyConfirmation) async throws { try await self.base.destroy(confirm: confirm) }
}

/// One relationship store under test: the store (fetches counted), and on PostgreSQL the statements its
/// connections ran (from their debug log).
struct RelationshipHarness: Sendable {
    let store: FetchCountingStore
    let pool: PGConnectionPool?
    let schema: String?
    let log: RecordingLogHandler?

    /// The statements run so far (PostgreSQL), each connection's `query`/`script`/`copy` record's SQL text and
    /// one `pipeline` entry per pipeline.
    var statements: [String] {
        (self.log?.entries ?? []).compactMap { entry in
            if let sql = entry.metadata[PGLogKey.sql] { return "\(sql)" }
            return "\(entry.message)" == "pipeline" ? "pipeline" : nil
        }
    }

    func execute(_ sql: String) async throws {
        guard let pool else { return }
        try await pool.withConnection { _ = try await $0.execute(script: sql) }
    }

    func table(_ name: String) -> String {
        [self.schema, name].compactMap { $0 }.map(quoteIdentifier).joined(separator: ".")
    }

    /// Inserts the sample rows.
    func seed(_ sample: (publishers: [RelPublisher], authors: [RelAuthor], books: [RelBook], reviews: [RelReview])) async throws {
        var changes = ChangeSet()
        changes.bulkInsert(sample.publishers)
        changes.bulkInsert(sample.authors)
        changes.bulkInsert(sample.books)
        changes.bulkInsert(sample.reviews)
        _ = try await self.store.apply(changes)
    }

    /// Inserts tags and the join rows pairing them with books.
    func seed(_ tags: (tags: [RelTag], bookTags: [RelBookTag])) async throws {
        var changes = ChangeSet()
        changes.bulkInsert(tags.tags)
        changes.bulkInsert(tags.bookTags)
        _ = try await self.store.apply(changes)
    }

    static func with<R>(_ kind: StoreKind, _ body: (RelationshipHarness) async throws -> R) async throws -> R {
        switch kind {
        case .inMemory:
            return try await body(RelationshipHarness(store: FetchCountingStore(InMemoryStore()), pool: nil, schema: nil, log: nil))
        case .postgres:
            let (logger, handler) = RecordingLogHandler.logger(label: "skyros.relationships")
            let pool = PGConnectionPool(configuration: .init(maximumConnections: 2), postgres: try TestServer.configuration, logger: logger)
            let schema = StoreTestServer.uniqueSchemaName()
            let store = PostgresStore(pool: pool, schema: schema)
            let harness = RelationshipHarness(store: FetchCountingStore(store), pool: pool, schema: schema, log: handler)
            return try await withCleanup {
                try await store.createSchemaIfNeeded()
                try await harness.execute(RelationshipSchema.createTables(harness.table))
                return try await body(harness)
            } cleanup: {
                await pool.shutdown()
                await TestServer.dropSchema(schema)
            }
        }
    }
}
