extension Bool: PostgresArrayElement {
    public static var postgresType: PostgresType { .bool }
    public static var postgresArrayType: PostgresType { .boolArray }
    public func postgresText() throws -> String? { self ? "t" : "f" }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard type == .bool || type == .unknown || type == .text else { throw typeMismatch(Bool.self, type) }
        switch bytes.first {
        case UInt8(ascii: "t"): self = true
        case UInt8(ascii: "f"): self = false
        default: throw decodingError(Bool.self, type, bytes)
        }
    }
}
