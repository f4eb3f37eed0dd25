import Foundation
import SkyrosPostgres

/// Encodes an ``Entity`` into bound values, one per column in ``Entity/columns`` order.
///
/// Scalars that SkyrosPostgres can bind (`Bool`, integers, floating point, `Decimal`, `String`, `Data`, `UUID`,
/// `Date`, arrays of those) are bound natively; a value that encodes itself as a single value (an enum with a
/// raw value, a wrapper) is bound as that value; anything with keys or elements (structs, arrays of structs,
/// dictionaries) becomes `jsonb`. Text is bound with an unspecified type when it comes from a non-`String`
/// type, so PostgreSQL enum columns accept raw-value enums.
///
/// ```swift
/// let values = try RowEncoder<User>().encode(user)   // [PGValue], in User.columns order
/// ```
package struct RowEncoder<T: Entity>: Sendable {
    package let plan: EntityPlan<T>

    package init() throws { self.plan = try EntityPlan<T>.shared }
    package init(plan: EntityPlan<T>) { self.plan = plan }

    /// The value of every column.
    /// - Throws: ``EntityMappingError`` when a key has no column or a column gets no value; `PGError`
    ///   (`.encoding`, naming entity and column) for values PostgreSQL cannot store, such as text with NUL.
    package func encode(_ value: T) throws -> [PGValue] {
        let storage = RowEncodingStorage(plan: self.plan)
        do {
            try value.encode(to: RowEncoderImpl(storage: storage))
        } catch let error as EncodingError {
            throw EntityMappingError(entity: self.plan.entityName, message: "cannot encode: \(error)")
        }
        if let error = storage.error { throw error }
        if let missing = storage.firstUnfilledColumn {
            throw EntityMappingError(
                entity: self.plan.entityName, column: self.plan.columnNames[missing],
                message: "no Codable key fills this column (keys map to columns with \(self.plan.keyStrategy))")
        }
        return storage.values
    }

    /// The names of the columns whose encoded values differ between two versions of a row.
    ///
    /// ```swift
    /// let columns = try RowEncoder<User>().changedColumns(from: before, to: after)   // ["name"]
    /// ```
    package func changedColumns(from old: T, to new: T) throws -> [String] {
        try self.changedColumns(from: old, toEncoded: self.encode(new))
    }

    /// ``changedColumns(from:to:)`` with the new row encoded already (by ``encode(_:)``).
    package func changedColumns(from old: T, toEncoded new: [PGValue]) throws -> [String] {
        self.changedColumns(fromEncoded: try self.encode(old), toEncoded: new)
    }

    /// ``changedColumns(from:to:)`` with both rows encoded already (by ``encode(_:)``).
    package func changedColumns(fromEncoded old: [PGValue], toEncoded new: [PGValue]) -> [String] {
        old.indices.filter { old[$0] != new[$0] }.map { self.plan.columnNames[$0] }
    }
}

/// Mutable state of one row encoding.
final class RowEncodingStorage {
    let entityName: String
    let columnIndex: [String: Int]
    let columnNames: [String]
    let keyStrategy: ColumnKeyStrategy
    var values: [PGValue]
    /// Which columns got a value: a bit each (an array only past 64 columns, so a row's encoding allocates one
    /// buffer less).
    private var filledBits: UInt64 = 0
    private var filledBeyond64: [Bool]
    var error: (any Error)?
    private var json: JSONEncoder?

    init<T>(plan: EntityPlan<T>) {
        self.entityName = plan.entityName
        self.columnIndex = plan.columnIndex
        self.columnNames = plan.columnNames
        self.keyStrategy = plan.keyStrategy
        self.values = Array(repeating: .null, count: plan.columnNames.count)
        self.filledBeyond64 = plan.columnNames.count > 64 ? Array(repeating: false, count: plan.columnNames.count - 64) : []
    }

    /// The column after the last one filled: synthesized `Codable` encodes properties in declaration order,
    /// which is usually the columns' order, so that column is compared first (a string comparison) before the
    /// name is hashed into ``columnIndex``.
    private var nextIndex = 0

    func index(for key: some CodingKey) throws -> Int {
        let name = self.keyStrategy.columnName(forKey: key.stringValue)
        let expected = self.nextIndex
        if expected < self.columnNames.count, self.columnNames[expected] == name {
            self.nextIndex = expected + 1
            return expected
        }
        guard let index = self.columnIndex[name] else {
            throw EntityMappingError(
                entity: self.entityName, column: name,
                message: "the Codable key \"\(key.stringValue)\" has no column in \(self.entityName).columns")
        }
        self.nextIndex = index + 1
        return index
    }

    func set(_ value: PGValue, at index: Int) {
        self.values[index] = value
        if index < 64 { self.filledBits |= 1 << UInt64(index) } else { self.filledBeyond64[index - 64] = true }
    }

