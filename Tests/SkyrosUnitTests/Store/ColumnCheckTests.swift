import Foundation
@testable import SkyrosPostgres
@testable import SkyrosStore
import Testing

private struct Stamped: Entity, Equatable {
    var id: Int
    var at: Date
    let fixed: Date
    static let tableName = "stamped"
    static let columns: [EntityColumn<Stamped>] = [EntityColumn(\.id, "id"), EntityColumn(\.at, "at"), EntityColumn(\.fixed, "fixed")]
}

private struct StampedVar: Entity, Equatable {
    var id: Int
    var at: Date
    static let tableName = "stamped_var"
    static let columns: [EntityColumn<StampedVar>] = [EntityColumn(\.id, "id"), EntityColumn(\.at, "at")]
}

private struct Checked: Entity, Equatable {
    var id: Int
    var small: Int
    var count: Int
    var name: String
    var code: String?
    var price: Decimal
    var tiny: Decimal?
    var kind: String?
    var at: Date?

    static let tableName = "checked"
    static let columns: [EntityColumn<Checked>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.small, "small"), EntityColumn(\.count, "count"),
        EntityColumn(\.name, "name"), EntityColumn(\.code, "code"), EntityColumn(\.price, "price"),
        EntityColumn(\.tiny, "tiny"), EntityColumn(\.kind, "kind"), EntityColumn(\.at, "at"),
    ]

    static let definitions: [String: ColumnDefinition] = [
        "id": ColumnDefinition(.bigint), "small": ColumnDefinition(.smallint), "count": ColumnDefinition(.integer),
        "name": ColumnDefinition(.varchar(5)), "code": ColumnDefinition(.char(3), nullable: true),
        "price": ColumnDefinition(.numeric(6, 2)), "tiny": ColumnDefinition(.numeric(2, 3), nullable: true),
        "kind": ColumnDefinition(.enumeration("kind", labels: ["a", "b"]), nullable: true, hasDefault: true),
        "at": ColumnDefinition(.named("timestamptz"), nullable: true),
    ]

    static let fine = Checked(
        id: 1, small: 1, count: 1, name: "abc", code: nil, price: 1, tiny: nil, kind: "a", at: nil)
}

/// The door's checks on encoded values, without a server.
@Suite struct ColumnCheckTests {
    private static func door() -> ColumnDoor {
        let door = ColumnDoor()
        door.define(table: Checked.tableName, columns: Checked.definitions)
        return door
    }

    private static func refusal(_ change: (inout Checked) -> Void) -> ColumnValueError? {
        var row = Checked.fine
        change(&row)
        do {
            _ = try Self.door().admit(row)
            return nil
        } catch {
            return error as? ColumnValueError
        }
    }

    @Test func integerRanges() {
        #expect(Self.refusal { $0.count = Int(Int32.max) } == nil)
        #expect(Self.refusal { $0.count = Int(Int32.min) } == nil)
        let over = Self.refusal { $0.count = Int(Int32.max) + 1 }
        #expect(over == ColumnValueError(entity: "Checked", column: "count", columnType: "int4", reason: .outOfRange))
        #expect(Self.refusal { $0.count = Int(Int32.min) - 1 }?.reason == .outOfRange)
        #expect(Self.refusal { $0.small = 32_768 }?.columnType == "int2")
        #expect(Self.refusal { $0.small = -32_768 } == nil)
    }

    @Test func lengthsCountCharactersAsPostgreSQLDoes() {
        #expect(Self.refusal { $0.name = "ééééé" } == nil)  // 10 UTF-8 bytes, 5 characters
        #expect(Self.refusal { $0.name = "😀😀😀😀😀" } == nil)
        #expect(Self.refusal { $0.name = "abcdef" }?.reason == .tooLong)
        #expect(Self.refusal { $0.name = "abcdef" }?.columnType == "varchar(5)")
        #expect(Self.refusal { $0.code = "abcd" }?.columnType == "char(3)")
    }

    @Test func excessSpacesAreCutAndCharLosesTrailingSpaces() throws {
        var row = Checked.fine
        row.name = "abc     "
        row.code = "x     "
        let admitted = try Self.door().admit(row)
        #expect(admitted.value.name == "abc  ")
        #expect(admitted.value.code == "x")
        #expect(admitted.encoded[3].text == "abc  ")
    }

    @Test func numericPrecisionAndScale() throws {
        #expect(Self.refusal { $0.price = Decimal(string: "9999.99")! } == nil)
        #expect(Self.refusal { $0.price = Decimal(string: "-9999.99")! } == nil)
        let overflow = Self.refusal { $0.price = Decimal(string: "12345.67")! }
        #expect(overflow == ColumnValueError(entity: "Checked", column: "price", columnType: "numeric(6,2)", reason: .numericOverflow))
        // Rounded to the scale first (half away from zero), as PostgreSQL does: then too large.
        #expect(Self.refusal { $0.price = Decimal(string: "9999.995")! }?.reason == .numericOverflow)
        var row = Checked.fine
        row.price = Decimal(string: "-1.235")!
        #expect(try Self.door().admit(row).value.price == Decimal(string: "-1.24")!)
        row.price = Decimal(string: "9.994")!
        #expect(try Self.door().admit(row).value.price == Decimal(string: "9.99")!)
        // numeric(2,3): below 0.1 only.
        #expect(Self.refusal { $0.tiny = Decimal(string: "0.099")! } == nil)
        #expect(Self.refusal { $0.tiny = Decimal(string: "0.1")! }?.reason == .numericOverflow)
    }

