import Foundation
@testable import Skyros
import SkyrosTestFixtures
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Observations whose query changes (`ObservationSequence.update`) and sectioned observations
/// (`observe(_:sectionedBy:)`), on both stores: every element's diff replays from the previous element to it,
/// and once the changes stop the element is what a fetch returns now.
@Suite(.timeLimit(.minutes(2)))
struct ObservationUpdateTests {
    typealias Kind = ObservationTests.Kind

    static func seed(_ stack: DataStack, _ rows: [(Int64, Int, Int, String)]) async throws {
        try await stack.write(durability: .committed) { context in
            for (id, owner, value, title) in rows { try context.insert(MPItem(id: id, owner: owner, value: value, title: title)) }
        }
    }

    static func fetch(_ stack: DataStack, _ descriptor: FetchDescriptor<MPItem>) async throws -> [MPItem] {
        try await stack.read { try await $0.fetch(descriptor) }
    }

    /// Sections as the observation groups them: by `owner`, in the order of their first row.
    static func grouped(_ rows: [MPItem]) -> [ResultSection<MPItem, Int>] {
        var sections: [ResultSection<MPItem, Int>] = []
        for row in rows {
            if let offset = sections.firstIndex(where: { $0.key == row.owner }) {
                sections[offset].values.append(row)
            } else {
                sections.append(ResultSection(key: row.owner, values: [row]))
            }
        }
        return sections
    }

