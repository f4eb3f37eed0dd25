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
private func isIntegerType(_ type: PGType) -> Bool {
    switch type {
    case .int8, .int4, .int2, .oid, .xid, .unknown, .text: true
    default: false
    }
}

extension FixedWidthInteger {
    /// Decodes a column of an integer `type` (or text) whose value fits this integer type.
    @inline(__always)
    fileprivate init(postgresInteger bytes: ArraySlice<UInt8>, type: PGType) throws {
        guard isIntegerType(type) else { throw typeMismatch(Self.self, type) }
        guard let value = parseInteger(bytes), let exact = Self(exactly: value) else {
            throw decodingError(Self.self, type, bytes)
        }
        self = exact
    }
}

extension Int: PGArrayElement {
    public static var postgresType: PGType { .int8 }
    public static var postgresArrayType: PGType { .int8Array }
    public func postgresText() throws -> String? { String(self) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
        try self.init(postgresInteger: bytes, type: type)
    }
}

extension Int64: PGArrayElement {
    public static var postgresType: PGType { .int8 }
    public static var postgresArrayType: PGType { .int8Array }
    public func postgresText() throws -> String? { String(self) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
        try self.init(postgresInteger: bytes, type: type)
    }
}

extension Int32: PGArrayElement {
    public static var postgresType: PGType { .int4 }
    public static var postgresArrayType: PGType { .int4Array }
    public func postgresText() throws -> String? { String(self) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
        try self.init(postgresInteger: bytes, type: type)
    }
}

extension Int16: PGArrayElement {
    public static var postgresType: PGType { .int2 }
    public static var postgresArrayType: PGType { .int2Array }
    public func postgresText() throws -> String? { String(self) }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
        try self.init(postgresInteger: bytes, type: type)
    }
}
