import Foundation
import SkyrosPostgres
import SkyrosStore
import SkyrosStack

/// The ordered difference between two results of one query, by primary key.
///
/// Apply it in this order to the old result to get the new one — which ``applied(to:)`` does:
/// remove ``deleted`` and the sources of ``moved`` (offsets in the old result), insert ``inserted`` and the
/// destinations of ``moved`` (offsets in the new result), then replace the rows at the offsets of ``updated``.
///
/// ```swift
/// var rows: [Book] = []
/// for try await result in stack.observe(FetchDescriptor<Book>(sortBy: [SortDescriptor(\.title)], fetchLimit: 20)) {
///     rows = result.diff.applied(to: rows)          // == result.values
///     socket.send(result.diff.deleted.count, result.diff.inserted.count)
/// }
/// ```
public struct ResultDiff<T: Entity>: Sendable {
    /// A row that left the result: its offset in the old result.
    public struct Removal: Sendable {
        /// The row's offset in the old result.
        public let offset: Int
        /// The row's primary key.
        public let id: T.ID
    }

    /// A row that entered the result, at `offset` in the new result.
    public struct Insertion: Sendable {
        /// The row's offset in the new result.
        public let offset: Int
        /// The row.
        public let value: T
    }

    /// A row that stayed but changed position: from `from` (old result) to `to` (new result).
    public struct Move: Sendable {
        /// The row's offset in the old result.
        public let from: Int
        /// The row's offset in the new result.
        public let to: Int
        /// The row as it is now.
        public let value: T
    }

    /// A row whose stored values changed, at `offset` in the new result (it may also have moved).
    public struct Update: Sendable {
        /// The row's offset in the new result.
        public let offset: Int
        /// The row as it is now.
        public let value: T
    }

    /// Rows no longer in the result.
    public internal(set) var deleted: [Removal] = []
    /// Rows new in the result.
    public internal(set) var inserted: [Insertion] = []
    /// Rows that changed position (beyond the shifts caused by deletions and insertions).
    public internal(set) var moved: [Move] = []
    /// Rows whose values changed.
    public internal(set) var updated: [Update] = []

    /// Whether nothing changed.
    public var isEmpty: Bool { self.deleted.isEmpty && self.inserted.isEmpty && self.moved.isEmpty && self.updated.isEmpty }

    /// The new result, computed from the old one.
    public func applied(to old: [T]) -> [T] {
        var changes: [CollectionDifference<T>.Change] = []
        for removal in self.deleted { changes.append(.remove(offset: removal.offset, element: old[removal.offset], associatedWith: nil)) }
        for move in self.moved {
            changes.append(.remove(offset: move.from, element: old[move.from], associatedWith: move.to))
            changes.append(.insert(offset: move.to, element: move.value, associatedWith: move.from))
        }
        for insertion in self.inserted { changes.append(.insert(offset: insertion.offset, element: insertion.value, associatedWith: nil)) }
        guard let difference = CollectionDifference(changes), var new = old.applying(difference) else { return old }
        for update in self.updated where new.indices.contains(update.offset) { new[update.offset] = update.value }
        return new
    }

    /// The difference from `old` to `new`; rows compare by their encoded stored values (``Entity/columns``, as
    /// the store writes them).
    package init(from old: [(value: T, encoded: [PGValue])], to new: [(value: T, encoded: [PGValue])]) {
        let difference = new.map(\.value.id).difference(from: old.map(\.value.id)).inferringMoves()
        for change in difference {
            switch change {
            case .remove(let offset, let id, let associated):
                if let to = associated {
                    self.moved.append(Move(from: offset, to: to, value: new[to].value))
                } else {
                    self.deleted.append(Removal(offset: offset, id: id))
                }
            case .insert(let offset, _, let associated):
                if associated == nil { self.inserted.append(Insertion(offset: offset, value: new[offset].value)) }
            }
        }
        var oldEncoded: [T.ID: [PGValue]] = [:]
        for row in old { oldEncoded[row.value.id] = row.encoded }
        for (offset, row) in new.enumerated() {
            if let before = oldEncoded[row.value.id], before != row.encoded {
                self.updated.append(Update(offset: offset, value: row.value))
            }
        }
    }
}

/// One result of an observed query: the rows, and the difference from the previous result (for the first
/// result, every row inserted).
public struct ObservedResult<T: Entity>: Sendable {
    /// The query's rows, in order.
    public let values: [T]
    /// How to go from the previous result to ``values``.
    public let diff: ResultDiff<T>

    package init(values: [T], diff: ResultDiff<T>) {
        self.values = values
        self.diff = diff
    }
}

extension ObservedResult: ObservedFetchResult {
    /// The entity the query fetches.
    public typealias Fetched = T
}

/// Encodes as `{"values": […], "diff": {"deleted": [{"offset", "id"}], "inserted": [{"offset", "value"}],
/// "moved": [{"from", "to", "value"}], "updated": [{"offset", "value"}]}}` — ready to send to a browser.
///
/// ```swift
/// for try await result in stack.observe(openTickets) {
///     try await writer.write(ByteBuffer(data: try JSONEncoder().encode(result)))
/// }
/// ```
extension ObservedResult: Encodable where T.ID: Encodable {}

extension ResultDiff: Encodable where T.ID: Encodable {}
extension ResultDiff.Removal: Encodable where T.ID: Encodable {}
extension ResultDiff.Insertion: Encodable {}
extension ResultDiff.Move: Encodable {}
extension ResultDiff.Update: Encodable {}
