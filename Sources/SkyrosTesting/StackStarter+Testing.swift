import Logging
import Skyros

extension StackStarter {
    /// A starter of an in-memory stack with `configuration`'s entities and settings (its store replaced by
    /// `DataStackConfiguration/StoreLocation/inMemory`): the app's start-up path, without a database.
    ///
    /// ```swift
    /// let starter = StackStarter.inMemory(DataStackConfiguration(store: .inMemory, entities: [Author.self]))
    /// let stack = try await starter.start()
    /// ```
    /// - Parameter configuration: the app's configuration.
    /// - Returns: the starter.
    public static func inMemory(_ configuration: DataStackConfiguration) -> StackStarter {
        var configuration = configuration
        configuration.store = .inMemory
        return .live(configuration)
    }

    /// A starter whose start throws `error`: the store is unavailable, a migration failed, the schema does not
    /// match. By default, the error `DataStack/start(_:logger:)` throws when PostgreSQL cannot be
    /// reached: `DataStackError` `.storeUnreachable`.
    ///
    /// ```swift
    /// let starter = StackStarter.failing()
    /// let migrationFailed = StackStarter.failing(DataStackError(code: .migrationFailed, message: "2_add_index.sql"))
    /// ```
    /// - Parameter error: what the start throws.
    /// - Returns: the starter.
    public static func failing(
        _ error: any Error = DataStackError(code: .storeUnreachable, message: "the store is unavailable (simulated)")
    ) -> StackStarter {
        StackStarter { _ in throw error }
    }

    /// A starter that waits `duration` and then runs `starter` (a database that takes its time to accept
    /// connections). A cancelled start stops waiting and throws `CancellationError`.
    ///
    /// ```swift
    /// let slow = StackStarter.delayed(by: .seconds(2), then: .inMemory(DataStackConfiguration(store: .inMemory)))
    /// ```
    /// - Parameters:
    ///   - duration: how long the start takes before `starter` runs.
    ///   - starter: the start that follows.
    /// - Returns: the starter.
    public static func delayed(by duration: Duration, then starter: StackStarter) -> StackStarter {
        StackStarter { logger in
            try await Task.sleep(for: duration)
            return try await starter.start(logger: logger)
        }
    }
}
