import Foundation
import SkyrosPostgres
import SkyrosStore

/// One section of a sectioned observation (`DataStack/observe(_:sectionedBy:)`): the rows whose section key
/// path has the value ``key``, in the query's order — `NSFetchedResultsSectionInfo`'s name and objects.
public struct ResultSection<T: Entity, Key: Hashable & Sendable>: Sendable {
    /// The section key path's value shared by the section's rows.
    public let key: Key
    /// The section's rows, in the query's order.
    public var values: [T]

    /// A section of rows.
    /// - Parameters:
    ///   - key: the section key path's value.
    ///   - values: the section's rows, in the query's order.
    public init(key: Key, values: [T]) {
        self.key = key
        self.values = values
    }
}

extension ResultSection: Equatable where T: Equatable {}

/// One result of a sectioned observation (`DataStack/observe(_:sectionedBy:)`): the query's rows grouped into
/// sections by a key path, and the difference from the previous result (for the first, every section and row
/// inserted).
///
/// Sections come in the order of their first row in the query's order, and each keeps its rows in that order.
/// Sort by the section key first (as `NSFetchedResultsController` requires) to get sections ordered by key.
///
/// ```swift
/// let byStatus = stack.observe(
///     FetchDescriptor<Ticket>(sortBy: [SortDescriptor(\.status), SortDescriptor(\.priority)]), sectionedBy: \.status)
/// var sections: [ResultSection<Ticket, String>] = []
/// for try await result in byStatus {
///     sections = result.diff.applied(to: sections)      // == result.sections
/// }
/// ```
public struct SectionedResult<T: Entity, Key: Hashable & Sendable>: Sendable {
    /// The sections, in the order of their first row in the query's order.
    public let sections: [ResultSection<T, Key>]
    /// How to go from the previous result's sections to ``sections``.
    public let diff: SectionedResultDiff<T, Key>

    /// Every row, section after section.
    public var values: [T] { self.sections.flatMap(\.values) }

    package init(sections: [ResultSection<T, Key>], diff: SectionedResultDiff<T, Key>) {
        self.sections = sections
        self.diff = diff
    }
}

extension SectionedResult: ObservedFetchResult {
    /// The entity the query fetches.
    public typealias Fetched = T
}

/// The difference between two sectioned results of one query: sections by key, rows by primary key —
/// `NSFetchedResultsController`'s section and object changes, in a form that replays.
///
/// Apply it in this order to the old sections to get the new ones — which ``applied(to:)`` does:
/// 1. remove the rows of ``deleted`` and the sources of ``moved`` (positions in the old sections);
/// 2. remove ``deletedSections`` (empty by then: every row of a deleted section is deleted or moved), move
///    ``movedSections`` with their remaining rows, insert ``insertedSections`` empty — as one ordered
///    collection difference (removals at old offsets, insertions at new offsets);
/// 3. insert the rows of ``inserted`` and the destinations of ``moved`` (positions in the new sections);
/// 4. replace the rows at the positions of ``updated``.
///
/// A row whose section key changed is a move between sections; a row that stays in its section moves only
/// when its position among the section's rows changed beyond the shifts of removals and insertions.
///
/// ```swift
/// var sections: [ResultSection<Ticket, String>] = []
/// for try await result in stack.observe(FetchDescriptor<Ticket>(sortBy: [SortDescriptor(\.status)]),
///                                       sectionedBy: \.status) {
///     for section in result.diff.insertedSections { print("new section", section.key, "at", section.offset) }
///     for move in result.diff.moved { print(move.value.title, "from", move.from, "to", move.to) }
///     sections = result.diff.applied(to: sections)
/// }
/// ```
public struct SectionedResultDiff<T: Entity, Key: Hashable & Sendable>: Sendable {
    /// Where a row is: its section's offset, and its offset among that section's rows.
    public struct Position: Hashable, Sendable, Comparable, CustomStringConvertible {
        /// The section's offset among the sections.
        public let section: Int
        /// The row's offset in its section.
        public let row: Int

        /// A position.
        /// - Parameters:
        ///   - section: the section's offset among the sections.
        ///   - row: the row's offset in its section.
        public init(section: Int, row: Int) {
            self.section = section
            self.row = row
        }

        /// Section first, then row.
        public static func < (lhs: Self, rhs: Self) -> Bool { (lhs.section, lhs.row) < (rhs.section, rhs.row) }

        /// `section.row`, like an index path.
        public var description: String { "\(self.section).\(self.row)" }
    }

    /// A section that left the result: its offset among the old sections.
    public struct SectionRemoval: Sendable {
        /// The section's offset among the old sections.
        public let offset: Int
        /// The section's key.
        public let key: Key
    }

    /// A section that entered the result, at `offset` among the new sections.
    public struct SectionInsertion: Sendable {
        /// The section's offset among the new sections.
        public let offset: Int
        /// The section's key.
        public let key: Key
    }

