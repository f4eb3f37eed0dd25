import Foundation
import SkyrosPostgres

/// Decodes rows into an ``Entity``, straight from libpq's text cells (no intermediate dictionary, no JSON for
/// flat entities).
///
/// Columns are matched by position: a fetch selects ``Entity/columns`` in declared order. The Codable key
/// sequence of the first row is remembered, so later rows resolve each key with one string comparison.
///
/// ```swift
/// let users = try RowDecoder<User>().decode(rows)            // [Versioned<User>]
/// ```
package struct RowDecoder<T: Entity>: Sendable {
    package let plan: EntityPlan<T>

    package init() throws { self.plan = try EntityPlan<T>.shared }
    package init(plan: EntityPlan<T>) { self.plan = plan }

    /// Decodes every row; the version comes from the `__version` column (required).
    /// - Throws: ``EntityMappingError`` when the result does not hold the entity's columns or a column is
    ///   not read by any key; `PGError` (`.decoding`, naming entity and column) for values that do not fit.
    package func decode(_ rows: PGRows) throws -> [Versioned<T>] {
        guard !rows.isEmpty else { return [] }
        let state = try RowDecodingState(plan: self.plan, rows: rows)
        guard let versionIndex = rows.index(ofColumn: SQLQueryBuilder.versionAlias) else {
            throw EntityMappingError(entity: self.plan.entityName, message: "the result has no \(SQLQueryBuilder.versionAlias) column")
        }
        let versionType = rows.columns[versionIndex].type
        var result: [Versioned<T>] = []
        result.reserveCapacity(rows.count)
        for row in 0..<rows.count {
            state.begin()
            let value = try T(from: RowDecoderImpl(state: state, row: row))
            try state.end()
            let version: Int64
            if let bytes = rows.cellBytes(row: row, column: versionIndex), let parsed = try? Int64(postgresText: bytes, type: versionType) {
                version = parsed
            } else {
                do {
                    version = try rows[row].decode(Int64.self, at: versionIndex)
                } catch {
                    throw state.columnError(error, resultColumn: versionIndex)
                }
            }
            result.append(Versioned(value: value, version: version))
        }
        return result
    }

    /// Decodes one value from encoded column values in ``Entity/columns`` order (the in-memory store's rows).
    package func decode(values: [PGValue]) throws -> T {
        let state = RowDecodingState(plan: self.plan, valueRows: [values])
        state.begin()
        let value = try T(from: RowDecoderImpl(state: state, row: 0))
        try state.end()
        return value
    }

    /// Decodes many values sharing one decoding state.
    package func decode(valueRows: [[PGValue]]) throws -> [T] {
        let state = RowDecodingState(plan: self.plan, valueRows: valueRows)
        var result: [T] = []
        result.reserveCapacity(valueRows.count)
        for row in valueRows.indices {
            state.begin()
            result.append(try T(from: RowDecoderImpl(state: state, row: row)))
            try state.end()
        }
        return result
    }
}

/// The state of one decoding pass over many rows of one entity type, and the rows themselves: the decoders
/// handed to `init(from:)` carry only this state and a row number (two words, so Swift keeps them inline in
/// the `any Decoder` existential instead of allocating a box per row, and copying them retains one object).
final class RowDecodingState {

    let entityName: String
    let columnNames: [String]
    let columnIndex: [String: Int]
    let keyStrategy: ColumnKeyStrategy
    /// Entity column → result column.
    let resultIndex: [Int]
    /// The query result being decoded, with each entity column's type (`nil` when decoding encoded values).
    private let rows: PGRows?
    private let resultTypes: [PGType]
    /// Encoded values in ``Entity/columns`` order, one array per row (when not decoding a query result).
    private let valueRows: [[PGValue]]
    // One decoding pass runs on one thread: the per-key bookkeeping skips dynamic exclusivity checks.
    /// The key sequence of the first row: (key, entity column).
    @exclusivity(unchecked) private var learned: [(key: String, index: Int)] = []
    @exclusivity(unchecked) private var learning = true
    @exclusivity(unchecked) private var cursor = 0
    @exclusivity(unchecked) private var seen: [Bool]
    private var json: JSONDecoder?

