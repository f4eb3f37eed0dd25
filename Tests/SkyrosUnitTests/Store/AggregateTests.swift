import Foundation
import SkyrosPostgres
@_spi(Benchmarks) @testable import SkyrosStore
import Testing

private struct Sale: Entity, Equatable {
    var id: Int
    var region: String?
    var units: Int
    var price: Decimal?
    var ratio: Double

    static let tableName = "sales"
    static let columns: [EntityColumn<Sale>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.region, "region"), EntityColumn(\.units, "units"),
        EntityColumn(\.price, "price"), EntityColumn(\.ratio, "ratio"),
    ]
}

private struct SaleUnits: Decodable, Equatable {
    var id: Int
    var units: Int
}

/// Aggregates and projections on the in-memory store: SQL's NULL and empty-set rules, group order, PostgreSQL's
/// numeric division (the values below are PostgreSQL 15's output).
@Suite("Aggregates (in memory)")
struct AggregateTests {
    @Test func numericDivisionUsesPostgresScale() {
        #expect(NumericDivision.quotient(4, scale: 0, dividedBy: 3) == Decimal(string: "1.3333333333333333"))
        #expect(NumericDivision.quotient(3, scale: 0, dividedBy: 4) == Decimal(string: "0.75000000000000000000"))
        #expect(NumericDivision.quotient(-2, scale: 0, dividedBy: 3) == Decimal(string: "-0.66666666666666666667"))
        #expect(NumericDivision.quotient(100_000, scale: 0, dividedBy: 3) == Decimal(string: "33333.333333333333"))
        #expect(NumericDivision.quotient(Decimal(string: "0.003")!, scale: 3, dividedBy: 7)
            == Decimal(string: "0.00042857142857142857"))
        #expect(NumericDivision.displayScale(Decimal(string: "1.250")!) >= 2)
        #expect(NumericDivision.displayScale(Decimal(12)) == 0)
    }

    @Test func emptyStoreGivesCountZeroAndNils() async throws {
        let store = InMemoryStore()
        let (count, units, average, lowest) = try await store.aggregate(
            FetchDescriptor<Sale>(), .count, .sum(\.units), .avg(\.units), .min(\.region))
        #expect(count == 0 && units == nil && average == nil && lowest == nil)
        #expect(try await store.aggregate(FetchDescriptor<Sale>(), groupBy: \.region, .count).isEmpty)
    }

    @Test func groupsOrderNullFirstAndStringsByCodePoint() async throws {
        let store = InMemoryStore()
        try await store.bulkInsert([
            Sale(id: 1, region: "b", units: 1, price: nil, ratio: 0.5),
            Sale(id: 2, region: nil, units: 2, price: Decimal(string: "1.5"), ratio: 0.25),
            Sale(id: 3, region: "B", units: 3, price: nil, ratio: 1),
            Sale(id: 4, region: "é", units: 4, price: Decimal(string: "2.25"), ratio: 2),
            Sale(id: 5, region: "b", units: 5, price: nil, ratio: -1),
        ])
        let groups = try await store.aggregate(
            FetchDescriptor<Sale>(), groupBy: \.region, .count, .sum(\.units), .sum(\.price), .avg(\.ratio), .count(\.price))
        #expect(groups.map(\.key) == [nil, "B", "b", "é"])
        #expect(groups.map(\.values.0) == [1, 1, 2, 1])
        #expect(groups.map(\.values.1) == [2, 3, 6, 4])
        #expect(groups.map(\.values.2) == [Decimal(string: "1.5"), nil, nil, Decimal(string: "2.25")])
        #expect(groups.map(\.values.3) == [0.25, 1, -0.25, 2])
        #expect(groups.map(\.values.4) == [1, 0, 0, 1])
        let (highest, lowest): (String?, String?) = try await store.aggregate(FetchDescriptor<Sale>(), .max(\.region), .min(\.region))
        #expect(highest == "é" && lowest == "B")

        let windowed: Int? = try await store.aggregate(
            FetchDescriptor<Sale>(sortBy: [SortDescriptor(\.units, order: .reverse)], fetchLimit: 2), .sum(\.units))
        #expect(windowed == 9)

        let projected = try await store.fetch(
            FetchDescriptor<Sale>(predicate: #Predicate { $0.units > 2 }), as: SaleUnits.self, propertiesToFetch: [\.id, \.units])
        #expect(projected == [SaleUnits(id: 3, units: 3), SaleUnits(id: 4, units: 4), SaleUnits(id: 5, units: 5)])
    }

    @Test func integerSumOutOfRangeThrows22003() async throws {
        let store = InMemoryStore()
        try await store.bulkInsert([
            Sale(id: 1, region: nil, units: .max, price: nil, ratio: 0), Sale(id: 2, region: nil, units: 1, price: nil, ratio: 0),
        ])
        await #expect(throws: PGError.self) {
            let _: Int? = try await store.aggregate(FetchDescriptor<Sale>(), .sum(\.units))
        }
        // The average of the same values is exact (the sum is taken in 128 bits, as PostgreSQL's numeric).
        let average: Decimal? = try await store.aggregate(FetchDescriptor<Sale>(), .avg(\.units))
        #expect(average == Decimal(string: "4611686018427387904"))
    }

    @Test func aProjectionReadingAnUnfetchedColumnThrows() async throws {
        let store = InMemoryStore()
        try await store.insert(Sale(id: 1, region: nil, units: 1, price: nil, ratio: 0))
        await #expect(throws: EntityMappingError.self) {
            _ = try await store.fetch(FetchDescriptor<Sale>(), as: SaleUnits.self, propertiesToFetch: [\.id])
        }
    }
}
