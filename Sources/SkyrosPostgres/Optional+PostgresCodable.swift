extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    public static var postgresType: PostgresType { Wrapped.postgresType }
    public func postgresText() throws -> String? {
        switch self {
        case .none: return nil
        case .some(let wrapped): return try wrapped.postgresText()
        }
    }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        self = .some(try Wrapped(postgresText: bytes, type: type))
    }
    public static func postgresNull(type: PostgresType) throws -> Self { .none }
}

extension Optional: PostgresArrayElement where Wrapped: PostgresArrayElement {
    public static var postgresArrayType: PostgresType { Wrapped.postgresArrayType }
}
