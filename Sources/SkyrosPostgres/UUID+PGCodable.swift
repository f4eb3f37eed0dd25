import Foundation

extension UUID: PGArrayElement {
    public static var postgresType: PGType { .uuid }
    public static var postgresArrayType: PGType { .uuidArray }
    public func postgresText() throws -> String? { self.uuidString.lowercased() }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
        guard type == .uuid || type == .unknown || type == .text else { throw typeMismatch(UUID.self, type) }
        guard let value = UUID(uuidString: String(decoding: bytes, as: UTF8.self)) else {
            throw decodingError(UUID.self, type, bytes)
        }
        self = value
    }
}
