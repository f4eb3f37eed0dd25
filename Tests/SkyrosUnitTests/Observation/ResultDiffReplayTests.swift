import Foundation
@testable import SkyrosObservation
import SkyrosPostgres
import SkyrosStore
import SkyrosTestEntities
import SkyrosTestFixtures
import Testing

/// The diffs observers get, on values alone (no stack, no server): for random old and new results, applying the
/// diff to the old result gives the new one — flat (`ResultDiff`) and sectioned (`SectionedResultDiff`) — and
/// the diff names what changed, no more.
@Suite struct ResultDiffReplayTests {
    typealias Row = (value: MPItem, encoded: [PGValue])
    typealias Sections = SectionedResultDiff<MPItem, Int>

    /// A random result: up to `ids` distinct rows in random order, owners (the section key) in `0..<owners`,
    /// titles from a small set (so that a row kept between two results is sometimes updated).
    static func randomRows(_ generator: inout SeededGenerator, ids: Int = 14, owners: Int = 4) throws -> [Row] {
        let encoder = try RowEncoder<MPItem>()
        let count = Int.random(in: 0...ids, using: &generator)
        return try (0..<Int64(ids)).shuffled(using: &generator).prefix(count).map { id in
            let item = MPItem(
                id: id, owner: Int.random(in: 0..<owners, using: &generator), value: Int.random(in: 0..<3, using: &generator),
                title: ["a", "b"].randomElement(using: &generator)!)
            return (item, try encoder.encode(item))
        }
    }

    static func sections(_ grouped: [(key: Int, rows: [Row])]) -> [ResultSection<MPItem, Int>] {
        grouped.map { ResultSection(key: $0.key, values: $0.rows.map(\.value)) }
    }

    @Test func aFlatDiffReplaysFromTheOldResultToTheNewOneFor300RandomPairs() throws {
        for seed in 0..<300 as Range<UInt64> {
            var generator = SeededGenerator(seed: seed)
            let old = try Self.randomRows(&generator)
            let new = try Self.randomRows(&generator)
            let diff = ResultDiff(from: old, to: new)
            #expect(diff.applied(to: old.map(\.value)) == new.map(\.value), "seed \(seed)")
            let oldIDs = Set(old.map(\.value.id))
            let newIDs = Set(new.map(\.value.id))
            #expect(Set(diff.deleted.map(\.id)) == oldIDs.subtracting(newIDs), "seed \(seed)")
            #expect(Set(diff.inserted.map(\.value.id)) == newIDs.subtracting(oldIDs), "seed \(seed)")
            let changed = new.filter { row in old.contains { $0.value.id == row.value.id && $0.value != row.value } }
            #expect(Set(diff.updated.map(\.value.id)) == Set(changed.map(\.value.id)), "seed \(seed)")
            #expect(diff.isEmpty == (old.map(\.value) == new.map(\.value)), "seed \(seed)")
        }
    }

    @Test func aSectionedDiffReplaysFromTheOldSectionsToTheNewOnesFor300RandomPairs() throws {
        for seed in 0..<300 as Range<UInt64> {
            var generator = SeededGenerator(seed: 10_000 + seed)
            let old = Sections.sections(of: try Self.randomRows(&generator), by: \.owner)
            let new = Sections.sections(of: try Self.randomRows(&generator), by: \.owner)
            let diff = Sections(from: old, to: new)
            #expect(diff.applied(to: Self.sections(old)) == Self.sections(new), "seed \(seed)")

            let oldRows = old.flatMap(\.rows).map(\.value)
            let newRows = new.flatMap(\.rows).map(\.value)
            let oldIDs = Set(oldRows.map(\.id))
            let newIDs = Set(newRows.map(\.id))
            // A row kept is never deleted and inserted: it moves (between sections when its key changed).
            #expect(Set(diff.deleted.map(\.id)) == oldIDs.subtracting(newIDs), "seed \(seed)")
            #expect(Set(diff.inserted.map(\.value.id)) == newIDs.subtracting(oldIDs), "seed \(seed)")
            let changedSection = newRows.filter { row in oldRows.contains { $0.id == row.id && $0.owner != row.owner } }
            #expect(Set(changedSection.map(\.id)).isSubset(of: Set(diff.moved.map(\.value.id))), "seed \(seed)")
            #expect(Set(diff.deletedSections.map(\.key)) == Set(old.map(\.key)).subtracting(new.map(\.key)), "seed \(seed)")
            #expect(Set(diff.insertedSections.map(\.key)) == Set(new.map(\.key)).subtracting(old.map(\.key)), "seed \(seed)")
            #expect(diff.isEmpty == (Self.sections(old) == Self.sections(new)), "seed \(seed)")
        }
    }

