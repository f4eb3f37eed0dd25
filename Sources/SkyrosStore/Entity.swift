import Foundation
import SkyrosPostgres

/// A Swift value stored as one row of a PostgreSQL table.
///
/// Conform a `Codable` struct, name its table and list its columns once. The column list maps each stored
/// property's key path to its column (no reliance on runtime string formats); it is checked against the
/// live schema when the stack starts.
///
/// ```swift
/// struct User: Entity {
///     var id: UUID
///     var name: String
///     var age: Int?
///
///     static let tableName = "users"
///     static let columns: [EntityColumn<User>] = [
///         EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.age, "age"),
///     ]
///     static let defaultSort = [SortDescriptor(\User.name)]
/// }
/// ```
public protocol Entity: Codable, Sendable, Identifiable where ID: PostgresCodable & Hashable & Sendable {
    /// The table's name (unqualified; the store adds its schema).
    static var tableName: String { get }
    /// Every stored property: key path and column name. The primary key column is the one for `\.id`.
    static var columns: [EntityColumn<Self>] { get }
    /// The order used when a fetch gives no sort. Empty by default (then the primary key is used).
    static var defaultSort: [SortDescriptor<Self>] { get }
    /// A column holding the row version for optimistic locking; `nil` (default) uses PostgreSQL's `xmin`.
    static var versionColumn: String? { get }
}

extension Entity {
    public static var defaultSort: [SortDescriptor<Self>] { [] }
    public static var versionColumn: String? { nil }
}

/// One stored property of an ``Entity``: its key path and its column name.
public struct EntityColumn<Root>: @unchecked Sendable {
    // @unchecked Sendable: key paths to stored properties are immutable values; the type is not marked
    // Sendable by the standard library.
    /// The key path, type-erased.
    public let keyPath: PartialKeyPath<Root>
    /// The column name in the table.
    public let name: String
    /// The Swift type of the property (e.g. `Optional<Int>`).
    public let valueType: Any.Type

    public init<Value>(_ keyPath: KeyPath<Root, Value>, _ name: String) {
        self.keyPath = keyPath
        self.name = name
        self.valueType = Value.self
    }
}
