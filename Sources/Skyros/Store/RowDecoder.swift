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
    ///   not read by any key; `PostgresError` (`.decoding`, naming entity and column) for values that do not fit.
    package func decode(_ rows: PostgresRows) throws -> [Versioned<T>] {
        guard !rows.isEmpty else { return [] }
        let state = try RowDecodingState(plan: self.plan, columns: rows.columns)
        guard let versionIndex = rows.index(ofColumn: SQLQueryBuilder.versionAlias) else {
            throw EntityMappingError(entity: self.plan.entityName, message: "the result has no \(SQLQueryBuilder.versionAlias) column")
        }
        var result: [Versioned<T>] = []
        result.reserveCapacity(rows.count)
        for row in rows {
            state.begin()
            let value = try T(from: RowDecoderImpl(state: state, source: .row(row)))
            try state.end()
            let version: Int64
            do {
                version = try row.decode(Int64.self, at: versionIndex)
            } catch {
                throw state.columnError(error, resultColumn: versionIndex)
            }
            result.append(Versioned(value: value, version: version))
        }
        return result
    }

    /// Decodes one value from encoded column values in ``Entity/columns`` order (the in-memory store's rows).
    package func decode(values: [PostgresValue]) throws -> T {
        let state = try RowDecodingState(plan: self.plan, columns: nil)
        state.begin()
        let value = try T(from: RowDecoderImpl(state: state, source: .values(values)))
        try state.end()
        return value
    }

    /// Decodes many values sharing one decoding state.
    package func decode(valueRows: [[PostgresValue]]) throws -> [T] {
        let state = try RowDecodingState(plan: self.plan, columns: nil)
        var result: [T] = []
        result.reserveCapacity(valueRows.count)
        for values in valueRows {
            state.begin()
            result.append(try T(from: RowDecoderImpl(state: state, source: .values(values))))
            try state.end()
        }
        return result
    }
}

/// Where a row's cells come from. Passed down by value (borrowed), never stored in the shared state, so
/// reading a cell does not retain the result's buffers.
enum RowSource {
    case row(PostgresRow)
    case values([PostgresValue])
}

/// The state of one decoding pass over many rows of one entity type.
final class RowDecodingState {

    let entityName: String
    let columnNames: [String]
    let columnIndex: [String: Int]
    let keyStrategy: ColumnKeyStrategy
    /// Entity column → result column.
    let resultIndex: [Int]
    /// The key sequence of the first row: (key, entity column).
    private var learned: [(key: String, index: Int)] = []
    private var learning = true
    private var cursor = 0
    private var seen: [Bool]
    private var json: JSONDecoder?

