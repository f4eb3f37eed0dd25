import Foundation
@_spi(Benchmarks) @testable import Skyros
@testable import SkyrosStore
import SkyrosPostgres
import SkyrosTestFixtures
import SkyrosTestSupport
import Testing

/// A row with a PostgreSQL enum column and an optional one, mapped to a raw-value Swift enum.
struct EnumRow: Entity, Equatable {
    var id: Int
    var status: PlanStatus
    var previous: PlanStatus?

    static let tableName = "enum_rows"
    static let columns: [EntityColumn<EnumRow>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.status, "status"), EntityColumn(\.previous, "previous"),
    ]
}

/// Predicates and sorts on raw-value enums stored in PostgreSQL enum columns: the value is bound untyped, so
/// PostgreSQL compares the column as its enum (in the enum's declared order, which `PlanStatus`'s `Comparable`
/// follows); both stores return the same ordered rows.
@Suite("Query: raw-value enums on enum columns")
struct EnumPredicateTests {
    @Test func enumPredicatesAndSortsAgreeWithMemory() async throws {
        var rng = SeededGenerator(seed: 0xE_0001)
        let statuses = PlanStatus.allCases
        let rows = (1...200).map { id in
            EnumRow(id: id, status: statuses.randomElement(using: &rng)!, previous: Int.random(in: 0...3, using: &rng) == 0 ? nil : statuses.randomElement(using: &rng)!)
        }
        try await TestServer.withSchema("enums") { schema in
            let pool = PGConnectionPool(configuration: .init(maximumConnections: 2), postgres: try TestServer.configuration)
            try await withCleanup {
                let s = quoteIdentifier(schema)
                try await pool.withConnection {
                    _ = try await $0.execute(script: """
                        CREATE TYPE \(s).plan_status AS ENUM ('closed', 'open', 'flagged', 'escalated');
                        CREATE TABLE \(s).enum_rows (id bigint PRIMARY KEY, status \(s).plan_status NOT NULL, previous \(s).plan_status);
                        """)
                }
                let postgres = PostgresStore(pool: pool, schema: schema)
                try await postgres.validate([EnumRow.self])
                let memory = InMemoryStore()
                try await postgres.bulkInsert(rows)
                try await memory.bulkInsert(rows)
                var predicates: [Predicate<EnumRow>] = []
                let open = PlanStatus.open, closed = PlanStatus.closed
                for status in statuses {
                    let optional: PlanStatus? = status
                    let upper = max(open, status)
                    predicates += [
                        #Predicate { $0.status == status }, #Predicate { $0.status != status }, #Predicate { $0.status < status },
                        #Predicate { $0.status >= status }, #Predicate { $0.previous == optional }, #Predicate { $0.previous != optional },
                        #Predicate { (open...upper).contains($0.status) },
                    ]
                }
                let none: PlanStatus? = nil
                let some = [PlanStatus.open, .escalated], someOptional: [PlanStatus?] = [nil, .flagged], empty: [PlanStatus] = []
                predicates += [
                    #Predicate { $0.previous == none }, #Predicate { $0.previous != none }, #Predicate { some.contains($0.status) },
                    #Predicate { someOptional.contains($0.previous) }, #Predicate { empty.contains($0.status) },
                    #Predicate { ($0.previous ?? closed) > $0.status },
                ]
                let sorts: [[SortDescriptor<EnumRow>]] = [[SortDescriptor(\.status)], [SortDescriptor(\.previous, order: .reverse), SortDescriptor(\.status)]]
                var nonTrivial = 0
                for predicate in predicates {
                    for sort in sorts {
                        let descriptor = FetchDescriptor(predicate: predicate, sortBy: sort)
                        let expected = try await memory.fetch(descriptor).map(\.value.id)
                        let actual = try await postgres.fetch(descriptor).map(\.value.id)
                        let sql = try SQLQueryBuilder.select(descriptor, schema: schema, includeVersion: false).sql
                        #expect(actual == expected, "\(predicate.expression)\n sql: \(sql)")
                        if !expected.isEmpty && expected.count < rows.count { nonTrivial += 1 }
                    }
                }
                #expect(nonTrivial >= predicates.count)
            } cleanup: {
                await pool.shutdown()
            }
        }
    }
}