    /// The first column no key filled, if any.
    var firstUnfilledColumn: Int? {
        let count = self.values.count
        let unfilled = ~self.filledBits
        if unfilled != 0, unfilled.trailingZeroBitCount < min(count, 64) { return unfilled.trailingZeroBitCount }
        return self.filledBeyond64.firstIndex(of: false).map { $0 + 64 }
    }

    func fail(_ error: any Error) {
        if self.error == nil { self.error = error }
    }

    /// Wraps an encoding failure so it names entity and column.
    func columnError(_ error: any Error, column index: Int) -> any Error {
        let column = self.columnNames[index]
        if var error = error as? PGError {
            error.message = "entity \(self.entityName), column \"\(column)\": \(error.message)"
            error.column = column
            return error
        }
        if error is EntityMappingError { return error }
        return EntityMappingError(entity: self.entityName, column: column, message: "\(error)")
    }

    func encodeScalar<V: PGEncodable>(_ value: V, at index: Int) throws {
        do {
            self.set(try PGValue(value), at: index)
        } catch {
            throw self.columnError(error, column: index)
        }
    }

    /// Encodes any Codable value of a column: native, single value, or JSON.
    func encodeAny<V: Encodable>(_ value: V, at index: Int) throws {
        do {
            self.set(try self.columnValue(value), at: index)
        } catch {
            throw self.columnError(error, column: index)
        }
    }

    func columnValue<V: Encodable>(_ value: V) throws -> PGValue {
        if let native = value as? any PGEncodable { return try PGValue(native) }
        let probe = SingleValueProbe(storage: self)
        try value.encode(to: probe)
        switch probe.result {
        case .none, .null:
            return .null
        case .value(let encoded):
            return encoded
        case .structured:
            if self.json == nil { self.json = ColumnJSON.makeEncoder() }
            let data = try self.json!.encode(value)
            return PGValue(type: .jsonb, text: String(decoding: data, as: UTF8.self))
        }
    }
}

struct RowEncoderImpl: Encoder {
    let storage: RowEncodingStorage
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(RowKeyedEncoder<Key>(storage: self.storage))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        self.storage.fail(EntityMappingError(entity: self.storage.entityName, message: "must encode with keys, not as an array"))
        return IgnoringUnkeyedEncoder()
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        self.storage.fail(EntityMappingError(entity: self.storage.entityName, message: "must encode with keys, not as a single value"))
        return IgnoringSingleValueEncoder()
    }
}

