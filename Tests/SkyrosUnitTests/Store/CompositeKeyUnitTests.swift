import Foundation
import SkyrosPostgres
import SkyrosStore
import Testing

private struct Line: Entity, Hashable {
    var order: Int64
    var line: Int32
    var sku: String
    var id: CompositeKey<Int64, Int32> { CompositeKey(self.order, self.line) }
    static let tableName = "lines"
    static let columns: [EntityColumn<Line>] = [EntityColumn(\.order, "order"), EntityColumn(\.line, "line"), EntityColumn(\.sku, "sku")]
    static let primaryKey = PrimaryKey<Line>(\.order, \.line)

    enum CodingKeys: String, CodingKey { case order, line, sku }
}

/// Declares the key in another order than its id's values.
private struct Swapped: Entity {
    var order: Int64
    var line: Int32
    var id: CompositeKey<Int64, Int32> { CompositeKey(self.order, self.line) }
    static let tableName = "swapped"
    static let columns: [EntityColumn<Swapped>] = [EntityColumn(\.order, "order"), EntityColumn(\.line, "line")]
    static let primaryKey = PrimaryKey<Swapped>(\.line, \.order)
}

/// A composite id without a declared key.
private struct Undeclared: Entity {
    var order: Int64
    var line: Int32
    var id: CompositeKey<Int64, Int32> { CompositeKey(self.order, self.line) }
    static let tableName = "undeclared"
    static let columns: [EntityColumn<Undeclared>] = [EntityColumn(\.order, "order"), EntityColumn(\.line, "line")]
}

/// `RecordText`, `CompositeKey` and the SQL a composite key generates, without a server.
@Suite struct CompositeKeyUnitTests {
    @Test func rowTextQuotesWhatRecordOutQuotes() {
        #expect(RecordText.format(["1", "abc"]) == "(1,abc)")
        #expect(RecordText.format(["1", ""]) == #"(1,"")"#)
        #expect(RecordText.format(["1", nil]) == "(1,)")
        #expect(RecordText.format(["a b", "a,b", "(x)", #"q"t"#, #"b\s"#, "tab\tx"]) == #"("a b","a,b","(x)","q""t","b\\s","tab"# + "\t" + #"x")"#)
        #expect(RecordText.format(["naïve表"]) == "(naïve表)")
    }

    @Test(arguments: [["1", "abc"], ["", nil], [#"q"t"#, #"\\"#, "a,b)"], ["x y", "(", ")"], [nil, nil]] as [[String?]])
    func rowTextRoundTrips(fields: [String?]) throws {
        #expect(try RecordText.parse(ArraySlice(RecordText.format(fields).utf8)) == fields)
    }

    @Test(arguments: ["", "1,2", "(1,2", "(\"1,2)", "(1,2)x"])
    func malformedRowTextIsRefused(text: String) {
        #expect(throws: PGError.self) { try RecordText.parse(ArraySlice(text.utf8)) }
    }

    @Test func keysCompareAndHashByEveryValue() throws {
        #expect(CompositeKey(Int64(1), "b") == CompositeKey(Int64(1), "b"))
        #expect(CompositeKey(Int64(1), "b") != CompositeKey(Int64(1), "c"))
        #expect(CompositeKey(Int64(1), "z") < CompositeKey(Int64(2), "a"))
        #expect(CompositeKey(Int64(1), "a") < CompositeKey(Int64(1), "b"))
        #expect(Set([CompositeKey(Int64(1), "a"), CompositeKey(Int64(1), "a"), CompositeKey(Int64(2), "a")]).count == 2)
        #expect(try CompositeKey(Int64(7), Int32(3)).postgresText() == "(7,3)")
        #expect(try CompositeKey<Int64, Int32>(postgresText: ArraySlice("(7,3)".utf8), type: .record) == CompositeKey(7, 3))
        #expect(throws: PGError.self) { try CompositeKey<Int64, Int32>(postgresText: ArraySlice("(7,3,4)".utf8), type: .record) }
        #expect(throws: PGError.self) { try CompositeKey<Int64, Int32>(postgresText: ArraySlice("(7)".utf8), type: .record) }
    }

    @Test func theKeysColumnsAreTheDeclaredOnesInOrder() throws {
        #expect(try EntityQueryMetadata.of(Line.self).primaryKey.map(\.name) == ["order", "line"])
        let plan = try EntityPlan<Line>.shared
        #expect(plan.keyCondition(first: 3) == #""order" = $3 AND "line" = $4"#)
        #expect(plan.keyExpression == #"ROW("order", "line")"#)
        #expect(plan.quotedKeyColumns == #""order", "line""#)
        let key = try plan.idValue(CompositeKey(7, 3))
        #expect(key == PGValue(type: .record, text: "(7,3)"))
        #expect(try plan.keyBinds(key) == [PGValue(type: .int8, text: "7"), PGValue(type: .int4, text: "3")])
        #expect(plan.describe(id: key) == "7, 3")
        #expect(plan.key(of: try RowEncoder(plan: plan).encode(Line(order: 7, line: 3, sku: "x"))) == key)
    }

    @Test func aDraftedTableDeclaresTheWholeKey() throws {
        let draft = try EntitySchema.draft(Line.self, live: nil)
        let create = try #require(draft.up.first)
        #expect(create.contains(#"PRIMARY KEY ("order", "line")"#), "\(create)")
        #expect(create.contains(#""order" bigint NOT NULL"#) && create.contains(#""line" integer NOT NULL"#), "\(create)")
    }

    @Test func aKeyOutOfTheIdsOrderOrUndeclaredIsRefused() {
        #expect { try EntityQueryMetadata.of(Swapped.self) } throws: { error in
            "\(error)".contains("list the key in the id's order")
        }
        #expect { try EntityQueryMetadata.of(Undeclared.self) } throws: { error in
            "\(error)".contains("name its columns with static let primaryKey")
        }
    }
}
