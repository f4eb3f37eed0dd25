@inline(__always)
func parseInteger(_ bytes: ArraySlice<UInt8>) -> Int64? {
    var index = bytes.startIndex
    let end = bytes.endIndex
    guard index < end else { return nil }
    var negative = false
    if bytes[index] == UInt8(ascii: "-") {
        negative = true
        index += 1
    } else if bytes[index] == UInt8(ascii: "+") {
        index += 1
    }
    guard index < end else { return nil }
    var value: Int64 = 0
    while index < end {
        let digit = bytes[index] &- UInt8(ascii: "0")
        guard digit < 10 else { return nil }
        let (m, o1) = value.multipliedReportingOverflow(by: 10)
        let (s, o2) = negative ? m.subtractingReportingOverflow(Int64(digit)) : m.addingReportingOverflow(Int64(digit))
        guard !o1, !o2 else { return nil }
        value = s
        index += 1
    }
    return value
}

/// Whether integers decode from a column of `type` (a `switch`, not a `Set` lookup: it runs for every cell).
private func isIntegerType(_ type: PostgresType) -> Bool {
    switch type {
    case .int8, .int4, .int2, .oid, .xid, .unknown, .text: true
    default: false
    }
}

extension Int: PostgresArrayElement {
    public static var postgresType: PostgresType { .int8 }
    public static var postgresArrayType: PostgresType { .int8Array }
    public func postgresText() throws -> String? { String(self) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard isIntegerType(type) else { throw typeMismatch(Int.self, type) }
        guard let value = parseInteger(bytes) else { throw decodingError(Int.self, type, bytes) }
        self = Int(value)
    }
}

extension Int64: PostgresArrayElement {
    public static var postgresType: PostgresType { .int8 }
    public static var postgresArrayType: PostgresType { .int8Array }
    public func postgresText() throws -> String? { String(self) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard isIntegerType(type) else { throw typeMismatch(Int64.self, type) }
        guard let value = parseInteger(bytes) else { throw decodingError(Int64.self, type, bytes) }
        self = value
    }
}

extension Int32: PostgresArrayElement {
    public static var postgresType: PostgresType { .int4 }
    public static var postgresArrayType: PostgresType { .int4Array }
    public func postgresText() throws -> String? { String(self) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard isIntegerType(type) else { throw typeMismatch(Int32.self, type) }
        guard let value = parseInteger(bytes), let narrow = Int32(exactly: value) else {
            throw decodingError(Int32.self, type, bytes)
        }
        self = narrow
    }
}

extension Int16: PostgresArrayElement {
    public static var postgresType: PostgresType { .int2 }
    public static var postgresArrayType: PostgresType { .int2Array }
    public func postgresText() throws -> String? { String(self) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PostgresType) throws {
        guard isIntegerType(type) else { throw typeMismatch(Int16.self, type) }
        guard let value = parseInteger(bytes), let narrow = Int16(exactly: value) else {
            throw decodingError(Int16.self, type, bytes)
        }
        self = narrow
    }
}