    /// Takes elements, checking that each one's diff replays from `replayed`, until one matches a fetch of
    /// `descriptor` made after it (the changes it waits for are committed, so this ends, within the suite's
    /// time limit); returns it.
    static func nextMatching(
        _ iterator: inout ObservationSequence<ObservedResult<MPItem>>.AsyncIterator, replaying replayed: inout [MPItem],
        _ stack: DataStack, _ descriptor: FetchDescriptor<MPItem>, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> ObservedResult<MPItem> {
        while true {
            let result = try #require(try await iterator.next(), sourceLocation: sourceLocation)
            replayed = result.diff.applied(to: replayed)
            #expect(replayed == result.values, "the diff does not replay", sourceLocation: sourceLocation)
            if result.values == (try await Self.fetch(stack, descriptor)) { return result }
        }
    }

    static func nextMatching(
        _ iterator: inout ObservationSequence<SectionedResult<MPItem, Int>>.AsyncIterator,
        replaying replayed: inout [ResultSection<MPItem, Int>], _ stack: DataStack, _ descriptor: FetchDescriptor<MPItem>,
        schema: String? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> SectionedResult<MPItem, Int> {
        let watchdog = Self.watchdog(stack, descriptor, schema: schema, waitingFor: replayed.map { "\($0.key): \($0.values.map(\.id))" })
        defer { watchdog.cancel() }
        while true {
            let result = try #require(try await iterator.next(), sourceLocation: sourceLocation)
            replayed = result.diff.applied(to: replayed)
            #expect(replayed == result.sections, "the sectioned diff does not replay", sourceLocation: sourceLocation)
            if result.sections == Self.grouped(try await Self.fetch(stack, descriptor)) { return result }
        }
    }

    /// After 20 s without the element a wait expects, records what the stack, its feed and the server hold
    /// (the wait goes on until the suite's time limit): a stuck observation says where it is stuck.
    static func watchdog(
        _ stack: DataStack, _ descriptor: FetchDescriptor<MPItem>, schema: String?, waitingFor last: [String]) -> Task<Void, Never> {
        Task {
            guard (try? await Task.sleep(for: .seconds(20))) != nil else { return }
            var lines = ["an observation waited 20 s; its last element: \(last)"]
            lines.append("a fetch now: \((try? await Self.fetch(stack, descriptor).map { "\($0.id)/\($0.owner)" }) ?? ["failed"])")
            lines.append("feed: \(stack.changeFeedStatistics)")
            lines.append("the stack's log:\n  " + ManyProcessHarness.log(of: stack).joined(separator: "\n  "))
            guard let schema else { Issue.record(Comment(rawValue: lines.joined(separator: "\n"))); return }
            let slot = CaptureSources.slotName(schema: schema)
            let queries: [(String, PGQuery)] = [
                ("rows", "SELECT string_agg(id || '/' || owner || '@' || xmin::text, ' ' ORDER BY id) FROM \(unsafeRaw: quoteIdentifier(schema)).mp_items"),
                ("log", "SELECT string_agg(position || ':' || xid::text || ':' || changes::text, ' | ' ORDER BY position) FROM \(unsafeRaw: quoteIdentifier(schema)).skyros_change_log"),
                ("slot", "SELECT string_agg(slot_name || ' active=' || active || ' confirmed=' || confirmed_flush_lsn::text || ' now=' || pg_current_wal_lsn()::text, ' ') FROM pg_replication_slots WHERE slot_name = \(slot)"),
                ("walsenders", "SELECT string_agg(application_name || ' ' || state || ' sent=' || sent_lsn::text, ' ') FROM pg_stat_replication"),
                ("relay lock", "SELECT string_agg(pid::text || ' granted=' || granted, ' ') FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"),
            ]
            for (name, query) in queries {
                do {
                    let text = try await TestServer.withConnection { try await $0.query(query).first?.decode(String?.self, at: 0) }
                    lines.append("\(name): \((text ?? nil) ?? "none")")
                } catch {
                    lines.append("\(name): \(error)")
                }
            }
            Issue.record(Comment(rawValue: lines.joined(separator: "\n")))
        }
    }

    /// The sort changes, then the predicate twice (narrower, then another range with a window): each next
    /// element is the new query's result, its diff from the previous element; writes go on being observed.
    @Test(arguments: Kind.allCases)
    func anObservationChangesItsSortAndPredicateAndEveryDiffReplays(_ kind: Kind) async throws {
        try await ObservationTests.withStack(kind) { stack in
            try await Self.seed(stack, (1...8).map { (Int64($0), $0 % 3, $0 * 10, "t\(9 - $0)") })
            let byValue = FetchDescriptor<MPItem>(predicate: #Predicate { $0.value >= 20 }, sortBy: [SortDescriptor(\.value)])
            let observation = stack.observe(byValue)
            var iterator = observation.makeAsyncIterator()
            var replayed = try #require(try await iterator.next()).diff.applied(to: [])
            #expect(replayed.map(\.id) == [2, 3, 4, 5, 6, 7, 8])

            // The sort: every row kept, reordered (moves only).
            let byTitle = FetchDescriptor<MPItem>(predicate: #Predicate { $0.value >= 20 }, sortBy: [SortDescriptor(\.title)])
            observation.update(byTitle)
            let sorted = try await Self.nextMatching(&iterator, replaying: &replayed, stack, byTitle)
            #expect(sorted.values.map(\.id) == [8, 7, 6, 5, 4, 3, 2])
            #expect(sorted.diff.inserted.isEmpty && sorted.diff.deleted.isEmpty && !sorted.diff.moved.isEmpty)

            // The predicate, narrower: rows leave.
            let narrow = FetchDescriptor<MPItem>(
                predicate: #Predicate { $0.value >= 20 && $0.value <= 50 }, sortBy: [SortDescriptor(\.title)])
            observation.update(narrow)
            let narrowed = try await Self.nextMatching(&iterator, replaying: &replayed, stack, narrow)
            #expect(narrowed.values.map(\.id) == [5, 4, 3, 2])
            #expect(narrowed.diff.deleted.map(\.id).sorted() == [6, 7, 8])

            // The predicate again, another range, by value descending, windowed: rows leave and enter.
            let other = FetchDescriptor<MPItem>(
                predicate: #Predicate { $0.value <= 30 || $0.value >= 70 }, sortBy: [SortDescriptor(\.value, order: .reverse)],
                fetchLimit: 4)
            observation.update(other)
            let changed = try await Self.nextMatching(&iterator, replaying: &replayed, stack, other)
            #expect(changed.values.map(\.id) == [8, 7, 3, 2])
            #expect(!changed.diff.inserted.isEmpty && !changed.diff.deleted.isEmpty)

            // The new query is the one observed: a write it concerns reaches it.
            try await stack.write { try $0.insert(MPItem(id: 9, owner: 0, value: 75, title: "new")) }
            let written = try await Self.nextMatching(&iterator, replaying: &replayed, stack, other)
            #expect(written.values.map(\.id) == [8, 9, 7, 3])

            // An update whose result is the same still yields one element, with an empty diff.
            observation.update(FetchDescriptor<MPItem>(
                predicate: #Predicate { $0.value <= 30 || $0.value >= 65 }, sortBy: [SortDescriptor(\.value, order: .reverse)],
                fetchLimit: 4))
            let same = try #require(try await iterator.next())
            #expect(same.diff.isEmpty && same.values == written.values)
        }
    }

    /// An update before the first element makes it the new query's; an update reaches every iterator of the
    /// sequence, and iterators made later run the updated query.
    @Test(arguments: Kind.allCases)
    func anUpdateReachesEveryIteratorOfTheSequence(_ kind: Kind) async throws {
        try await ObservationTests.withStack(kind) { stack in
            try await Self.seed(stack, (1...4).map { (Int64($0), 0, $0, "") })
            let observation = stack.observe(FetchDescriptor<MPItem>(sortBy: [SortDescriptor(\.id)]))
            var early = observation.makeAsyncIterator()
            let odd = FetchDescriptor<MPItem>(predicate: #Predicate { $0.value % 2 == 1 }, sortBy: [SortDescriptor(\.id)])
            observation.update(odd)
            #expect(try await early.next()?.values.map(\.id) == [1, 3])

            var started = observation.makeAsyncIterator()
            var startedRows = try #require(try await started.next()).diff.applied(to: [])
            #expect(startedRows.map(\.id) == [1, 3])
            var earlyRows = startedRows
            let even = FetchDescriptor<MPItem>(predicate: #Predicate { $0.value % 2 == 0 }, sortBy: [SortDescriptor(\.id)])
            observation.update(even)
            let earlyResult = try #require(try await early.next())
            earlyRows = earlyResult.diff.applied(to: earlyRows)
            let startedResult = try #require(try await started.next())
            startedRows = startedResult.diff.applied(to: startedRows)
            #expect(earlyResult.values.map(\.id) == [2, 4] && startedResult.values.map(\.id) == [2, 4])
            #expect(earlyRows.map(\.id) == [2, 4] && startedRows.map(\.id) == [2, 4])
            var later = observation.makeAsyncIterator()
            #expect(try await later.next()?.values.map(\.id) == [2, 4])
        }
    }

    /// Updates racing a writer: every element replays from the previous one, every element after an update
    /// is the new query's (its rows satisfy its predicate, in its order), and once the writer stops the
    /// observation settles on what a fetch of the last query returns.
    @Test(arguments: Kind.allCases)
    func updatesRacingWritesLoseNothingAndEveryDiffReplays(_ kind: Kind) async throws {
        try await ObservationTests.withStack(kind) { stack in
            try await Self.seed(stack, (1...20).map { (Int64($0), 0, $0, "") })
            let observation = stack.observe(FetchDescriptor<MPItem>(sortBy: [SortDescriptor(\.id)]))
            var iterator = observation.makeAsyncIterator()
            var replayed = try #require(try await iterator.next()).diff.applied(to: [])
            let writer = Task {
                for round in 1...200 {
                    try await stack.write { context in
                        let id = Int64(round % 20 + 1)
                        try await context.update(MPItem(id: id, owner: 0, value: (round * 7) % 40, title: "w\(round)"))
                        try context.insert(MPItem(id: Int64(1000 + round), owner: 0, value: round % 40, title: "i\(round)"))
                    }
                    await Task.yield()      // let the updates interleave
                }
            }
            var last = FetchDescriptor<MPItem>()
            for step in 0..<12 {
                let threshold = step * 3
                let ascending = step % 2 == 0
                last = FetchDescriptor<MPItem>(
                    predicate: #Predicate { $0.value >= threshold },
                    sortBy: [SortDescriptor(\.value, order: ascending ? .forward : .reverse)], fetchLimit: 15)
                observation.update(last)
                let result = try #require(try await iterator.next())
                replayed = result.diff.applied(to: replayed)
                #expect(replayed == result.values, "step \(step)")
                #expect(result.values.allSatisfy { $0.value >= threshold }, "step \(step): an element of the old query")
                let values = result.values.map(\.value)
                #expect(values == (ascending ? values.sorted() : values.sorted(by: >)), "step \(step): not the new sort")
            }
            try await writer.value
            // The last element may be the final state already; otherwise one is coming (or an event was lost,
            // and the suite's time limit fails the test).
            if replayed != (try await Self.fetch(stack, last)) {
                _ = try await Self.nextMatching(&iterator, replaying: &replayed, stack, last)
            }
        }
    }

    /// A sectioned observation (sections by owner): rows moving between sections by this stack's writes, a
    /// section emptied and one created, then the sort changed (sections reordered) and the predicate changed.
    @Test(arguments: Kind.allCases)
    func aSectionedObservationReplaysRowsMovingBetweenSections(_ kind: Kind) async throws {
        try await ObservationTests.withStack(kind) { stack in
            try await Self.seed(stack, [(1, 1, 10, "a"), (2, 1, 20, "b"), (3, 2, 30, "c"), (4, 2, 40, "d"), (5, 3, 50, "e")])
            var descriptor = FetchDescriptor<MPItem>(sortBy: [SortDescriptor(\.owner), SortDescriptor(\.value)])
            let observation = stack.observe(descriptor, sectionedBy: \.owner)
            var iterator = observation.makeAsyncIterator()
            let first = try #require(try await iterator.next())
            var replayed = first.diff.applied(to: [])
            #expect(replayed == first.sections)
            #expect(first.sections.map(\.key) == [1, 2, 3])
            #expect(first.diff.insertedSections.count == 3 && first.diff.inserted.count == 5)

            // Row 2 moves to section 2; row 5 leaves section 3 (emptied, deleted) for a new section 4.
            try await stack.write { context in
                try await context.update(MPItem(id: 2, owner: 2, value: 20, title: "b"))
                try await context.update(MPItem(id: 5, owner: 4, value: 50, title: "e"))
            }
            let moved = try await Self.nextMatching(&iterator, replaying: &replayed, stack, descriptor)
            #expect(moved.sections.map(\.key) == [1, 2, 4])
            #expect(moved.diff.deleted.isEmpty && moved.diff.inserted.isEmpty)
            #expect(Set(moved.diff.moved.map(\.value.id)) == [2, 5])

            // The sort: sections by owner descending.
            descriptor = FetchDescriptor<MPItem>(sortBy: [SortDescriptor(\.owner, order: .reverse), SortDescriptor(\.value)])
            observation.update(descriptor)
            let reordered = try await Self.nextMatching(&iterator, replaying: &replayed, stack, descriptor)
            #expect(reordered.sections.map(\.key) == [4, 2, 1])
            #expect(!reordered.diff.movedSections.isEmpty)

            // The predicate: section 1 leaves.
            descriptor = FetchDescriptor<MPItem>(
                predicate: #Predicate { $0.owner >= 2 }, sortBy: [SortDescriptor(\.owner, order: .reverse), SortDescriptor(\.value)])
            observation.update(descriptor)
            let filtered = try await Self.nextMatching(&iterator, replaying: &replayed, stack, descriptor)
            #expect(filtered.sections.map(\.key) == [4, 2])
            #expect(filtered.diff.deletedSections.map(\.key) == [1])
        }
    }

    /// Another writer (psql) moves rows between sections: the observer hears of it through the change feed,
    /// and its diffs replay.
    @Test func aSectionedObservationFollowsAnotherWritersUpdates() async throws {
        try await ManyProcessHarness.withSchema { schema in
            let stack = try await ManyProcessHarness.stack(schema: schema)
            try await withCleanup {
                try await Self.seed(stack, [(1, 1, 10, "a"), (2, 1, 20, "b"), (3, 2, 30, "c")])
                let descriptor = FetchDescriptor<MPItem>(sortBy: [SortDescriptor(\.owner), SortDescriptor(\.value)])
                var iterator = stack.observe(descriptor, sectionedBy: \.owner).makeAsyncIterator()
                var replayed = try #require(try await iterator.next()).diff.applied(to: [])
                #expect(replayed.map(\.key) == [1, 2])

                // Row 1 into section 2, row 3 into a new section 5 (section 2 keeps row 1 only).
                try await Psql.run("UPDATE mp_items SET owner = 2 WHERE id = 1; UPDATE mp_items SET owner = 5 WHERE id = 3;", schema: schema)
                let moved = try await Self.nextMatching(&iterator, replaying: &replayed, stack, descriptor, schema: schema)
                #expect(moved.sections.map { $0.values.map(\.id) } == [[2], [1], [3]])

                // One statement empties section 1 and makes section 0.
                try await Psql.run("UPDATE mp_items SET owner = 0 WHERE owner = 1;", schema: schema)
                let emptied = try await Self.nextMatching(&iterator, replaying: &replayed, stack, descriptor, schema: schema)
                #expect(emptied.sections.map(\.key) == [0, 2, 5])
            } cleanup: {
                await stack.shutdown()
            }
        }
    }
}
