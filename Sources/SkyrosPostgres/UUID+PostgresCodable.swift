import Foundation

extension UUID: PostgresArrayElement {
    public static var postgresType: PostgresType { .uuid }
    public static var postgresArrayType: PostgresType { .uuidArray }
    public func postgresText() throws -> String? { self.uuidString.lowercased() }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard type == .uuid || type == .unknown || type == .text else { throw typeMismatch(UUID.self, type) }
        guard let value = UUID(uuidString: String(decoding: bytes, as: UTF8.self)) else {
            throw decodingError(UUID.self, type, bytes)
        }
        self = value
    }
}
