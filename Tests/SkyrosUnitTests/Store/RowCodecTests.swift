import Foundation
@testable import Skyros
@testable import SkyrosObservation
@testable import SkyrosStack
@testable import SkyrosStore
@testable import SkyrosSync
import SkyrosPostgres
import SkyrosTestEntities
import Testing

/// The row codec without a server.
@Suite("Row codec")
struct RowCodecTests {
    /// The encoder tracks filled columns in a 64-bit set and an array beyond it: a row wider than 64 columns
    /// encodes whole, and a column no key fills is named on either side of the 64th.
    @Test func aRowWiderThan64ColumnsEncodesAndNamesAColumnNoKeyFills() throws {
        let cells = Array(100..<170)
        let values = try RowEncoder<WideRow>().encode(WideRow(id: 1, cells: cells))
        #expect(values.map(\.text) == ["1"] + cells.map { String($0) })
        for skipped in [0, 1, 62, 63, 64, 69] {   // c62 is the 64th column (after id), c63 the 65th
            let error = #expect(throws: EntityMappingError.self) {
                try RowEncoder<WideRow>().encode(WideRow(id: 1, cells: cells, skipping: skipped))
            }
            #expect(error?.column == "c\(skipped)")
        }
    }

    @Test func encodesEveryColumnInDeclaredOrderWithItsNativeType() throws {
        let user = StoreUser.make(6, age: 30)
        let values = try RowEncoder<StoreUser>().encode(user)
        #expect(values.count == StoreUser.columns.count)
        let byColumn = Dictionary(uniqueKeysWithValues: zip(StoreUser.columns.map(\.name), values))
        #expect(byColumn["id"] == PGValue(type: .int8, text: "6"))
        #expect(byColumn["age"] == PGValue(type: .int8, text: "30"))
        #expect(byColumn["email"] == PGValue(type: .text, text: "u6@example.com"))
        #expect(byColumn["created_at"]?.type == .timestamptz)
        #expect(byColumn["avatar"] == PGValue(type: .bytea, text: "\\x000102ff06"))
        #expect(byColumn["tags"] == PGValue(type: .textArray, text: "{\"t6\",\"common\"}"))
        #expect(byColumn["role"] == PGValue(type: .unspecified, text: "admin"))   // raw value, untyped
        #expect(byColumn["balance"] == PGValue(type: .numeric, text: "1234567896.123456789"))
        #expect(byColumn["external_id"] == PGValue(type: .uuid, text: "00000000-0000-0000-0000-000000000006"))
        #expect(byColumn["pets"] == PGValue(type: .jsonb, text: "[{\"legs\":4,\"name\":\"Rex\"}]"))
        #expect(byColumn["attributes"] == PGValue(type: .jsonb, text: "{\"level\":6}"))
        let address = try #require(byColumn["address"]?.text)
        #expect(address == "{\"city\":\"Skyros\",\"movedIn\":\"2020-09-13 12:26:40.500000+00\",\"street\":\"6 Main St\"}")
    }

    @Test func nilOptionalsEncodeAsNull() throws {
        var user = StoreUser.make(1)
        user.age = nil
        user.email = nil
        let values = try RowEncoder<StoreUser>().encode(user)
        #expect(values[2].isNull && values[3].isNull && values[7].isNull)
    }

    @Test func decodesWhatItEncodes() throws {
        for id in 1...6 {
            let user = StoreUser.make(id, age: id == 3 ? nil : id)
            let values = try RowEncoder<StoreUser>().encode(user)
            #expect(try RowDecoder<StoreUser>().decode(values: values) == user)
        }
        let quoted = StoreQuoted(id: UUID(), order: 3, select: "x", mixedCase: "y")
        #expect(try RowDecoder<StoreQuoted>().decode(values: RowEncoder<StoreQuoted>().encode(quoted)) == quoted)
    }

    @Test func reportsChangedColumns() throws {
        let before = StoreUser.make(2)
        var after = before
        after.name = "other"
        after.address.city = "Athens"
        #expect(try RowEncoder<StoreUser>().changedColumns(from: before, to: after) == ["name", "address"])
        #expect(try RowEncoder<StoreUser>().changedColumns(from: before, to: before).isEmpty)
    }

    /// Update statements guarded by a version are built once per schema, column set and guard, and reused: each
    /// key gets its own text, and binds follow it. Unguarded and merge-by-property updates add their guards and
    /// their as-written check to the shared head. The read by id is kept
    /// per schema.
    @Test func statementsAreKeptPerSchemaColumnsAndGuard() throws {
        let row = StoreQuoted(id: UUID(), order: 3, select: "x", mixedCase: "y")
        func update(_ columns: [String], expected: Int64?, schema: String?, resolution: ConflictResolution = .fail) throws
            -> PGQuery
        {
            try #require(try EntityChange<StoreQuoted>.updateQuery(row, columns, expected: expected, resolution: resolution, schema: schema)).query
        }
        let guarded = try update(["order", "select"], expected: 7, schema: "a")
        #expect(guarded.sql == #"UPDATE "a"."user data" SET "order" = $1, "select" = $2 WHERE "id" = $3 AND xmin::text::int8 = $4 RETURNING xmin::text::int8"#)
        #expect(guarded.binds.map(\.text) == ["3", "x", row.id.uuidString.lowercased(), "7"])
        #expect(try update(["order", "select"], expected: 7, schema: "a").sql == guarded.sql)
        #expect(try update(["order", "select"], expected: 7, schema: "b").sql.hasPrefix(#"UPDATE "b"."user data" SET"#))
        // Without a version guard, the update also tells whether the columns it does not write hold the value
        // it carries (bound after the others).
        let unguarded = try update(["order", "select"], expected: nil, schema: "a")
        #expect(unguarded.sql
            == #"UPDATE "a"."user data" SET "order" = $1, "select" = $2 WHERE "id" = $3 RETURNING xmin::text::int8 AS v, ("Mixed ""Case"""::text IS NOT DISTINCT FROM $4::text) AS as_written"#)
        #expect(unguarded.binds.map(\.text) == ["3", "x", row.id.uuidString.lowercased(), "y"])
        #expect(try update(["order", "select", "Mixed \"Case\""], expected: nil, schema: nil).sql.hasSuffix("RETURNING xmin::text::int8 AS v, (true) AS as_written"))
        let merged = try update(
            ["select"], expected: 7, schema: "a", resolution: .compareColumns(originals: ["select": PGValue(type: .text, text: "w")]))
        #expect(merged.sql == #"UPDATE "a"."user data" SET "select" = $1 WHERE "id" = $2 AND "select" IS NOT DISTINCT FROM $3 RETURNING xmin::text::int8 AS v, ("order"::text IS NOT DISTINCT FROM $4::text AND "Mixed ""Case"""::text IS NOT DISTINCT FROM $5::text) AS as_written"#)
        #expect(merged.binds.map(\.text) == ["x", row.id.uuidString.lowercased(), "w", "3", "y"])
        #expect(try EntityChange<StoreQuoted>.updateQuery(row, [], expected: 7, resolution: .fail, schema: "a") == nil)

        let plan = try EntityPlan<StoreQuoted>.shared
        #expect(plan.selectByIDSQL(schema: "a")
            == #"SELECT "id", "order", "select", "Mixed ""Case""", xmin AS "__version" FROM "a"."user data" WHERE "id" = $1"#)
        #expect(plan.selectByIDSQL(schema: nil).hasSuffix(#"FROM "user data" WHERE "id" = $1"#))
        #expect(plan.selectByIDSQL(schema: "a") == plan.selectByIDSQL(schema: "a"))
    }

    @Test func snakeCaseMatchesFoundationsRule() {
        let strategy = ColumnKeyStrategy.convertToSnakeCase
        #expect(strategy.columnName(forKey: "createdAt") == "created_at")
        #expect(strategy.columnName(forKey: "externalID") == "external_id")
        #expect(strategy.columnName(forKey: "userURLValue") == "user_url_value")
        #expect(strategy.columnName(forKey: "id") == "id")
        #expect(strategy.columnName(forKey: "v2Name") == "v2_name")
        #expect(ColumnKeyStrategy.useCodingKeys.columnName(forKey: "createdAt") == "createdAt")
    }

    @Test func decodingErrorsNameEntityAndColumn() throws {
        var values = try RowEncoder<StoreUser>().encode(StoreUser.make(1))
        values[2] = PGValue(type: .int8, text: "not a number")
        let error = try #require(throws: PGError.self) { try RowDecoder<StoreUser>().decode(values: values) }
        #expect(error.kind == .decoding)
        #expect(error.column == "age")
        #expect(error.message.hasPrefix("entity StoreUser, column \"age\": "))

        values = try RowEncoder<StoreUser>().encode(StoreUser.make(1))
        values[1] = .null
        let null = try #require(throws: PGError.self) { try RowDecoder<StoreUser>().decode(values: values) }
        #expect(null.column == "name")

        values = try RowEncoder<StoreUser>().encode(StoreUser.make(1))
        values[10] = PGValue(type: .text, text: "{}")
        let nested = try #require(throws: PGError.self) { try RowDecoder<StoreUser>().decode(values: values) }
        #expect(nested.message.contains("needs a json or jsonb column"))
    }

    @Test func theVersionColumnMustNotBeAnEntityColumn() {
        #expect(throws: EntityMappingError.self) { try RowEncoder<StoreVersionListed>().encode(StoreVersionListed(id: 1, version: 1)) }
    }
}

