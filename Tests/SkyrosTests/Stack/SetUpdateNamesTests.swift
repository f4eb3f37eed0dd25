import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// The names every hostile-name test must cover at once, fixed (the drawn namings cover the pool at random):
/// a schema with quotes, a 63-byte table, a keyword key, and `n`, `prefix`, `o`, `$1` and a quote as columns.
enum SetUpdateNaming: HostileNaming {
    static let names = [#"acc "sch" o'neil"#, String(repeating: "w", count: 63), "select", "n", #"a"b$1"#, "prefix", "o", "$1"]
}

@Suite("Set-based updates with hostile names")
struct SetUpdateNamesTests {
    /// `update(where:set:)` through a queued write (the pipelined group) and through the store, on a table whose
    /// identifiers all need quoting: the stored rows are exactly what the expressions make of them.
    @Test func aSetBasedUpdateQuotesEveryName() async throws {
        typealias Names = SetUpdateNaming
        typealias Row = HostileRow<Names>
        let schema = TestServer.uniqueSchemaName(Names.schemaPrefix)
        let table = "\(quoteIdentifier(schema)).\(quoteIdentifier(Names.table))"
        let (key, count, label) = (quoteIdentifier(Names.key), quoteIdentifier(Names.count), quoteIdentifier(Names.label))
        try await TestServer.withConnection { connection in
            _ = try await connection.execute(script: """
                CREATE SCHEMA \(quoteIdentifier(schema));
                CREATE TABLE \(table) (\(key) bigint PRIMARY KEY, \(count) bigint NOT NULL, \(label) text NOT NULL\
                \(Names.unmapped.map { ", \(quoteIdentifier($0)) text" }.joined()));
                """)
        }
        try await withCleanup {
            let stack = try await DataStack.start(
                DataStackConfiguration(store: .postgres(try TestServer.configuration, schema: schema), entities: [Row.self]))
            try await withCleanup {
                try await stack.write(durability: .committed) { context in
                    for id in Int64(1)...3 { try context.insert(Row(id: id, count: id, label: "row \(id)")) }
                }
                try await stack.write(durability: .committed) { context in
                    try context.update(
                        where: #Predicate<Row> { $0.count >= 2 }, set: [.set(\.count, to: \.count * 10 + \.id), .set(\.label, to: "set")])
                }
                let updated = try await stack.store.update(where: #Predicate<Row> { $0.label == "row 1" }, set: [.set(\.count, to: \.count - 1)])
                #expect(updated == [1])
                let stored = try await TestServer.withConnection { connection in
                    try await connection.query(PGQuery(unsafeSQL: "SELECT \(key), \(count), \(label) FROM \(table) ORDER BY 1")).map {
                        "\(try $0.decode(Int64.self, at: 0)):\(try $0.decode(Int64.self, at: 1)):\(try $0.decode(String.self, at: 2))"
                    }
                }
                #expect(stored == ["1:0:row 1", "2:22:set", "3:33:set"], "names \(Names.names)")
                #expect(try await stack.read { try await $0.fetch(FetchDescriptor<Row>(sortBy: [SortDescriptor(\.id)])) }.map(\.count) == [0, 22, 33])
            } cleanup: {
                await stack.shutdown()
            }
        } cleanup: {
            await TestServer.dropSchema(schema)
        }
    }
}
