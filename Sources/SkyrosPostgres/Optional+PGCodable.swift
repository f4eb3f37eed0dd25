extension Optional: PGEncodable where Wrapped: PGEncodable {
    public static var postgresType: PGType { Wrapped.postgresType }
    public func postgresText() throws -> String? {
        switch self {
        case .none: return nil
        case .some(let wrapped): return try wrapped.postgresText()
        }
    }
}

extension Optional: PGDecodable where Wrapped: PGDecodable {
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
        self = .some(try Wrapped(postgresText: bytes, type: type))
    }
    public static func postgresNull(type: PGType) throws -> Self { .none }
}

extension Optional: PGArrayElement where Wrapped: PGArrayElement {
    public static var postgresArrayType: PGType { Wrapped.postgresArrayType }
}