    @Test func nullsAndEnumLabels() {
        // A nil into a nullable column, or into one with a default, is left alone.
        #expect(Self.refusal { $0.kind = nil } == nil)
        #expect(Self.refusal { $0.kind = "c" }?.reason == .notAnEnumLabel)
        let door = ColumnDoor()
        var definitions = Checked.definitions
        definitions["code"] = ColumnDefinition(.char(3))
        door.define(table: Checked.tableName, columns: definitions)
        #expect(throws: ColumnValueError(entity: "Checked", column: "code", columnType: "char(3)", reason: .nullNotAllowed)) {
            try door.admit(Checked.fine)
        }
    }

    @Test func textWithNULIsRefusedNamingTheColumn() {
        let error = Self.refusal { $0.name = "a\u{0}b" }
        #expect(error == ColumnValueError(entity: "Checked", column: "name", columnType: "varchar(5)", reason: .nulCharacter))
    }

    @Test func descriptionsNeverShowTheValue() throws {
        let error = try #require(Self.refusal { $0.count = 8_589_934_592 })
        #expect(error.description == #"entity Checked, column "count" (int4): value out of range for int4"#)
        #expect(!String(reflecting: error).contains("8589934592"))
    }

    /// A `var` date is rounded through its key path; a `let` one by decoding the row again: the same value.
    @Test func datesOfVarAndLetPropertiesAreRoundedAlike() throws {
        let at = Date(timeIntervalSince1970: 1_800_000_000.1234567)
        let rounded = Date(timeIntervalSince1970: 1_800_000_000.123457)
        let stamped = try ColumnDoor().admit(Stamped(id: 1, at: at, fixed: at))
        #expect(stamped.value.at == rounded)
        #expect(stamped.value.fixed == rounded)
        let writable = try ColumnDoor().admit(StampedVar(id: 1, at: at))
        #expect(writable.value.at == rounded)
    }

    @Test func datesAreRoundedToMicrosecondsTiesToEven() throws {
        var row = Checked.fine
        row.at = Date(timeIntervalSince1970: 1_800_000_000.1234567)
        let admitted = try ColumnDoor().admit(row)
        #expect(admitted.value.at == Date(timeIntervalSince1970: 1_800_000_000.123457))
        #expect(admitted.encoded[8].text == "2027-01-15 08:00:00.123457+00")
        // Already whole microseconds: the value is returned as it is.
        row.at = Date(timeIntervalSince1970: 1_800_000_000.25)
        #expect(try ColumnDoor().admit(row).value == row)
        // The normalised date is what decoding the encoded text gives.
        for interval in [0.0000005, 1.0000015, -0.0000005, 1_800_000_000.999_999_7, 123.456_789_5] {
            let date = Date(timeIntervalSince1970: interval)
            let decoded = try Date(postgresText: ArraySlice(try #require(try date.postgresText()).utf8), type: .timestamptz)
            #expect(date.postgresStored == decoded, "\(interval)")
        }
    }

    @Test func noDefinitionsChecksNothingButNUL() throws {
        var row = Checked.fine
        row.count = Int.max
        row.name = String(repeating: "x", count: 1000)
        #expect(try ColumnDoor().admit(row).value == row)
    }

    @Test func catalogTypeModifiersBecomeColumnTypes() {
        func type(_ name: String, _ modifier: Int) -> String {
            LiveColumn(
                name: "c", typeName: name, typeKind: "b", elementType: nil, notNull: true, hasDefault: false, unique: false,
                typeModifier: modifier
            ).columnType.description
        }
        #expect(type("varchar", 259) == "varchar(255)")
        #expect(type("bpchar", 8) == "char(4)")
        #expect(type("numeric", (6 << 16 | 2) + 4) == "numeric(6,2)")
        #expect(type("numeric", -1) == "numeric")
        #expect(type("int4", -1) == "int4")
        #expect(type("uuid", -1) == "uuid")
    }

    @Test func inMemoryPredicatesCompareCapturedDatesAtMicrosecondPrecision() throws {
        let stored = Date(timeIntervalSince1970: 1_800_000_000.123457)
        var row = Checked.fine
        row.at = stored
        let captured = Date(timeIntervalSince1970: 1_800_000_000.1234567)
        #expect(try InMemoryQuery.matches(#Predicate<Checked> { $0.at == captured }, row))
        let epoch = Date(timeIntervalSince1970: 0)
        #expect(try !InMemoryQuery.matches(#Predicate<Checked> { ($0.at ?? epoch) > captured }, row))
        #expect(try InMemoryQuery.filter(#Predicate<Checked> { ($0.at ?? epoch) >= captured && $0.count == 1 }, [row]).count == 1)
        #expect(try InMemoryQuery.filter(#Predicate<Checked> { [captured].contains($0.at ?? epoch) }, [row]).count == 1)
    }
}