    /// A pass over a query result (columns matched by name, in declared order first).
    convenience init<T>(plan: EntityPlan<T>, rows: PGRows) throws {
        let columns = rows.columns
        var map: [Int] = []
        map.reserveCapacity(plan.columnNames.count)
        for (i, name) in plan.columnNames.enumerated() {
            if i < columns.count, columns[i].name == name {
                map.append(i)
            } else if let j = columns.firstIndex(where: { $0.name == name }) {
                map.append(j)
            } else {
                throw EntityMappingError(entity: plan.entityName, column: name, message: "is missing from the query result")
            }
        }
        self.init(plan: plan, resultIndex: map, rows: rows, resultTypes: map.map { columns[$0].type }, valueRows: [])
    }

    /// A pass over encoded values in ``Entity/columns`` order.
    convenience init<T>(plan: EntityPlan<T>, valueRows: [[PGValue]]) {
        self.init(plan: plan, resultIndex: Array(plan.columnNames.indices), rows: nil, resultTypes: [], valueRows: valueRows)
    }

    /// A pass over encoded values of some columns (a projection into any `Decodable`, which may read only some
    /// of them).
    convenience init(entityName: String, columnNames: [String], keyStrategy: ColumnKeyStrategy, valueRows: [[PGValue]]) {
        self.init(
            entityName: entityName, columnNames: columnNames,
            columnIndex: Dictionary(columnNames.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a }),
            keyStrategy: keyStrategy, resultIndex: Array(columnNames.indices), rows: nil, resultTypes: [],
            valueRows: valueRows)
        self.learning = false
    }

    /// A pass over a raw statement's result (``RawRowDecoding``): every column by its name, none required, since
    /// a `Decodable` may read only some of them.
    convenience init(name: String, rows: PGRows, keyStrategy: ColumnKeyStrategy) {
        let names = rows.columns.map(\.name)
        self.init(
            entityName: name, columnNames: names,
            columnIndex: Dictionary(names.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first }),
            keyStrategy: keyStrategy, resultIndex: Array(names.indices), rows: rows, resultTypes: rows.columns.map(\.type),
            valueRows: [])
        self.learning = false
    }

    private convenience init<T>(
        plan: EntityPlan<T>, resultIndex: [Int], rows: PGRows?, resultTypes: [PGType], valueRows: [[PGValue]]
    ) {
        self.init(
            entityName: plan.entityName, columnNames: plan.columnNames, columnIndex: plan.columnIndex,
            keyStrategy: plan.keyStrategy, resultIndex: resultIndex, rows: rows, resultTypes: resultTypes, valueRows: valueRows)
    }

    private init(
        entityName: String, columnNames: [String], columnIndex: [String: Int], keyStrategy: ColumnKeyStrategy,
        resultIndex: [Int], rows: PGRows?, resultTypes: [PGType], valueRows: [[PGValue]]
    ) {
        self.entityName = entityName
        self.columnNames = columnNames
        self.columnIndex = columnIndex
        self.keyStrategy = keyStrategy
        self.seen = Array(repeating: false, count: columnNames.count)
        self.resultIndex = resultIndex
        self.rows = rows
        self.resultTypes = resultTypes
        self.valueRows = valueRows
    }

    @inline(__always)
    func begin() {
        self.cursor = 0
    }

    /// After the first row: every column must have been read by some key.
    func end() throws {
        guard self.learning else { return }
        self.learning = false
        if let missing = self.seen.firstIndex(of: false) {
            throw EntityMappingError(
                entity: self.entityName, column: self.columnNames[missing],
                message: "no Codable key reads this column (keys map to columns with \(self.keyStrategy))")
        }
    }

    /// The entity column of a key: one comparison against the first row's key sequence, else a lookup.
    @inline(__always)
    func index(for key: some CodingKey) throws -> Int {
        let name = key.stringValue
        let position = self.cursor
        self.cursor = position &+ 1
        if !self.learning, position < self.learned.count, self.learned[position].key == name {
            return self.learned[position].index
        }
        let column = self.keyStrategy.columnName(forKey: name)
        guard let index = self.columnIndex[column] else {
            throw EntityMappingError(
                entity: self.entityName, column: column,
                message: "the Codable key \"\(name)\" has no column in \(self.entityName).columns")
        }
        if self.learning {
            self.learned.append((name, index))
            self.seen[index] = true
        }
        return index
    }

    func isNull(_ row: Int, _ index: Int) -> Bool {
        if let rows = self.rows { return rows.cellBytes(row: row, column: self.resultIndex[index]) == nil }
        return self.valueRows[row][index].isNull
    }

    func columnType(_ row: Int, _ index: Int) -> PGType {
        if self.rows != nil { return self.resultTypes[index] }
        let type = self.valueRows[row][index].type
        return type == .unspecified ? .unknown : type
    }

    /// Decodes a natively supported type.
    @inline(__always)
    func native<V: PGDecodable>(_ type: V.Type, _ row: Int, _ index: Int) throws -> V {
        if let rows = self.rows {
            let column = self.resultIndex[index]
            if let bytes = rows.cellBytes(row: row, column: column) {
                if let value = try? V(postgresText: Self.unpadded(bytes, as: V.self, type: self.resultTypes[index]), type: self.resultTypes[index]) {
                    return value
                }
            } else if let value = try? V.postgresNull(type: self.resultTypes[index]) {
                return value
            }
            // Not decodable: the error as `PGRow` words it (naming the column), then this entity.
            do {
                return try rows[row].decode(V.self, at: column)
            } catch {
                throw self.columnError(error, column: index)
            }
        }
        do {
            let value = self.valueRows[row][index]
            let pgType = value.type == .unspecified ? PGType.unknown : value.type
            guard let text = value.text else { return try V.postgresNull(type: pgType) }
            return try V(postgresText: Self.unpadded(ArraySlice(text.utf8), as: V.self, type: pgType), type: pgType)
        } catch {
            throw self.columnError(error, column: index)
        }
    }

    /// A `char(n)` value without the trailing spaces PostgreSQL pads it with, for a `String`: PostgreSQL ignores
    /// them when it compares such values or casts them to `text` (as every predicate and sort does), so the
    /// entity holds the value as it was written. A row read back then equals the one saved, and predicates
    /// evaluated in memory (the overlay of queued writes, the in-memory store) agree with SQL.
    @inline(__always)
    private static func unpadded<V>(_ bytes: ArraySlice<UInt8>, as _: V.Type, type: PGType) -> ArraySlice<UInt8> {
        guard V.self == String.self, type == .bpchar, bytes.last == UInt8(ascii: " ") else { return bytes }
        var end = bytes.endIndex
        while end > bytes.startIndex, bytes[end - 1] == UInt8(ascii: " ") { end -= 1 }
        return bytes[bytes.startIndex..<end]
    }

    func nativeExistential(_ type: any PGDecodable.Type, _ row: Int, _ index: Int) throws -> any PGDecodable {
        try self.native(type, row, index)
    }

    /// Decodes any Decodable column value: native, JSON (json/jsonb columns), or through a single-value decoder.
    func decodeAny<V: Decodable>(_ type: V.Type, _ row: Int, _ index: Int) throws -> V {
        if V.self == Date.self { return unsafeBitCast(try self.native(Date.self, row, index), to: V.self) }
        if V.self == UUID.self { return unsafeBitCast(try self.native(UUID.self, row, index), to: V.self) }
        if V.self == Decimal.self { return unsafeBitCast(try self.native(Decimal.self, row, index), to: V.self) }
        if V.self == Data.self { return unsafeBitCast(try self.native(Data.self, row, index), to: V.self) }
        if let native = V.self as? any PGDecodable.Type {
            return try self.nativeExistential(native, row, index) as! V
        }
        let pgType = self.columnType(row, index)
        if pgType == .jsonb || pgType == .json {
            do {
                guard let bytes = self.bytes(row, index) else {
                    throw PGError(kind: .decoding, message: "unexpected NULL for non-optional \(V.self)")
                }
                if self.json == nil { self.json = ColumnJSON.makeDecoder() }
                return try self.json!.decode(V.self, from: Data(bytes))
            } catch {
                throw self.columnError(error, column: index)
            }
        }
        return try V(from: ColumnValueDecoder(state: self, row: row, index: index))
    }

    func bytes(_ row: Int, _ index: Int) -> ArraySlice<UInt8>? {
        if let rows = self.rows { return rows.cellBytes(row: row, column: self.resultIndex[index]) }
        return self.valueRows[row][index].text.map { ArraySlice($0.utf8) }
    }

    func columnError(_ error: any Error, column index: Int) -> any Error {
        let column = self.columnNames[index]
        if error is EntityMappingError { return error }
        var wrapped: PGError
        if let error = error as? PGError {
            wrapped = error
        } else {
            wrapped = PGError(kind: .decoding, message: "\(error)")
        }
        if !wrapped.message.hasPrefix("entity ") {
            // PGRow already prefixes `column "x": `; keep one column mention.
            let prefix = "column \"\(column)\": "
            let message = wrapped.message.hasPrefix(prefix) ? String(wrapped.message.dropFirst(prefix.count)) : wrapped.message
            wrapped.message = "entity \(self.entityName), column \"\(column)\": \(message)"
        }
        wrapped.column = column
        return wrapped
    }

    func columnError(_ error: any Error, resultColumn: Int) -> any Error {
        guard var error = error as? PGError else { return error }
        error.message = "entity \(self.entityName): \(error.message)"
        return error
    }

    func nestingError(_ row: Int, _ index: Int) -> any Error {
        PGError(
            kind: .decoding,
            message: "entity \(self.entityName), column \"\(self.columnNames[index])\": a nested Codable value needs a json or jsonb column (the column is \(self.columnType(row, index)))",
            column: self.columnNames[index])
    }
}