    init<T>(plan: EntityPlan<T>, columns: [PostgresRows.Column]?) throws {
        self.entityName = plan.entityName
        self.columnNames = plan.columnNames
        self.columnIndex = plan.columnIndex
        self.keyStrategy = plan.keyStrategy
        self.seen = Array(repeating: false, count: plan.columnNames.count)
        if let columns {
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
            self.resultIndex = map
        } else {
            self.resultIndex = Array(plan.columnNames.indices)
        }
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

    func isNull(_ source: RowSource, _ index: Int) -> Bool {
        switch source {
        case .row(let row): return row.isNull(at: self.resultIndex[index])
        case .values(let values): return values[index].isNull
        }
    }

    func columnType(_ source: RowSource, _ index: Int) -> PostgresType {
        switch source {
        case .row(let row): return row.columns[self.resultIndex[index]].type
        case .values(let values): return values[index].type == .unspecified ? .unknown : values[index].type
        }
    }

    /// Decodes a natively supported type.
    @inline(__always)
    func native<V: PostgresDecodable>(_ type: V.Type, _ source: RowSource, _ index: Int) throws -> V {
        do {
            switch source {
            case .row(let row):
                return try row.decode(V.self, at: self.resultIndex[index])
            case .values(let values):
                let value = values[index]
                let pgType = value.type == .unspecified ? PostgresType.unknown : value.type
                guard let text = value.text else { return try V.postgresNull(type: pgType) }
                return try V(postgresText: ArraySlice(text.utf8), type: pgType)
            }
        } catch {
            throw self.columnError(error, column: index)
        }
    }

    func nativeExistential(_ type: any PostgresDecodable.Type, _ source: RowSource, _ index: Int) throws -> any PostgresDecodable {
        try self.native(type, source, index)
    }

    /// Decodes any Decodable column value: native, JSON (json/jsonb columns), or through a single-value decoder.
    func decodeAny<V: Decodable>(_ type: V.Type, _ source: RowSource, _ index: Int) throws -> V {
        if V.self == Date.self { return unsafeBitCast(try self.native(Date.self, source, index), to: V.self) }
        if V.self == UUID.self { return unsafeBitCast(try self.native(UUID.self, source, index), to: V.self) }
        if V.self == Decimal.self { return unsafeBitCast(try self.native(Decimal.self, source, index), to: V.self) }
        if V.self == Data.self { return unsafeBitCast(try self.native(Data.self, source, index), to: V.self) }
        if let native = V.self as? any PostgresDecodable.Type {
            return try self.nativeExistential(native, source, index) as! V
        }
        let pgType = self.columnType(source, index)
        if pgType == .jsonb || pgType == .json {
            do {
                guard let bytes = self.bytes(source, index) else {
                    throw PostgresError(kind: .decoding, message: "unexpected NULL for non-optional \(V.self)")
                }
                if self.json == nil { self.json = ColumnJSON.makeDecoder() }
                return try self.json!.decode(V.self, from: Data(bytes))
            } catch {
                throw self.columnError(error, column: index)
            }
        }
        return try V(from: ColumnValueDecoder(state: self, source: source, index: index))
    }

    func bytes(_ source: RowSource, _ index: Int) -> ArraySlice<UInt8>? {
        switch source {
        case .row(let row): return row.bytes(at: self.resultIndex[index])
        case .values(let values): return values[index].text.map { ArraySlice($0.utf8) }
        }
    }

    func columnError(_ error: any Error, column index: Int) -> any Error {
        let column = self.columnNames[index]
        if error is EntityMappingError { return error }
        var wrapped: PostgresError
        if let error = error as? PostgresError {
            wrapped = error
        } else {
            wrapped = PostgresError(kind: .decoding, message: "\(error)")
        }
        if !wrapped.message.hasPrefix("entity ") {
            // PostgresRow already prefixes `column "x": `; keep one column mention.
            let prefix = "column \"\(column)\": "
            let message = wrapped.message.hasPrefix(prefix) ? String(wrapped.message.dropFirst(prefix.count)) : wrapped.message
            wrapped.message = "entity \(self.entityName), column \"\(column)\": \(message)"
        }
        wrapped.column = column
        return wrapped
    }

    func columnError(_ error: any Error, resultColumn: Int) -> any Error {
        guard var error = error as? PostgresError else { return error }
        error.message = "entity \(self.entityName): \(error.message)"
        return error
    }

    func nestingError(_ source: RowSource, _ index: Int) -> any Error {
        PostgresError(
            kind: .decoding,
            message: "entity \(self.entityName), column \"\(self.columnNames[index])\": a nested Codable value needs a json or jsonb column (the column is \(self.columnType(source, index)))",
            column: self.columnNames[index])
    }
}

struct RowDecoderImpl: Decoder {
    let state: RowDecodingState
    let source: RowSource
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(RowKeyedDecoder<Key>(state: self.state, source: self.source))
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
    let source: RowSource
    var codingPath: [any CodingKey] { [] }

