import Logging
import Skyros

/// Where a test's stack keeps its rows: in memory, or in a schema of its own on PostgreSQL. One app
/// configuration (entities, migrations, settings) gives both, so the same test body runs on each: the
/// in-memory one for speed and in every environment, the PostgreSQL one for the real SQL.
///
/// ```swift
/// let app = DataStackConfiguration(store: .inMemory, migrations: .directory(path: "migrations"),
///                                  entities: [Author.self])
///
/// // swift-testing: @Test(arguments: try TestStore.available())
/// func addingAnAuthor(on store: TestStore) async throws {
///     try await withTestStack(app, on: store) { stack in
///         try await stack.write(durability: .committed) { try $0.insert(Author(id: UUID(), name: "Ada")) }
///         let count = try await stack.read { try await $0.count(FetchDescriptor<Author>()) }
///         precondition(count == 1, "\(store)")
///     }
/// }
/// for store in try TestStore.available() { try await addingAnAuthor(on: store) }
/// ```
///
/// ## Topics
/// - ``inMemory``
/// - ``postgres(_:)``
/// - ``available(environment:)``
public enum TestStore: Sendable, CustomStringConvertible {
    /// `DataStackConfiguration/StoreLocation/inMemory`: the app's migrations are not run (the
    /// in-memory store has no SQL); its tables come from the entities.
    case inMemory
    /// A new schema of this database for each stack, with the app's migrations applied, dropped afterwards.
    case postgres(TestDatabase)

    /// `inMemory`, or `postgres`.
    public var description: String {
        switch self {
        case .inMemory: "inMemory"
        case .postgres: "postgres"
        }
    }

    /// ``inMemory``, and ``postgres(_:)`` when the environment variable `environment` holds a database URL
    /// (see ``TestDatabase/fromEnvironment(_:logger:)``).
    ///
    /// ```swift
    /// let stores = try TestStore.available(environment: "APP_TEST_DATABASE_URL")
    /// ```
    /// - Parameter environment: the variable (`DATABASE_URL` by default).
    /// - Returns: the stores a test can run on here.
    /// - Throws: `PGError` when the variable holds a URL that cannot be parsed.
    public static func available(environment: String = "DATABASE_URL") throws -> [TestStore] {
        [.inMemory] + (try TestDatabase.fromEnvironment(environment).map { [.postgres($0)] } ?? [])
    }
}

/// Runs `body` with a stack of the app's `configuration` on `store`: in memory (the configuration's store
/// replaced by `DataStackConfiguration/StoreLocation/inMemory`), or in a new schema of a PostgreSQL
/// database (``TestDatabase/withStack(_:prefix:logger:_:)``). The stack is shut down afterwards, and the
/// schema dropped, whether `body` returned or threw.
///
/// ```swift
/// func addingAnAuthor() async throws {
///     let app = DataStackConfiguration(store: .inMemory, entities: [Author.self])
///     try await withTestStack(app, on: .inMemory) { stack in
///         try await stack.write { try $0.insert(Author(id: UUID(), name: "Ada")) }
///     }
/// }
/// ```
/// - Parameters:
///   - configuration: the app's configuration; its `store` is replaced.
///   - store: in memory or PostgreSQL.
///   - prefix: the start of the schema's name (PostgreSQL).
///   - logger: the stack's logger.
///   - body: the test.
/// - Returns: the body's value.
/// - Throws: the body's error, or the errors of `DataStack/start(_:logger:)` and of the schema's creation and drop.
public func withTestStack<R>(
    _ configuration: DataStackConfiguration, on store: TestStore, prefix: String = "test",
    logger: Logger = TestDatabase.noOpLogger, _ body: (DataStack) async throws -> R
) async throws -> R {
    switch store {
    case .postgres(let database):
        return try await database.withStack(configuration, prefix: prefix, logger: logger, body)
    case .inMemory:
        var configuration = configuration
        configuration.store = .inMemory
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