struct RowDecoderImpl: Decoder {
    let state: RowDecodingState
    let row: Int
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(RowKeyedDecoder<Key>(state: self.state, row: self.row))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw EntityMappingError(entity: self.state.entityName, message: "must decode with keys, not as an array")
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw EntityMappingError(entity: self.state.entityName, message: "must decode with keys, not as a single value")
    }
}

struct RowKeyedDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let state: RowDecodingState
    let row: Int
    var codingPath: [any CodingKey] { [] }

    var allKeys: [Key] { self.state.columnNames.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool {
        self.state.columnIndex[self.state.keyStrategy.columnName(forKey: key.stringValue)] != nil
    }

    func decodeNil(forKey key: Key) throws -> Bool { self.state.isNull(self.row, try self.state.index(for: key)) }

    @inline(__always)
    private func scalar<V: PGDecodable>(_ type: V.Type, _ key: Key) throws -> V {
        try self.state.native(V.self, self.row, try self.state.index(for: key))
    }

    @inline(__always)
    private func optional<V: PGDecodable>(_ type: V.Type, _ key: Key) throws -> V? {
        let index = try self.state.index(for: key)
        if self.state.isNull(self.row, index) { return nil }
        return try self.state.native(V.self, self.row, index)
    }

    private func narrow<V: FixedWidthInteger>(_ type: V.Type, _ key: Key) throws -> V {
        let index = try self.state.index(for: key)
        return try self.narrow(V.self, index)
    }

    private func narrow<V: FixedWidthInteger>(_ type: V.Type, _ index: Int) throws -> V {
        let wide = try self.state.native(Int64.self, self.row, index)
        guard let value = V(exactly: wide) else {
            throw self.state.columnError(PGError(kind: .decoding, message: "\(wide) does not fit in \(V.self)"), column: index)
        }
        return value
    }

    private func optionalNarrow<V: FixedWidthInteger>(_ type: V.Type, _ key: Key) throws -> V? {
        let index = try self.state.index(for: key)
        if self.state.isNull(self.row, index) { return nil }
        return try self.narrow(V.self, index)
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try self.scalar(Bool.self, key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try self.scalar(String.self, key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try self.scalar(Double.self, key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try self.scalar(Float.self, key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try self.scalar(Int.self, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try self.narrow(Int8.self, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try self.scalar(Int16.self, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try self.scalar(Int32.self, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try self.scalar(Int64.self, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try self.narrow(UInt.self, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try self.narrow(UInt8.self, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try self.narrow(UInt16.self, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try self.narrow(UInt32.self, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try self.narrow(UInt64.self, key) }
    func decode<V: Decodable>(_ type: V.Type, forKey key: Key) throws -> V {
        try self.state.decodeAny(V.self, self.row, try self.state.index(for: key))
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try self.optional(Bool.self, key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try self.optional(String.self, key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try self.optional(Double.self, key) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try self.optional(Float.self, key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try self.optional(Int.self, key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try self.optionalNarrow(Int8.self, key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try self.optional(Int16.self, key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try self.optional(Int32.self, key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try self.optional(Int64.self, key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try self.optionalNarrow(UInt.self, key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try self.optionalNarrow(UInt8.self, key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try self.optionalNarrow(UInt16.self, key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try self.optionalNarrow(UInt32.self, key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try self.optionalNarrow(UInt64.self, key) }
    func decodeIfPresent<V: Decodable>(_ type: V.Type, forKey key: Key) throws -> V? {
        let index = try self.state.index(for: key)
        if self.state.isNull(self.row, index) { return nil }
        return try self.state.decodeAny(V.self, self.row, index)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        throw self.state.nestingError(self.row, try self.state.index(for: key))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw self.state.nestingError(self.row, try self.state.index(for: key))
    }

    func superDecoder() throws -> any Decoder {
        throw EntityMappingError(entity: self.state.entityName, message: "superDecoder() is not supported")
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        throw self.state.nestingError(self.row, try self.state.index(for: key))
    }
}

/// Decodes one column as a single value: enums with raw values and other single-value wrappers.
struct ColumnValueDecoder: Decoder, SingleValueDecodingContainer {
    let state: RowDecodingState
    let row: Int
    let index: Int
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        throw self.state.nestingError(self.row, self.index)
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw self.state.nestingError(self.row, self.index) }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { self.state.isNull(self.row, self.index) }
    func decode(_ type: Bool.Type) throws -> Bool { try self.state.native(Bool.self, self.row, self.index) }
    func decode(_ type: String.Type) throws -> String { try self.state.native(String.self, self.row, self.index) }
    func decode(_ type: Double.Type) throws -> Double { try self.state.native(Double.self, self.row, self.index) }
    func decode(_ type: Float.Type) throws -> Float { try self.state.native(Float.self, self.row, self.index) }
    func decode(_ type: Int.Type) throws -> Int { try self.state.native(Int.self, self.row, self.index) }
    func decode(_ type: Int8.Type) throws -> Int8 { try self.integer(Int8.self) }
    func decode(_ type: Int16.Type) throws -> Int16 { try self.state.native(Int16.self, self.row, self.index) }
    func decode(_ type: Int32.Type) throws -> Int32 { try self.state.native(Int32.self, self.row, self.index) }
    func decode(_ type: Int64.Type) throws -> Int64 { try self.state.native(Int64.self, self.row, self.index) }
    func decode(_ type: UInt.Type) throws -> UInt { try self.integer(UInt.self) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try self.integer(UInt8.self) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try self.integer(UInt16.self) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try self.integer(UInt32.self) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try self.integer(UInt64.self) }
    func decode<V: Decodable>(_ type: V.Type) throws -> V { try self.state.decodeAny(V.self, self.row, self.index) }

    private func integer<V: FixedWidthInteger>(_ type: V.Type) throws -> V {
        let wide = try self.state.native(Int64.self, self.row, self.index)
        guard let value = V(exactly: wide) else {
            throw self.state.columnError(PGError(kind: .decoding, message: "\(wide) does not fit in \(V.self)"), column: self.index)
        }
        return value
    }
}
