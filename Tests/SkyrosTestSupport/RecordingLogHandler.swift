import Logging
import Synchronization

/// A log handler that keeps every record, for tests that check what was logged (and what was not).
///
/// swift-log's `InMemoryLogHandler` hands readers its own array, so a test reading the records shares that
/// array's storage with a connection thread appending the next one; ThreadSanitizer reports that as a race.
/// ``entries`` builds a new array under the lock instead, so a reader never touches storage a writer appends to.
///
/// ```swift
/// let handler = RecordingLogHandler()
/// let logger = Logger(label: "test", factory: { _ in handler })
/// #expect(handler.entries.contains { $0.level == .warning })
/// ```
public struct RecordingLogHandler: LogHandler {
    /// One record as it was logged: the handler's metadata merged with the call's.
    public struct Entry: Sendable {
        public var level: Logger.Level
        public var message: Logger.Message
        public var metadata: Logger.Metadata
        /// The error logged with the record, described (`String(reflecting:)`), or `nil`.
        public var error: String?

        /// Every text the record carries (message, metadata, error), for checks that a value never reaches a log.
        public var text: String { "\(self.message) \(self.metadata) \(self.error ?? "")" }
    }

    /// A logger at `trace` level whose records `handler` keeps.
    public static func logger(label: String = "skyros.test") -> (logger: Logger, handler: RecordingLogHandler) {
        let handler = RecordingLogHandler()
        var logger = Logger(label: label, factory: { _ in handler })
        logger.logLevel = .trace
        return (logger, handler)
    }

    private final class Store: Sendable {
        let entries = Mutex<[Entry]>([])
    }

    private let store = Store()
    public var logLevel: Logger.Level = .trace
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?

    public init() {}

    /// Every record so far, in order (a copy: later records do not appear in it).
    public var entries: [Entry] { self.store.entries.withLock { $0.map { $0 } } }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = self.metadata
        if let provided = self.metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let metadata = event.metadata { merged.merge(metadata) { $1 } }
        let entry = Entry(
            level: event.level, message: event.message, metadata: merged, error: event.error.map { String(reflecting: $0) })
        self.store.entries.withLock { $0.append(entry) }
    }
}