    /// Sections in the order of their first row, whatever the sort; rows in the query's order within each.
    @Test func sectionsComeInTheOrderOfTheirFirstRow() throws {
        let encoder = try RowEncoder<MPItem>()
        let rows: [Row] = try ([(1, 2), (2, 1), (3, 2), (4, 3), (5, 1)] as [(Int64, Int)]).map { id, owner in
            let item = MPItem(id: id, owner: owner, value: 0, title: "")
            return (item, try encoder.encode(item))
        }
        let grouped = Sections.sections(of: rows, by: \.owner)
        #expect(grouped.map(\.key) == [2, 1, 3])
        #expect(grouped.map { $0.rows.map(\.value.id) } == [[1, 3], [2, 5], [4]])
    }

    /// The changes a board's columns see: a row changing section is one move; a section emptied is deleted; a
    /// new key makes a section; sections reordered are moves.
    @Test func aRowChangingSectionIsAMoveAndEmptiedSectionsAreDeleted() throws {
        let encoder = try RowEncoder<MPItem>()
        func grouped(_ rows: [(Int64, Int, String)]) throws -> [(key: Int, rows: [Row])] {
            Sections.sections(of: try rows.map { id, owner, title in
                let item = MPItem(id: id, owner: owner, value: 0, title: title)
                return (item, try encoder.encode(item))
            }, by: \.owner)
        }
        let old = try grouped([(1, 1, "a"), (2, 1, "b"), (3, 2, "c")])
        // 3 moves from section 2 (then empty) to section 1; 2 moves to a new section 5 and is renamed.
        let new = try grouped([(1, 1, "a"), (3, 1, "c"), (2, 5, "B")])
        let diff = Sections(from: old, to: new)
        #expect(diff.deletedSections.map(\.key) == [2])
        #expect(diff.insertedSections.map(\.key) == [5])
        #expect(diff.deleted.isEmpty && diff.inserted.isEmpty)
        #expect(diff.moved.map { "\($0.value.id): \($0.from) -> \($0.to)" } == ["3: 1.0 -> 0.1", "2: 0.1 -> 1.0"])
        #expect(diff.updated.map(\.value.id) == [3, 2])      // a changed key is a changed value too
        #expect(diff.applied(to: Self.sections(old)) == Self.sections(new))

        // Reversing the sections' order moves sections, not rows.
        let reversed = try grouped([(3, 2, "c"), (1, 1, "a"), (2, 1, "b")])
        let reversing = Sections(from: old, to: reversed)
        #expect(reversing.movedSections.count == 1 && reversing.moved.isEmpty)
        #expect(reversing.applied(to: Self.sections(old)) == Self.sections(reversed))
    }

    @Test func aSectionedResultEncodesAsJSON() throws {
        let encoder = try RowEncoder<MPItem>()
        let item = MPItem(id: 1, owner: 4, value: 0, title: "one")
        let grouped = Sections.sections(of: [(item, try encoder.encode(item))], by: \.owner)
        let result = SectionedResult(sections: Self.sections(grouped), diff: Sections(from: [], to: grouped))
        let json = try #require(try JSONSerialization.jsonObject(with: try JSONEncoder().encode(result)) as? [String: Any])
        let sections = try #require(json["sections"] as? [[String: Any]])
        #expect(sections.first?["key"] as? Int == 4)
        let diff = try #require(json["diff"] as? [String: Any])
        let inserted = try #require(diff["inserted"] as? [[String: Any]])
        #expect((inserted.first?["position"] as? [String: Any])?["row"] as? Int == 0)
        #expect((diff["insertedSections"] as? [[String: Any]])?.first?["key"] as? Int == 4)
    }

    /// An update moves the query's observers to the tables the new query reads, and wakes them: a change to a
    /// table only the old query read wakes nobody; one to a table of the new query does.
    @Test func anUpdatedQueryRetargetsItsObserversAndWakesThem() async {
        let registry = ObserverRegistry()
        let query = ObservedQuery("old", tables: ["t"], registry: registry)
        let (first, firstSignals) = query.register(row: nil)
        let (second, secondSignals) = query.register(row: nil)
        var firstIterator = firstSignals.makeAsyncIterator()
        var secondIterator = secondSignals.makeAsyncIterator()
        query.update("new", tables: ["u"])
        #expect(query.current.query == "new" && query.current.generation == 1)
        #expect(registry.tables(of: first) == ["u"] && registry.tables(of: second) == ["u"])
        for woken in [await firstIterator.next(), await secondIterator.next()] {
            guard case .changed = woken else { Issue.record("the update did not wake an observer"); return }
        }

        registry.changed(ObservedChanges(wholeTables: ["t"]))
        query.remove(first)
        let ended = await firstIterator.next()
        #expect(ended == nil, "a change to the old query's table woke the observer")

        registry.changed(ObservedChanges(wholeTables: ["u"]))
        query.remove(second)
        guard case .changed = await secondIterator.next() else {
            Issue.record("a change to the new table did not wake it")
            return
        }

        // An observer that ended is not brought back by an update.
        query.update("newer", tables: ["v"])
        #expect(registry.tables(of: first) == nil && registry.count == 0)
    }
}
