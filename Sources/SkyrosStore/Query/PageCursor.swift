import Foundation
import SkyrosPostgres

/// Where a keyset page ends: the sort key of its last row, handed back to fetch the rows after it.
///
/// A cursor is opaque to clients: its ``description`` is a URL-safe base64 token a service can send in a
/// response and accept in the next request (`?after=…`), and it is `Codable` as that string. It holds the
/// entity's table, the sort columns with their directions, and the last row's values of those columns (its
/// primary key included, which breaks ties) — readable by whoever decodes the base64, so do not sort by a
/// column a client must not see.
///
/// ```swift
/// let first = try await context.fetchPage(FetchDescriptor<Ticket>(sortBy: [SortDescriptor(\.createdAt)], fetchLimit: 50))
/// let token = first.nextCursor?.description             // "eyJjIjpbImNyZWF0ZWRfYXQiLCJpZCJd…"
/// let cursor = token.flatMap(PageCursor.init)            // back from the client
/// let second = try await context.fetchPage(FetchDescriptor<Ticket>(sortBy: [SortDescriptor(\.createdAt)], fetchLimit: 50), after: cursor)
/// ```
///
/// A cursor only fits a fetch of the same entity with the same sort (it is checked: ``QueryError/Code/invalidCursor``);
/// the predicate may differ. It stays valid while rows change: the next page starts after its key, wherever that
/// key now falls, so no row is skipped or repeated because rows were inserted or deleted before it.
public struct PageCursor: Sendable, Hashable, Codable, LosslessStringConvertible {
    /// The sort key a cursor names.
    package struct Key: Sendable, Hashable, Codable {
        /// The entity's table.
        package var table: String
        /// The sort columns, the primary key last.
        package var columns: [String]
        /// Whether each column sorts ascending.
        package var ascending: [Bool]
        /// Each column's value in PostgreSQL's text form, `nil` for NULL.
        package var values: [String?]

        enum CodingKeys: String, CodingKey {
            case table = "t", columns = "c", ascending = "a", values = "v"
        }
    }

    /// The key this cursor names.
    package let key: Key

    package init(key: Key) { self.key = key }

    /// The cursor for the rows after `value` in the order `sortBy` gives (`T.defaultSort` when empty, then the
    /// primary key): what ``FetchPage/nextCursor`` holds when `value` ends a page.
    ///
    /// ```swift
    /// let cursor = try PageCursor(after: lastShown, sortBy: [SortDescriptor(\Ticket.createdAt, order: .reverse)])
    /// ```
    /// - Parameters:
    ///   - value: the row the next page starts after.
    ///   - sortBy: the fetch's sort descriptors.
    /// - Throws: ``QueryError`` for a sort that cannot be translated; `PGError` when a sort value cannot be
    ///   encoded.
    public init<T: Entity>(after value: T, sortBy: [SortDescriptor<T>] = []) throws {
        let metadata = try EntityQueryMetadata.of(T.self)
        let plan = try EntityPlan<T>.shared
        let encoded = try RowEncoder(plan: plan).encode(value)
        let columns = try SQLQueryBuilder.sortColumns(sortBy, metadata)
        self.key = Key(
            table: T.tableName, columns: columns.map(\.0.name), ascending: columns.map(\.1),
            values: columns.map { column, _ in plan.columnIndex[column.name].flatMap { encoded[$0].text } })
    }

    /// The token: URL-safe base64 (no padding) of the key.
    public var description: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding strings, booleans and arrays of them cannot fail.
        let data = (try? encoder.encode(self.key)) ?? Data()
        return data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// A cursor from its token (``description``); `nil` for text that is not one.
    public init?(_ description: String) {
        var base64 = description.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64), let key = try? JSONDecoder().decode(Key.self, from: data),
            !key.columns.isEmpty, key.columns.count == key.ascending.count, key.columns.count == key.values.count
        else { return nil }
        self.key = key
    }

    /// Decodes the token string.
    /// - Throws: `DecodingError.dataCorrupted` when the string is not a cursor.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let token = try container.decode(String.self)
        guard let cursor = PageCursor(token) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a page cursor")
        }
        self = cursor
    }

    /// Encodes the token string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(self.description)
    }
}

/// One page of a keyset-paginated fetch: its rows, and the cursor that fetches the next page.
///
/// ```swift
/// var cursor: PageCursor?
/// repeat {
///     let page = try await stack.read { try await $0.fetchPage(FetchDescriptor<Ticket>(fetchLimit: 100), after: cursor) }
///     for ticket in page.items { print(ticket.title) }
///     cursor = page.nextCursor
/// } while cursor != nil
/// ```
public struct FetchPage<Item: Sendable>: Sendable {
    /// The rows of the page, in the fetch's order: at most the descriptor's `fetchLimit`.
    public var items: [Item]
    /// The cursor for the rows after this page; `nil` when no row followed it when it was read.
    public var nextCursor: PageCursor?

    /// A page of `items`, followed by the rows after `nextCursor`.
    public init(items: [Item], nextCursor: PageCursor?) {
        self.items = items
        self.nextCursor = nextCursor
    }
}

extension FetchPage: Equatable where Item: Equatable {}
extension FetchPage: Hashable where Item: Hashable {}
