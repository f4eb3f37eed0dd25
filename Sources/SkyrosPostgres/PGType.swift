/// A PostgreSQL type, identified by its OID.
public struct PGType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The type's OID in `pg_type` (built-in OIDs are stable across servers).
    public let rawValue: UInt32
    /// A type by OID, for a type that has no constant here (an enum's or a domain's OID, read from `pg_type`).
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// OID 0: lets the server infer a parameter's type from the statement.
    public static let unspecified = PGType(rawValue: 0)
    /// `boolean`.
    public static let bool = PGType(rawValue: 16)
    /// `bytea`: binary data (`Data`).
    public static let bytea = PGType(rawValue: 17)
    /// `name`: the 63-byte type of system identifiers.
    public static let name = PGType(rawValue: 19)
    /// `bigint` (`Int`, `Int64`).
    public static let int8 = PGType(rawValue: 20)
    /// `smallint` (`Int16`).
    public static let int2 = PGType(rawValue: 21)
    /// `integer` (`Int32`).
    public static let int4 = PGType(rawValue: 23)
    /// `text` (`String`).
    public static let text = PGType(rawValue: 25)
    /// `oid`: an object identifier.
    public static let oid = PGType(rawValue: 26)
    /// `xid`: a transaction id.
    public static let xid = PGType(rawValue: 28)
    /// `json`: JSON kept as text (``PGJSON``).
    public static let json = PGType(rawValue: 114)
    /// `real` (`Float`).
    public static let float4 = PGType(rawValue: 700)
    /// `double precision` (`Double`).
    public static let float8 = PGType(rawValue: 701)
    /// `unknown`: an untyped literal.
    public static let unknown = PGType(rawValue: 705)
    /// `character(n)`: blank-padded text.
    public static let bpchar = PGType(rawValue: 1042)
    /// `character varying(n)`.
    public static let varchar = PGType(rawValue: 1043)
    /// `date`.
    public static let date = PGType(rawValue: 1082)
    /// `time` without time zone.
    public static let time = PGType(rawValue: 1083)
    /// `timestamp` without time zone.
    public static let timestamp = PGType(rawValue: 1114)
    /// `timestamp with time zone` (`Date`).
    public static let timestamptz = PGType(rawValue: 1184)
    /// `numeric` (`Decimal`).
    public static let numeric = PGType(rawValue: 1700)
    /// `uuid` (`UUID`).
    public static let uuid = PGType(rawValue: 2950)
    /// `jsonb`: binary JSON (``PGJSONB``).
    public static let jsonb = PGType(rawValue: 3802)
    /// `record`: an anonymous row, such as `ROW(a, b)` (a composite primary key's text form).
    public static let record = PGType(rawValue: 2249)

    /// `boolean[]`.
    public static let boolArray = PGType(rawValue: 1000)
    /// `bytea[]`.
    public static let byteaArray = PGType(rawValue: 1001)
    /// `smallint[]`.
    public static let int2Array = PGType(rawValue: 1005)
    /// `integer[]`.
    public static let int4Array = PGType(rawValue: 1007)
    /// `text[]` (`[String]`).
    public static let textArray = PGType(rawValue: 1009)
    /// `character varying[]`.
    public static let varcharArray = PGType(rawValue: 1015)
    /// `bigint[]` (`[Int]`).
    public static let int8Array = PGType(rawValue: 1016)
    /// `real[]`.
    public static let float4Array = PGType(rawValue: 1021)
    /// `double precision[]`.
    public static let float8Array = PGType(rawValue: 1022)
    /// `timestamp[]`.
    public static let timestampArray = PGType(rawValue: 1115)
    /// `date[]`.
    public static let dateArray = PGType(rawValue: 1182)
    /// `timestamp with time zone[]`.
    public static let timestamptzArray = PGType(rawValue: 1185)
    /// `numeric[]`.
    public static let numericArray = PGType(rawValue: 1231)
    /// `uuid[]` (`[UUID]`).
    public static let uuidArray = PGType(rawValue: 2951)
    /// `json[]`.
    public static let jsonArray = PGType(rawValue: 199)
    /// `jsonb[]`.
    public static let jsonbArray = PGType(rawValue: 3807)

    private static let names: [UInt32: String] = [
        0: "unspecified", 16: "bool", 17: "bytea", 19: "name", 20: "int8", 21: "int2", 23: "int4", 25: "text",
        26: "oid", 28: "xid", 114: "json", 700: "float4", 701: "float8", 705: "unknown", 1042: "bpchar",
        1043: "varchar", 1082: "date", 1083: "time", 1114: "timestamp", 1184: "timestamptz", 1700: "numeric",
        2950: "uuid", 3802: "jsonb", 1000: "bool[]", 1001: "bytea[]", 1005: "int2[]", 1007: "int4[]",
        1009: "text[]", 1015: "varchar[]", 1016: "int8[]", 1021: "float4[]", 1022: "float8[]",
        1115: "timestamp[]", 1182: "date[]", 1185: "timestamptz[]", 1231: "numeric[]", 2951: "uuid[]",
        199: "json[]", 3807: "jsonb[]", 2249: "record",
    ]

    /// The type's SQL name when it is a built-in type this client knows, else `oid <n>`.
    public var description: String { Self.names[self.rawValue] ?? "oid \(self.rawValue)" }

    /// True for the one-dimensional array types listed above.
    public var isArray: Bool { Self.names[self.rawValue]?.hasSuffix("[]") ?? false }
}
