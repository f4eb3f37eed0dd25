import Foundation
@testable import Skyros
import SkyrosPostgres
import Testing

/// The row codec without a server.
@Suite("Row codec")
struct RowCodecTests {
    @Test func encodesEveryColumnInDeclaredOrderWithItsNativeType() throws {
        let user = StoreUser.make(6, age: 30)
        let values = try RowEncoder<StoreUser>().encode(user)
        #expect(values.count == StoreUser.columns.count)
        let byColumn = Dictionary(uniqueKeysWithValues: zip(StoreUser.columns.map(\.name), values))
        #expect(byColumn["id"] == PostgresValue(type: .int8, text: "6"))
        #expect(byColumn["age"] == PostgresValue(type: .int8, text: "30"))
        #expect(byColumn["email"] == PostgresValue(type: .text, text: "u6@example.com"))
        #expect(byColumn["created_at"]?.type == .timestamptz)
        #expect(byColumn["avatar"] == PostgresValue(type: .bytea, text: "\\x000102ff06"))
        #expect(byColumn["tags"] == PostgresValue(type: .textArray, text: "{\"t6\",\"common\"}"))
        #expect(byColumn["role"] == PostgresValue(type: .unspecified, text: "admin"))   // raw value, untyped
        #expect(byColumn["balance"] == PostgresValue(type: .numeric, text: "1234567896.123456789"))
        #expect(byColumn["external_id"] == PostgresValue(type: .uuid, text: "00000000-0000-0000-0000-000000000006"))
        #expect(byColumn["pets"] == PostgresValue(type: .jsonb, text: "[{\"legs\":4,\"name\":\"Rex\"}]"))
        #expect(byColumn["attributes"] == PostgresValue(type: .jsonb, text: "{\"level\":6}"))
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
        values[2] = PostgresValue(type: .int8, text: "not a number")
        let error = try #require(throws: PostgresError.self) { try RowDecoder<StoreUser>().decode(values: values) }
        #expect(error.kind == .decoding)
        #expect(error.column == "age")
        #expect(error.message.hasPrefix("entity StoreUser, column \"age\": "))

        values = try RowEncoder<StoreUser>().encode(StoreUser.make(1))
        values[1] = .null
        let null = try #require(throws: PostgresError.self) { try RowDecoder<StoreUser>().decode(values: values) }
        #expect(null.column == "name")

        values = try RowEncoder<StoreUser>().encode(StoreUser.make(1))
        values[10] = PostgresValue(type: .text, text: "{}")
        let nested = try #require(throws: PostgresError.self) { try RowDecoder<StoreUser>().decode(values: values) }
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
