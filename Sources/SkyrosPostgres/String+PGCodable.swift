extension String: PGArrayElement {
    public static var postgresType: PGType { .text }
    public static var postgresArrayType: PGType { .textArray }
    public func postgresText() throws -> String? {
        if self.utf8.contains(0) {
            // 22021 is what PostgreSQL answers for a 0x00 byte in text ("invalid byte sequence").
            throw PGError(
                kind: .encoding, sqlState: .characterNotInRepertoire,
                message: "text value contains a NUL (0x00) character, which PostgreSQL text cannot store; use bytea"
            )
        }
        return self
    }
    /// Any column decodes as `String` (its text representation).
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
        self = String(decoding: bytes, as: UTF8.self)
    }
}