    /// A section that stayed but changed position among the sections.
    public struct SectionMove: Sendable {
        /// The section's offset among the old sections.
        public let from: Int
        /// The section's offset among the new sections.
        public let to: Int
        /// The section's key.
        public let key: Key
    }

    /// A row that left the result: its position in the old sections.
    public struct Removal: Sendable {
        /// The row's position in the old sections.
        public let position: Position
        /// The row's primary key.
        public let id: T.ID
    }

    /// A row that entered the result, at `position` in the new sections.
    public struct Insertion: Sendable {
        /// The row's position in the new sections.
        public let position: Position
        /// The row.
        public let value: T
    }

    /// A row that stayed but changed section, or position in its section.
    public struct Move: Sendable {
        /// The row's position in the old sections.
        public let from: Position
        /// The row's position in the new sections.
        public let to: Position
        /// The row as it is now.
        public let value: T
    }

    /// A row whose stored values changed, at `position` in the new sections (it may also have moved).
    public struct Update: Sendable {
        /// The row's position in the new sections.
        public let position: Position
        /// The row as it is now.
        public let value: T
    }

    /// Sections no longer in the result.
    public internal(set) var deletedSections: [SectionRemoval] = []
    /// Sections new in the result.
    public internal(set) var insertedSections: [SectionInsertion] = []
    /// Sections that changed position (beyond the shifts caused by deleted and inserted sections).
    public internal(set) var movedSections: [SectionMove] = []
    /// Rows no longer in the result, in order of position.
    public internal(set) var deleted: [Removal] = []
    /// Rows new in the result, in order of position.
    public internal(set) var inserted: [Insertion] = []
    /// Rows that changed section, or position in their section (beyond the shifts of removals and insertions).
    public internal(set) var moved: [Move] = []
    /// Rows whose values changed, in order of position.
    public internal(set) var updated: [Update] = []

    /// Whether nothing changed.
    public var isEmpty: Bool {
        self.deletedSections.isEmpty && self.insertedSections.isEmpty && self.movedSections.isEmpty
            && self.deleted.isEmpty && self.inserted.isEmpty && self.moved.isEmpty && self.updated.isEmpty
    }

    /// The new sections, computed from the old ones (those of the previous result). Returns `old` unchanged
    /// when the diff does not fit it (it was taken from another result).
    public func applied(to old: [ResultSection<T, Key>]) -> [ResultSection<T, Key>] {
        var sections = old
        // 1. Row removals, by section, from the last row up.
        var removals: [Int: [Int]] = [:]
        for removal in self.deleted { removals[removal.position.section, default: []].append(removal.position.row) }
        for move in self.moved { removals[move.from.section, default: []].append(move.from.row) }
        for (section, rows) in removals {
            guard sections.indices.contains(section) else { return old }
            for row in rows.sorted(by: >) {
                guard sections[section].values.indices.contains(row) else { return old }
                sections[section].values.remove(at: row)
            }
        }
        // 2. Sections.
        var changes: [CollectionDifference<ResultSection<T, Key>>.Change] = []
        for removal in self.deletedSections {
            guard sections.indices.contains(removal.offset) else { return old }
            changes.append(.remove(offset: removal.offset, element: sections[removal.offset], associatedWith: nil))
        }
        for move in self.movedSections {
            guard sections.indices.contains(move.from) else { return old }
            changes.append(.remove(offset: move.from, element: sections[move.from], associatedWith: move.to))
            changes.append(.insert(offset: move.to, element: sections[move.from], associatedWith: move.from))
        }
        for insertion in self.insertedSections {
            let empty = ResultSection<T, Key>(key: insertion.key, values: [])
            changes.append(.insert(offset: insertion.offset, element: empty, associatedWith: nil))
        }
        guard let difference = CollectionDifference(changes), let moved = sections.applying(difference) else { return old }
        sections = moved
        // 3. Row insertions, from the first position on.
        let insertions = self.inserted.map { ($0.position, $0.value) } + self.moved.map { ($0.to, $0.value) }
        for (position, value) in insertions.sorted(by: { $0.0 < $1.0 }) {
            guard sections.indices.contains(position.section), position.row <= sections[position.section].values.count
            else { return old }
            sections[position.section].values.insert(value, at: position.row)
        }
        // 4. Updates.
        for update in self.updated {
            guard sections.indices.contains(update.position.section),
                sections[update.position.section].values.indices.contains(update.position.row)
            else { return old }
            sections[update.position.section].values[update.position.row] = update.value
        }
        return sections
    }

    /// A row of a section as the observation holds it: the value and its encoded stored values.
    package typealias Row = (value: T, encoded: [PGValue])

