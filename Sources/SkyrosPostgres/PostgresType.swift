/// A PostgreSQL type, identified by its OID.
public struct PostgresType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let unspecified = PostgresType(rawValue: 0)
    public static let bool = PostgresType(rawValue: 16)
    public static let bytea = PostgresType(rawValue: 17)
    public static let name = PostgresType(rawValue: 19)
    public static let int8 = PostgresType(rawValue: 20)
    public static let int2 = PostgresType(rawValue: 21)
    public static let int4 = PostgresType(rawValue: 23)
    public static let text = PostgresType(rawValue: 25)
    public static let oid = PostgresType(rawValue: 26)
    public static let xid = PostgresType(rawValue: 28)
    public static let json = PostgresType(rawValue: 114)
    public static let float4 = PostgresType(rawValue: 700)
    public static let float8 = PostgresType(rawValue: 701)
    public static let unknown = PostgresType(rawValue: 705)
    public static let bpchar = PostgresType(rawValue: 1042)
    public static let varchar = PostgresType(rawValue: 1043)
    public static let date = PostgresType(rawValue: 1082)
    public static let time = PostgresType(rawValue: 1083)
    public static let timestamp = PostgresType(rawValue: 1114)
    public static let timestamptz = PostgresType(rawValue: 1184)
    public static let numeric = PostgresType(rawValue: 1700)
    public static let uuid = PostgresType(rawValue: 2950)
    public static let jsonb = PostgresType(rawValue: 3802)

    public static let boolArray = PostgresType(rawValue: 1000)
    public static let byteaArray = PostgresType(rawValue: 1001)
    public static let int2Array = PostgresType(rawValue: 1005)
    public static let int4Array = PostgresType(rawValue: 1007)
    public static let textArray = PostgresType(rawValue: 1009)
    public static let varcharArray = PostgresType(rawValue: 1015)
    public static let int8Array = PostgresType(rawValue: 1016)
    public static let float4Array = PostgresType(rawValue: 1021)
    public static let float8Array = PostgresType(rawValue: 1022)
    public static let timestampArray = PostgresType(rawValue: 1115)
    public static let dateArray = PostgresType(rawValue: 1182)
    public static let timestamptzArray = PostgresType(rawValue: 1185)
    public static let numericArray = PostgresType(rawValue: 1231)
    public static let uuidArray = PostgresType(rawValue: 2951)
    public static let jsonArray = PostgresType(rawValue: 199)
    public static let jsonbArray = PostgresType(rawValue: 3807)

    private static let names: [UInt32: String] = [
        0: "unspecified", 16: "bool", 17: "bytea", 19: "name", 20: "int8", 21: "int2", 23: "int4", 25: "text",
        26: "oid", 28: "xid", 114: "json", 700: "float4", 701: "float8", 705: "unknown", 1042: "bpchar",
        1043: "varchar", 1082: "date", 1083: "time", 1114: "timestamp", 1184: "timestamptz", 1700: "numeric",
        2950: "uuid", 3802: "jsonb", 1000: "bool[]", 1001: "bytea[]", 1005: "int2[]", 1007: "int4[]",
        1009: "text[]", 1015: "varchar[]", 1016: "int8[]", 1021: "float4[]", 1022: "float8[]",
        1115: "timestamp[]", 1182: "date[]", 1185: "timestamptz[]", 1231: "numeric[]", 2951: "uuid[]",
        199: "json[]", 3807: "jsonb[]",
    ]

    /// The type's SQL name when it is a built-in type this client knows, else `oid <n>`.
    public var description: String { Self.names[self.rawValue] ?? "oid \(self.rawValue)" }

    /// True for the one-dimensional array types listed above.
    public var isArray: Bool { Self.names[self.rawValue]?.hasSuffix("[]") ?? false }
}