struct StoreVersionListed: Entity {
    var id: Int
    var version: Int
    static let tableName = "versioned"
    static let columns: [EntityColumn<StoreVersionListed>] = [EntityColumn(\.id, "id"), EntityColumn(\.version, "version")]
    static let versionColumn: String? = "version"
}

/// An entity with 71 columns (`id`, `c0`…`c69`); `skipping` leaves one column out of its encoding.
struct WideRow: Entity {
    var id: Int
    var cells: [Int]
    var skipping: Int? = nil

    static let tableName = "wide_rows"
    static let columns: [EntityColumn<WideRow>] =
        [EntityColumn(\.id, "id")] + (0..<70).map { EntityColumn(\WideRow.cells[$0], "c\($0)") }

    init(id: Int, cells: [Int], skipping: Int? = nil) {
        (self.id, self.cells, self.skipping) = (id, cells, skipping)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: ColumnKey.self)
        try container.encode(self.id, forKey: ColumnKey("id"))
        for (index, cell) in self.cells.enumerated() where index != self.skipping {
            try container.encode(cell, forKey: ColumnKey("c\(index)"))
        }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: ColumnKey.self)
        self.id = try container.decode(Int.self, forKey: ColumnKey("id"))
        self.cells = try (0..<70).map { try container.decode(Int.self, forKey: ColumnKey("c\($0)")) }
    }
}