    /// The difference from `old` to `new` (each key at most once in each); rows compare by their encoded stored
    /// values, as in ``ResultDiff``.
    package init(from old: [(key: Key, rows: [Row])], to new: [(key: Key, rows: [Row])]) {
        for change in new.map(\.key).difference(from: old.map(\.key)).inferringMoves() {
            switch change {
            case .remove(let offset, let key, let associated):
                if let to = associated {
                    self.movedSections.append(SectionMove(from: offset, to: to, key: key))
                } else {
                    self.deletedSections.append(SectionRemoval(offset: offset, key: key))
                }
            case .insert(let offset, let key, let associated):
                if associated == nil { self.insertedSections.append(SectionInsertion(offset: offset, key: key)) }
            }
        }
        var oldOffsets: [Key: Int] = [:]
        for (offset, section) in old.enumerated() { oldOffsets[section.key] = offset }
        var newOffsets: [Key: Int] = [:]
        for (offset, section) in new.enumerated() { newOffsets[section.key] = offset }

        // Within each key, an ordered difference of the rows' ids; a row removed under one key and inserted
        // under another changed section (a move).
        var removed: [(position: Position, id: T.ID)] = []
        var insertedAt: [T.ID: Position] = [:]
        let keys = old.map(\.key) + new.map(\.key).filter { oldOffsets[$0] == nil }
        for key in keys {
            let oldRows = oldOffsets[key].map { old[$0].rows } ?? []
            let newRows = newOffsets[key].map { new[$0].rows } ?? []
            for change in newRows.map(\.value.id).difference(from: oldRows.map(\.value.id)).inferringMoves() {
                switch change {
                case .remove(let offset, let id, let associated):
                    let from = Position(section: oldOffsets[key]!, row: offset)
                    if let to = associated {
                        let destination = Position(section: newOffsets[key]!, row: to)
                        self.moved.append(Move(from: from, to: destination, value: newRows[to].value))
                    } else {
                        removed.append((from, id))
                    }
                case .insert(let offset, let id, let associated):
                    if associated == nil { insertedAt[id] = Position(section: newOffsets[key]!, row: offset) }
                }
            }
        }
        for (position, id) in removed {
            if let to = insertedAt.removeValue(forKey: id) {
                self.moved.append(Move(from: position, to: to, value: new[to.section].rows[to.row].value))
            } else {
                self.deleted.append(Removal(position: position, id: id))
            }
        }
        self.inserted = insertedAt.map { Insertion(position: $0.value, value: new[$0.value.section].rows[$0.value.row].value) }
            .sorted { $0.position < $1.position }
        self.deleted.sort { $0.position < $1.position }
        self.moved.sort { $0.to < $1.to }

        var oldEncoded: [T.ID: [PGValue]] = [:]
        for section in old { for row in section.rows { oldEncoded[row.value.id] = row.encoded } }
        for (sectionOffset, section) in new.enumerated() {
            for (rowOffset, row) in section.rows.enumerated() {
                if let before = oldEncoded[row.value.id], before != row.encoded {
                    self.updated.append(Update(position: Position(section: sectionOffset, row: rowOffset), value: row.value))
                }
            }
        }
    }

    /// Groups `rows` (in the query's order) by `key`: sections in the order of their first row.
    package static func sections(of rows: [Row], by key: KeyPath<T, Key>) -> [(key: Key, rows: [Row])] {
        var sections: [(key: Key, rows: [Row])] = []
        var offsets: [Key: Int] = [:]
        for row in rows {
            let value = row.value[keyPath: key]
            if let offset = offsets[value] {
                sections[offset].rows.append(row)
            } else {
                offsets[value] = sections.count
                sections.append((value, [row]))
            }
        }
        return sections
    }
}

/// Encodes as `{"sections": [{"key", "values"}], "diff": {"deletedSections": [{"offset", "key"}],
/// "insertedSections": [{"offset", "key"}], "movedSections": [{"from", "to", "key"}], "deleted": [{"position":
/// {"section", "row"}, "id"}], "inserted": [{"position", "value"}], "moved": [{"from", "to", "value"}],
/// "updated": [{"position", "value"}]}}`.
///
/// ```swift
/// for try await result in stack.observe(FetchDescriptor<Ticket>(), sectionedBy: \.status) {
///     let json = try JSONEncoder().encode(result)
///     print(String(decoding: json, as: UTF8.self))
/// }
/// ```
extension SectionedResult: Encodable where T.ID: Encodable, Key: Encodable {}

extension ResultSection: Encodable where Key: Encodable {}
extension SectionedResultDiff: Encodable where T.ID: Encodable, Key: Encodable {}
extension SectionedResultDiff.Position: Encodable {}
extension SectionedResultDiff.SectionRemoval: Encodable where Key: Encodable {}
extension SectionedResultDiff.SectionInsertion: Encodable where Key: Encodable {}
extension SectionedResultDiff.SectionMove: Encodable where Key: Encodable {}
extension SectionedResultDiff.Removal: Encodable where T.ID: Encodable {}
extension SectionedResultDiff.Insertion: Encodable {}
extension SectionedResultDiff.Move: Encodable {}
extension SectionedResultDiff.Update: Encodable {}