struct RowKeyedEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let storage: RowEncodingStorage
    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil(forKey key: Key) throws { self.storage.set(.null, at: try self.storage.index(for: key)) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { try self.scalar(value, key) }
    mutating func encode(_ value: String, forKey key: Key) throws { try self.scalar(value, key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try self.scalar(value, key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try self.scalar(value, key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try self.scalar(value, key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try self.scalar(Int16(value), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try self.scalar(value, key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try self.scalar(value, key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try self.scalar(value, key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try self.unsigned(UInt64(value), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try self.scalar(Int16(value), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try self.scalar(Int32(value), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try self.scalar(Int64(value), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try self.unsigned(value, key) }
    mutating func encode<V: Encodable>(_ value: V, forKey key: Key) throws {
        try self.storage.encodeAny(value, at: try self.storage.index(for: key))
    }

    // Synthesized Codable calls these for optionals; implementing them makes a nil value still name its key.
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { try self.optional(value, key) }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { try self.optional(value, key) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { try self.optional(value, key) }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { try self.optional(value, key) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { try self.optional(value, key) }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { try self.optional(value.map(Int16.init), key) }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { try self.optional(value, key) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { try self.optional(value, key) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { try self.optional(value, key) }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws {
        if let value { try self.encode(value, forKey: key) } else { try self.encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { try self.optional(value.map(Int16.init), key) }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { try self.optional(value.map(Int32.init), key) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { try self.optional(value.map(Int64.init), key) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws {
        if let value { try self.encode(value, forKey: key) } else { try self.encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent<V: Encodable>(_ value: V?, forKey key: Key) throws {
        if let value { try self.encode(value, forKey: key) } else { try self.encodeNil(forKey: key) }
    }

    private func scalar<V: PGEncodable>(_ value: V, _ key: Key) throws {
        try self.storage.encodeScalar(value, at: try self.storage.index(for: key))
    }

    private func optional<V: PGEncodable>(_ value: V?, _ key: Key) throws {
        let index = try self.storage.index(for: key)
        if let value { try self.storage.encodeScalar(value, at: index) } else { self.storage.set(.null, at: index) }
    }

    private func unsigned(_ value: UInt64, _ key: Key) throws {
        let index = try self.storage.index(for: key)
        guard let signed = Int64(exactly: value) else {
            throw self.storage.columnError(
                PGError(kind: .encoding, message: "\(value) does not fit in int8"), column: index)
        }
        try self.storage.encodeScalar(signed, at: index)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        self.storage.fail(self.nestingError(key))
        return KeyedEncodingContainer(IgnoringKeyedEncoder<NestedKey>())
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        self.storage.fail(self.nestingError(key))
        return IgnoringUnkeyedEncoder()
    }

    mutating func superEncoder() -> any Encoder {
        self.storage.fail(EntityMappingError(entity: self.storage.entityName, message: "superEncoder() is not supported; encode a nested Codable value instead"))
        return IgnoringEncoder()
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        self.storage.fail(self.nestingError(key))
        return IgnoringEncoder()
    }

    private func nestingError(_ key: Key) -> EntityMappingError {
        EntityMappingError(
            entity: self.storage.entityName, column: self.storage.keyStrategy.columnName(forKey: key.stringValue),
            message: "nested containers are not supported; encode a nested Codable value (stored as jsonb) instead")
    }
}

// MARK: - Single-value probe

/// Encodes one column value to learn whether it is a single value (enum raw value, wrapper) or structured.
final class SingleValueProbe: Encoder {
    enum Result {
        case null
        case value(PGValue)
        case structured
    }

    let storage: RowEncodingStorage
    var result: Result?
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(storage: RowEncodingStorage) { self.storage = storage }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        self.result = .structured
        return KeyedEncodingContainer(IgnoringKeyedEncoder<Key>())
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        self.result = .structured
        return IgnoringUnkeyedEncoder()
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { ProbeSingleValueContainer(probe: self) }
}

struct ProbeSingleValueContainer: SingleValueEncodingContainer {
    let probe: SingleValueProbe
    var codingPath: [any CodingKey] { [] }

    private func set<V: PGEncodable>(_ value: V) throws {
        if case .structured = self.probe.result { return }
        self.probe.result = .value(try PGValue(value))
    }

    mutating func encodeNil() throws { self.probe.result = .null }
    mutating func encode(_ value: Bool) throws { try self.set(value) }
    /// Text from a non-String type is bound untyped, so it also fits PostgreSQL enum and domain columns.
    mutating func encode(_ value: String) throws {
        var encoded = try PGValue(value)
        encoded.type = .unspecified
        if case .structured = self.probe.result { return }
        self.probe.result = .value(encoded)
    }
    mutating func encode(_ value: Double) throws { try self.set(value) }
    mutating func encode(_ value: Float) throws { try self.set(value) }
    mutating func encode(_ value: Int) throws { try self.set(value) }
    mutating func encode(_ value: Int8) throws { try self.set(Int16(value)) }
    mutating func encode(_ value: Int16) throws { try self.set(value) }
    mutating func encode(_ value: Int32) throws { try self.set(value) }
    mutating func encode(_ value: Int64) throws { try self.set(value) }
    mutating func encode(_ value: UInt) throws { try self.encode(UInt64(value)) }
    mutating func encode(_ value: UInt8) throws { try self.set(Int16(value)) }
    mutating func encode(_ value: UInt16) throws { try self.set(Int32(value)) }
    mutating func encode(_ value: UInt32) throws { try self.set(Int64(value)) }
    mutating func encode(_ value: UInt64) throws {
        guard let signed = Int64(exactly: value) else {
            throw PGError(kind: .encoding, message: "\(value) does not fit in int8")
        }
        try self.set(signed)
    }
    mutating func encode<V: Encodable>(_ value: V) throws {
        if case .structured = self.probe.result { return }
        self.probe.result = .value(try self.probe.storage.columnValue(value))
    }
}

// MARK: - Containers that ignore what they get (after an error was recorded, or while probing structure)

struct IgnoringEncoder: Encoder {
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(IgnoringKeyedEncoder<Key>())
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { IgnoringUnkeyedEncoder() }
    func singleValueContainer() -> any SingleValueEncodingContainer { IgnoringSingleValueEncoder() }
}

struct IgnoringKeyedEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    var codingPath: [any CodingKey] { [] }
    mutating func encodeNil(forKey key: Key) throws {}
    mutating func encode<V: Encodable>(_ value: V, forKey key: Key) throws {}
    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> { KeyedEncodingContainer(IgnoringKeyedEncoder<NestedKey>()) }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { IgnoringUnkeyedEncoder() }
    mutating func superEncoder() -> any Encoder { IgnoringEncoder() }
    mutating func superEncoder(forKey key: Key) -> any Encoder { IgnoringEncoder() }
}

struct IgnoringUnkeyedEncoder: UnkeyedEncodingContainer {
    var codingPath: [any CodingKey] { [] }
    var count: Int { 0 }
    mutating func encodeNil() throws {}
    mutating func encode<V: Encodable>(_ value: V) throws {}
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(IgnoringKeyedEncoder<NestedKey>())
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { IgnoringUnkeyedEncoder() }
    mutating func superEncoder() -> any Encoder { IgnoringEncoder() }
}

struct IgnoringSingleValueEncoder: SingleValueEncodingContainer {
    var codingPath: [any CodingKey] { [] }
    mutating func encodeNil() throws {}
    mutating func encode<V: Encodable>(_ value: V) throws {}
}
