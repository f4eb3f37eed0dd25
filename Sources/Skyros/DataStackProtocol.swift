import SkyrosStore
import SkyrosStack
import SkyrosObservation
import SkyrosSync

/// The public surface of a ``DataStack``, so code can depend on the protocol and tests can substitute
/// their own implementation (or a ``DataStack`` over ``DataStackConfiguration/StoreLocation/inMemory``).
///
/// ```swift
/// struct BookService<Stack: DataStackProtocol> {
///     let stack: Stack
///     func add(_ book: Book) async throws {
///         try await stack.write { try $0.insert(book) }
///     }
/// }
/// let service = BookService(stack: try await DataStack.start(DataStackConfiguration(store: .inMemory)))
/// ```
public protocol DataStackProtocol: Sendable {
    /// The context readers share; reads by id are served from its cache.
    var mainContext: DataContext { get }

    /// A new context whose saves go straight to the commit queue (a sibling of the main context).
    func newBackgroundContext() -> DataContext

    /// Runs `body` against the main context and returns its value.
    func read<R>(_ body: (DataContext) async throws -> R) async throws -> R

    /// Runs `body` on a new context and saves its changes atomically (see ``DataStack/write(durability:_:)``).
    @discardableResult
    func write<R>(durability: WriteDurability, _ body: (DataContext) async throws -> R) async throws -> R

    /// Runs `body` on a new context and saves its changes atomically, with the stack's default durability
    /// (see ``DataStack/write(_:)``).
    @discardableResult
    func write<R>(_ body: (DataContext) async throws -> R) async throws -> R

    /// Runs `body` on a new context, saves it, and calls `completion` exactly once with the value or the error,
    /// after the commit.
    func write<R: Sendable>(
        _ body: @escaping @Sendable (DataContext) async throws -> R,
        completion: @escaping @Sendable (Result<R, any Error>) -> Void)
}

extension DataStackProtocol {
    /// Runs `body` on a new context and returns once every reader in the process sees its changes (a
    /// conformance without a default durability of its own).
    @discardableResult
    public func write<R>(_ body: (DataContext) async throws -> R) async throws -> R {
        try await self.write(durability: .visible, body)
    }
}
