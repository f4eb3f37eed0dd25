@testable import SkyrosStack
import SkyrosPostgres
import SkyrosStore
import SkyrosTestEntities
import Testing

/// The order a save's changes commit in: foreign keys first, otherwise the save's own order.
@Suite struct ForeignKeyOrderUnitTests {
    static func inserted<T: Entity>(_ value: T) -> PendingRow {
        PendingRow(key: try! RowKey(value), kind: EntityKind<T>(), id: value.id, state: .inserted(value))
    }

    static func deleted<T: Entity>(_ type: T.Type, _ id: T.ID) -> PendingRow {
        PendingRow(key: try! RowKey(type, id: id), kind: EntityKind<T>(), id: id, state: .deleted(base: .none, emit: true))
    }

    static func updated<T: Entity>(_ value: T, from original: T) -> PendingRow {
        PendingRow(key: try! RowKey(value), kind: EntityKind<T>(), id: value.id, state: .updated(value, original: original, base: .none))
    }

    /// `table:id` of each slot, in order.
    static func names(_ slots: [ResolvedSlot]) -> [String] {
        slots.map { slot in
            switch slot {
            case .row(let row): "\(row.key.table.dropFirst(4)):\(row.key.id.text ?? "-")"
            case .setWrite(let write): "where:\(write.table)"
            }
        }
    }

    static func order(_ rows: [PendingRow]) -> [String] { self.names(ForeignKeyOrder.ordered(rows.map { .row($0) })) }

    @Test func insertsFollowTheRowsTheyReferTo() {
        let order = Self.order([
            Self.inserted(RelReview(id: 1, book: 10, stars: 5)),
            Self.inserted(RelBook(id: 10, title: "t", author: 7)),
            Self.inserted(RelAuthor(id: 7, name: "a", publisher: 3)),
            Self.inserted(RelPublisher(id: 3, name: "p")),
        ])
        #expect(order == ["publishers:3", "authors:7", "books:10", "reviews:1"])
    }

    @Test func independentRowsKeepTheSaveOrder() {
        // No row refers to another row of the save: nothing moves (a delete and an insert reusing a unique value
        // must stay in the order they were made).
        let rows = [
            Self.deleted(RelAuthor.self, 4), Self.inserted(RelAuthor(id: 5, name: "a", publisher: nil)),
            Self.inserted(RelBook(id: 1, title: "t", author: 99)), Self.deleted(RelPublisher.self, 8),
            Self.inserted(RelPublisher(id: 2, name: "p")),
        ]
        #expect(Self.order(rows) == ["authors:4", "authors:5", "books:1", "publishers:8", "publishers:2"])
    }

    @Test func onlyTheDependentRowMoves() {
        let order = Self.order([
            Self.inserted(RelPublisher(id: 1, name: "p")),
            Self.inserted(RelBook(id: 10, title: "t", author: 7)),
            Self.inserted(RelPublisher(id: 2, name: "q")),
            Self.inserted(RelAuthor(id: 7, name: "a", publisher: nil)),
            Self.inserted(RelPublisher(id: 3, name: "r")),
        ])
        #expect(order == ["publishers:1", "publishers:2", "authors:7", "books:10", "publishers:3"])
    }

    @Test func deletesOfReferringRowsGoFirst() {
        let order = Self.order([
            Self.deleted(RelBook.self, 1),
            Self.deleted(RelAuthor.self, 1),
            Self.deleted(RelReview.self, 1),
            Self.updated(RelReview(id: 2, book: 2, stars: 1), from: RelReview(id: 2, book: 1, stars: 1)),
        ])
        #expect(order == ["reviews:1", "reviews:2", "books:1", "authors:1"])
    }

    @Test func setWritesAreBarriers() {
        let barrier = PendingSetWrite(table: "rel_books", updates: false, emit: { _ in })
        let slots: [ResolvedSlot] = [
            .row(Self.inserted(RelBook(id: 10, title: "t", author: 7))), .setWrite(barrier),
            .row(Self.inserted(RelAuthor(id: 7, name: "a", publisher: nil))),
        ]
        #expect(Self.names(ForeignKeyOrder.ordered(slots)) == ["books:10", "where:rel_books", "authors:7"])
    }

    @Test func cyclesKeepTheirOrder() {
        var graph = DependencyGraph(count: 4)
        graph.edge(from: 2, to: 1)
        graph.edge(from: 1, to: 2)
        graph.edge(from: 3, to: 0)
        #expect(graph.stableOrder() == [3, 0, 1, 2])   // 3 is ready first; then the cycle gives way in save order
        var gated = DependencyGraph(count: 3)
        let gate = gated.addGate()
        gated.edge(from: 2, to: gate)
        gated.edge(from: gate, to: 0)
        #expect(gated.stableOrder() == [1, 2, 0])
    }

    @Test func aThousandIndependentRowsAreLeftAsTheyAre() {
        let rows = (1...1000).map { Self.inserted(RelBook(id: Int64($0), title: "t", author: 1)) }
        #expect(Self.order(rows) == rows.map { "books:\($0.key.id.text ?? "")" })
    }
}