    var allKeys: [Key] { self.state.columnNames.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool {
        self.state.columnIndex[self.state.keyStrategy.columnName(forKey: key.stringValue)] != nil
    }

    func decodeNil(forKey key: Key) throws -> Bool { self.state.isNull(self.source, try self.state.index(for: key)) }

    @inline(__always)
    private func scalar<V: PostgresDecodable>(_ type: V.Type, _ key: Key) throws -> V {
        try self.state.native(V.self, self.source, try self.state.index(for: key))
    }

    @inline(__always)
    private func optional<V: PostgresDecodable>(_ type: V.Type, _ key: Key) throws -> V? {
        let index = try self.state.index(for: key)
        if self.state.isNull(self.source, index) { return nil }
        return try self.state.native(V.self, self.source, index)
    }

    private func narrow<V: FixedWidthInteger>(_ type: V.Type, _ key: Key) throws -> V {
        let index = try self.state.index(for: key)
        return try self.narrow(V.self, index)
    }

    private func narrow<V: FixedWidthInteger>(_ type: V.Type, _ index: Int) throws -> V {
        let wide = try self.state.native(Int64.self, self.source, index)
        guard let value = V(exactly: wide) else {
            throw self.state.columnError(PostgresError(kind: .decoding, message: "\(wide) does not fit in \(V.self)"), column: index)
        }
        return value
    }

    private func optionalNarrow<V: FixedWidthInteger>(_ type: V.Type, _ key: Key) throws -> V? {
        let index = try self.state.index(for: key)
        if self.state.isNull(self.source, index) { return nil }
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
        try self.state.decodeAny(V.self, self.source, try self.state.index(for: key))
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
        if self.state.isNull(self.source, index) { return nil }
        return try self.state.decodeAny(V.self, self.source, index)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        throw self.state.nestingError(self.source, try self.state.index(for: key))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw self.state.nestingError(self.source, try self.state.index(for: key))
    }

    func superDecoder() throws -> any Decoder {
        throw EntityMappingError(entity: self.state.entityName, message: "superDecoder() is not supported")
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        throw self.state.nestingError(self.source, try self.state.index(for: key))
    }
}

/// Decodes one column as a single value: enums with raw values and other single-value wrappers.
struct ColumnValueDecoder: Decoder, SingleValueDecodingContainer {
    let state: RowDecodingState
    let source: RowSource
    let index: Int
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        throw self.state.nestingError(self.source, self.index)
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw self.state.nestingError(self.source, self.index) }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { self.state.isNull(self.source, self.index) }
    func decode(_ type: Bool.Type) throws -> Bool { try self.state.native(Bool.self, self.source, self.index) }
    func decode(_ type: String.Type) throws -> String { try self.state.native(String.self, self.source, self.index) }
    func decode(_ type: Double.Type) throws -> Double { try self.state.native(Double.self, self.source, self.index) }
    func decode(_ type: Float.Type) throws -> Float { try self.state.native(Float.self, self.source, self.index) }
    func decode(_ type: Int.Type) throws -> Int { try self.state.native(Int.self, self.source, self.index) }
    func decode(_ type: Int8.Type) throws -> Int8 { try self.integer(Int8.self) }
    func decode(_ type: Int16.Type) throws -> Int16 { try self.state.native(Int16.self, self.source, self.index) }
    func decode(_ type: Int32.Type) throws -> Int32 { try self.state.native(Int32.self, self.source, self.index) }
    func decode(_ type: Int64.Type) throws -> Int64 { try self.state.native(Int64.self, self.source, self.index) }
    func decode(_ type: UInt.Type) throws -> UInt { try self.integer(UInt.self) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try self.integer(UInt8.self) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try self.integer(UInt16.self) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try self.integer(UInt32.self) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try self.integer(UInt64.self) }
    func decode<V: Decodable>(_ type: V.Type) throws -> V { try self.state.decodeAny(V.self, self.source, self.index) }

    private func integer<V: FixedWidthInteger>(_ type: V.Type) throws -> V {
        let wide = try self.state.native(Int64.self, self.source, self.index)
        guard let value = V(exactly: wide) else {
            throw self.state.columnError(PostgresError(kind: .decoding, message: "\(wide) does not fit in \(V.self)"), column: self.index)
        }
        return value
    }
}
