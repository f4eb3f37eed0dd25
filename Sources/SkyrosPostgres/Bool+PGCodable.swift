extension Bool: PGArrayElement {
    public static var postgresType: PGType { .bool }
    public static var postgresArrayType: PGType { .boolArray }
    public func postgresText() throws -> String? { self ? "t" : "f" }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
        guard type == .bool || type == .unknown || type == .text else { throw typeMismatch(Bool.self, type) }
        switch bytes.first {
        case UInt8(ascii: "t"): self = true
        case UInt8(ascii: "f"): self = false
        default: throw decodingError(Bool.self, type, bytes)
        }
    }
}
