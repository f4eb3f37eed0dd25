import Logging
import SkyrosPostgres

/// A swift-log handler that keeps every record, for tests that check what was logged (and what was not): give
/// its logger to `DataStack/start(_:logger:)` or to a write, then read ``entries``.
///
/// swift-log's `InMemoryLogHandler` hands readers its own array, so a test reading the records shares that
/// array's storage with a connection thread appending the next one; ThreadSanitizer reports that as a race.
/// ``entries`` builds a new array under the lock instead, so a reader never touches storage a writer appends to
/// (the lock is a pthread mutex, which ThreadSanitizer sees).
///
/// ```swift
/// let (logger, handler) = RecordingLogHandler.logger()
/// let stack = try await DataStack.start(DataStackConfiguration(store: .inMemory), logger: logger)
/// await stack.shutdown()
/// let warnings = handler.entries.filter { $0.level >= .warning }
/// precondition(warnings.isEmpty)
/// ```
///
/// ## Topics
/// - ``logger(label:)``
/// - ``init()``
/// - ``entries``
/// - ``Entry``
public struct RecordingLogHandler: LogHandler {
    /// One record as it was logged: the handler's metadata merged with the call's.
    ///
    /// ```swift
    /// let (logger, handler) = RecordingLogHandler.logger()
    /// logger.info("hello", metadata: ["k": "v"])
    /// let entry = handler.entries[0]    // .info, "hello", ["k": "v"]
    /// ```
    public struct Entry: Sendable {
        /// The record's level.
        public var level: Logger.Level
        /// The record's message.
        public var message: Logger.Message
        /// The handler's, the provider's and the call's metadata, merged (the call's win).
        public var metadata: Logger.Metadata
        /// The error logged with the record, described (`String(reflecting:)`), or `nil`.
        public var error: String?

        /// Every text the record carries (message, metadata, error), for checks that a value never reaches a log.
        public var text: String { "\(self.message) \(self.metadata) \(self.error ?? "")" }
    }

    /// A logger at `trace` level whose records `handler` keeps.
    ///
    /// ```swift
    /// let (logger, handler) = RecordingLogHandler.logger(label: "my-app.test")
    /// ```
    /// - Parameter label: the logger's label.
    /// - Returns: the logger, and the handler that keeps its records.
    public static func logger(label: String = "skyros.test") -> (logger: Logger, handler: RecordingLogHandler) {
        let handler = RecordingLogHandler()
        var logger = Logger(label: label, factory: { _ in handler })
        logger.logLevel = .trace
        return (logger, handler)
    }

    /// The records, shared by the handler's copies (a `Logger` keeps a copy of its handler).
    private final class Store: Sendable {
        let entries = Locked<[Entry]>([])
    }

    private let store = Store()
    /// The lowest level this handler keeps (`trace`: everything).
    public var logLevel: Logger.Level = .trace
    /// Metadata added to every record.
    public var metadata: Logger.Metadata = [:]
    /// Metadata read at each record (a task-local request id, a trace id).
    public var metadataProvider: Logger.MetadataProvider?

    /// A handler with no records yet.
    ///
    /// ```swift
    /// let handler = RecordingLogHandler()
    /// let logger = Logger(label: "test", factory: { _ in handler })
    /// ```
    public init() {}

    /// Every record so far, in order (a copy: later records do not appear in it).
    public var entries: [Entry] { self.store.entries.withLock { $0.map { $0 } } }

    /// The handler's metadata value for `key`.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    /// Keeps the record.
    public func log(event: LogEvent) {
        var merged = self.metadata
        if let provided = self.metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let metadata = event.metadata { merged.merge(metadata) { $1 } }
        let entry = Entry(
            level: event.level, message: event.message, metadata: merged, error: event.error.map { String(reflecting: $0) })
        self.store.entries.withLock { $0.append(entry) }
    }
}
