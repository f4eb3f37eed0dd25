import Foundation
import SkyrosPostgres

/// The type of a table column, as far as Skyros checks values against it before a write is queued.
///
/// The PostgreSQL store reads these from the catalog when it validates entities at start; the in-memory store
/// takes them from ``InMemoryStore/declare(_:columns:)``. A type Skyros does not check is ``named(_:)``.
///
/// ```swift
/// let priority = ColumnType.integer                  // int4: -2147483648...2147483647
/// let title = ColumnType.varchar(255)                 // at most 255 characters
/// let price = ColumnType.numeric(6, 2)                // at most 9999.99; more decimals are rounded
/// let mood = ColumnType.enumeration("mood", labels: ["happy", "sad"])
/// ```
public struct ColumnType: Sendable, Hashable, CustomStringConvertible {
    enum Storage: Sendable, Hashable {
        /// `int2`, `int4` or `int8`.
        case integer(bits: Int)
        /// `varchar(n)` (`padded` false) or `char(n)` (`padded` true); `limit` `nil` for no limit.
        case characters(limit: Int?, padded: Bool)
        /// `numeric(p, s)`; `precision` `nil` for an unconstrained `numeric`.
        case numeric(precision: Int?, scale: Int)
        /// A PostgreSQL enum type and its labels.
        case enumeration(name: String, labels: [String])
        /// Any other type: not checked.
        case other(String)
    }

    let storage: Storage

    init(_ storage: Storage) { self.storage = storage }

    /// `int2` (`smallint`): -32768...32767.
    public static let smallint = ColumnType(.integer(bits: 16))
    /// `int4` (`integer`): -2147483648...2147483647.
    public static let integer = ColumnType(.integer(bits: 32))
    /// `int8` (`bigint`).
    public static let bigint = ColumnType(.integer(bits: 64))
    /// `text`: any length.
    public static let text = ColumnType(.characters(limit: nil, padded: false))

    /// `varchar(length)`: at most `length` characters (Unicode code points, as PostgreSQL counts in UTF-8).
    /// Excess characters that are all spaces are cut, as PostgreSQL does.
    public static func varchar(_ length: Int) -> ColumnType { ColumnType(.characters(limit: length, padded: false)) }

    /// `char(length)`: at most `length` characters. Trailing spaces are not significant: a value reads back
    /// without them.
    public static func char(_ length: Int) -> ColumnType { ColumnType(.characters(limit: length, padded: true)) }

    /// `numeric(precision, scale)`: values are rounded to `scale` decimals (half away from zero), then must be
    /// below 10^(precision − scale). `numeric` without arguments is ``unconstrainedNumeric``.
    public static func numeric(_ precision: Int, _ scale: Int = 0) -> ColumnType {
        ColumnType(.numeric(precision: precision, scale: scale))
    }

    /// `numeric` without precision: any value.
    public static let unconstrainedNumeric = ColumnType(.numeric(precision: nil, scale: 0))

    /// A PostgreSQL enum type: only its labels are accepted.
    public static func enumeration(_ name: String, labels: [String]) -> ColumnType {
        ColumnType(.enumeration(name: name, labels: labels))
    }

    /// Any other PostgreSQL type (`timestamptz`, `uuid`, `jsonb`, …): its values are not checked.
    public static func named(_ name: String) -> ColumnType { ColumnType(.other(name)) }

    /// The type as PostgreSQL names it: `int4`, `varchar(255)`, `numeric(6,2)`, the enum's name.
    public var description: String {
        switch self.storage {
        case .integer(let bits): return "int\(bits / 8)"
        case .characters(nil, false): return "text"
        case .characters(nil, true): return "bpchar"
        case .characters(let limit?, let padded): return "\(padded ? "char" : "varchar")(\(limit))"
        case .numeric(nil, _): return "numeric"
        case .numeric(let precision?, let scale): return "numeric(\(precision),\(scale))"
        case .enumeration(let name, _): return name
        case .other(let name): return name
        }
    }
}

/// A column default the in-memory store evaluates for a column the database sets (``DatabaseGenerated``): what
/// `DEFAULT now()`, `DEFAULT gen_random_uuid()` or a constant default does on PostgreSQL.
///
/// ```swift
/// store.declare(Ticket.self, columns: [
///     "created_at": ColumnDefinition(.named("timestamptz"), default: .now),
///     "updated_at": ColumnDefinition(.named("timestamptz"), default: .now),   // .onInsertAndUpdate: set on every write
///     "token": ColumnDefinition(.named("uuid"), default: .randomUUID),
/// ])
/// ```
///
/// Other SQL defaults, trigger bodies and `GENERATED ALWAYS AS (…)` expressions are not evaluated in memory: the
/// in-memory store keeps the value the app gave for such a column.
public struct ColumnDefault: Sendable, Hashable {
    enum Kind: Sendable, Hashable {
        case now
        case randomUUID
        case constant(PGValue)
    }

    let kind: Kind

    /// `now()`: the time of the write, in microseconds (PostgreSQL's is the transaction's start).
    public static let now = ColumnDefault(kind: .now)
    /// `gen_random_uuid()`: a random (version 4) UUID.
    public static let randomUUID = ColumnDefault(kind: .randomUUID)

    /// A constant, as PostgreSQL would store it (`DEFAULT 0`, `DEFAULT 'open'`).
    /// - Throws: `PGError` when the value cannot be encoded.
    public static func constant<V: PGEncodable>(_ value: V) throws -> ColumnDefault {
        ColumnDefault(kind: .constant(try PGValue(value)))
    }

    /// The value the default gives now.
    func evaluate() -> PGValue {
        switch self.kind {
        case .now: (try? PGValue(Date().postgresStored)) ?? .null
        case .randomUUID: (try? PGValue(UUID())) ?? .null
        case .constant(let value): value
        }
    }
}

/// A column of a table: its type, whether it takes NULL, whether it has a default.
///
/// ```swift
/// store.declare(Ticket.self, columns: [
///     "priority": ColumnDefinition(.integer),
///     "title": ColumnDefinition(.varchar(255)),
///     "note": ColumnDefinition(.text, nullable: true),
/// ])
/// ```
public struct ColumnDefinition: Sendable, Hashable {
    /// The column's type.
    public var type: ColumnType
    /// Whether the column accepts NULL.
    public var isNullable: Bool
    /// Whether the column has a default (or is an identity or generated column): then NULL is left to the
    /// server to refuse.
    public var hasDefault: Bool
    /// The default the in-memory store evaluates for a column the database sets (``DatabaseGenerated``); `nil`
    /// for none, or one it cannot evaluate (then it keeps the app's value).
    public var defaultValue: ColumnDefault?

    /// A column as the in-memory store checks it: `ColumnDefinition(.varchar(255), nullable: true)`.
    ///
    /// - Parameters:
    ///   - type: the column's type.
    ///   - nullable: whether it accepts NULL (`false`: `NOT NULL`).
    ///   - hasDefault: whether it has a default.
    ///   - defaultValue: the default the in-memory store evaluates (implies `hasDefault`).
    public init(_ type: ColumnType, nullable: Bool = false, hasDefault: Bool = false, default defaultValue: ColumnDefault? = nil) {
        self.type = type
        self.isNullable = nullable
        self.hasDefault = hasDefault || defaultValue != nil
        self.defaultValue = defaultValue
    }
}

/// A value refused before its write was queued: it does not fit its column, so PostgreSQL would refuse the
/// commit. Thrown by `insert`, `update`, `upsert` and `bulkInsert`; nothing was recorded.
///
/// It names entity, column and column type, never the value (which may be a secret), also not in
/// `debugDescription`:
///
/// ```
/// entity Ticket, column "priority" (int4): value out of range for int4
/// ```
///
/// ```swift
/// do {
///     try context.insert(Ticket(id: id, title: title, priority: 9_999_999_999))
/// } catch let error as ColumnValueError where error.reason == .outOfRange {
///     // 400 Bad Request
/// }
/// ```
public struct ColumnValueError: Error, Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// Why the value was refused.
    public struct Reason: Sendable, Hashable, CustomStringConvertible {
        enum Base: Sendable, Hashable {
            case outOfRange, tooLong, numericOverflow, nullNotAllowed, notAnEnumLabel, nulCharacter
        }

        let base: Base

        /// An integer beyond the column's range (`Int` into `int4`, for example).
        public static let outOfRange = Reason(base: .outOfRange)
        /// More characters than `varchar(n)`/`char(n)` holds.
        public static let tooLong = Reason(base: .tooLong)
        /// A number with more integer digits than `numeric(p, s)` holds (after rounding to `s` decimals).
        public static let numericOverflow = Reason(base: .numericOverflow)
        /// `nil` into a `NOT NULL` column without a default.
        public static let nullNotAllowed = Reason(base: .nullNotAllowed)
        /// A value that is not a label of the column's enum type.
        public static let notAnEnumLabel = Reason(base: .notAnEnumLabel)
        /// Text with a NUL (0x00) character, which PostgreSQL text cannot store.
        public static let nulCharacter = Reason(base: .nulCharacter)

        /// The reason in words (`out of range`, `too long`).
        public var description: String {
            switch self.base {
            case .outOfRange: "out of range"
            case .tooLong: "too long"
            case .numericOverflow: "numeric field overflow"
            case .nullNotAllowed: "null value not allowed"
            case .notAnEnumLabel: "not a label of the enum"
            case .nulCharacter: "text contains a NUL character"
            }
        }
    }

    /// The entity type's name.
    public var entity: String
    /// The column's name.
    public var column: String
    /// The column's type as PostgreSQL names it (`int4`, `varchar(255)`, `numeric(6,2)`, an enum's name).
    public var columnType: String
    /// Why the value was refused.
    public var reason: Reason

    /// An error for a value the column would refuse.
    public init(entity: String, column: String, columnType: String, reason: Reason) {
        (self.entity, self.column, self.columnType, self.reason) = (entity, column, columnType, reason)
    }

    /// The entity, the column, its type and the reason, never the value (it may be personal data).
    public var description: String {
        let detail: String
        switch self.reason.base {
        case .outOfRange: detail = "value out of range for \(self.columnType)"
        case .tooLong: detail = "value too long for \(self.columnType)"
        case .numericOverflow: detail = "numeric field overflow: the value does not fit \(self.columnType)"
        case .nullNotAllowed: detail = "nil for a NOT NULL column without a default"
        case .notAnEnumLabel: detail = "the value is not a label of enum \(self.columnType)"
        case .nulCharacter: detail = "text with a NUL (0x00) character, which PostgreSQL cannot store (use bytea)"
        }
        return "entity \(self.entity), column \"\(self.column)\" (\(self.columnType)): \(detail)"
    }

    /// The same as ``description``: the value is never shown.
    public var debugDescription: String { "ColumnValueError(\(self.description))" }
}

// MARK: - Checking

/// One checked column of an entity: its index in the encoded row, and what to check.
struct ColumnRule: Sendable {
    enum Check: Sendable {
        case integer(min: Int64, max: Int64)
        case characters(limit: Int, padded: Bool)
        case numeric(precision: Int, scale: Int)
        case enumeration(labels: Set<String>)
        case none
    }

    var index: Int
    var column: String
    var typeName: String
    var check: Check
    var refusesNull: Bool
}

/// The checks of one entity type against its table's column definitions, compiled once.
package struct ColumnRules: Sendable {
    let entity: String
    let rules: [ColumnRule]

    /// - Parameter skipping: the columns the database sets (``EntityPlan/readBackIndices``): never written, so
    ///   never checked.
    init(entity: String, columnNames: [String], definitions: [String: ColumnDefinition], skipping: [Int] = []) {
        self.entity = entity
        var rules: [ColumnRule] = []
        for (index, name) in columnNames.enumerated() {
            guard let definition = definitions[name], !skipping.contains(index) else { continue }
            let check: ColumnRule.Check
            switch definition.type.storage {
            case .integer(64): check = .none
            case .integer(let bits):
                let max = (Int64(1) << Int64(bits - 1)) - 1
                check = .integer(min: -max - 1, max: max)
            case .characters(let limit?, let padded): check = .characters(limit: limit, padded: padded)
            case .numeric(let precision?, let scale) where scale >= 0 && precision >= 1:
                check = .numeric(precision: precision, scale: scale)
            case .enumeration(_, let labels): check = .enumeration(labels: Set(labels))
            default: check = .none
            }
            let refusesNull = !definition.isNullable && !definition.hasDefault
            if case .none = check, !refusesNull { continue }
            rules.append(ColumnRule(
                index: index, column: name, typeName: definition.type.description, check: check, refusesNull: refusesNull))
        }
        self.rules = rules
    }

    /// No rule applies (nothing to check).
    var isEmpty: Bool { self.rules.isEmpty }

    /// Checks encoded values (in the entity's column order) and normalises them to what the columns store.
    /// - Returns: whether a value was changed (excess spaces cut, a number rounded to its scale).
    /// - Throws: ``ColumnValueError``.
    package func check(_ values: inout [PGValue]) throws -> Bool {
        var changed = false
        for rule in self.rules {
            guard let text = values[rule.index].text else {
                if rule.refusesNull { throw self.error(rule, .nullNotAllowed) }
                continue
            }
            switch rule.check {
            case .none:
                break
            case .integer(let min, let max):
                // Text from an integer encoder; anything else (a Double into int4…) is left to the server.
                if let number = Int64(text), number < min || number > max { throw self.error(rule, .outOfRange) }
            case .characters(let limit, let padded):
                if let normalised = try self.fit(text, limit: limit, padded: padded, rule) {
                    values[rule.index].text = normalised
                    changed = true
                }
            case .numeric(let precision, let scale):
                if let rounded = try self.fit(numeric: text, precision: precision, scale: scale, rule) {
                    values[rule.index].text = rounded
                    changed = true
                }
            case .enumeration(let labels):
                if !labels.contains(text) { throw self.error(rule, .notAnEnumLabel) }
            }
        }
        return changed
    }

    func error(_ rule: ColumnRule, _ reason: ColumnValueError.Reason) -> ColumnValueError {
        ColumnValueError(entity: self.entity, column: rule.column, columnType: rule.typeName, reason: reason)
    }

    /// `nil` when `text` fits as it is; the stored text when it fits after cutting excess spaces (and, for
    /// `char(n)`, trailing spaces).
    func fit(_ text: String, limit: Int, padded: Bool, _ rule: ColumnRule) throws -> String? {
        // A code point takes at least one UTF-8 byte: no more bytes than the limit is no more characters.
        if !padded, text.utf8.count <= limit { return nil }
        let count = text.unicodeScalars.count
        var stored = text
        if count > limit {
            // PostgreSQL cuts excess characters when they are all spaces, and refuses anything else.
            let scalars = text.unicodeScalars
            let cut = scalars.index(scalars.startIndex, offsetBy: limit)
            guard scalars[cut...].allSatisfy({ $0 == " " }) else { throw self.error(rule, .tooLong) }
            stored = String(scalars[..<cut])
        }
        // `char(n)` pads with spaces, and its value reads back without trailing spaces (they are not significant
        // for it): kept that way.
        if padded, stored.utf8.last == UInt8(ascii: " ") {
            let scalars = stored.unicodeScalars
            stored = scalars.lastIndex { $0 != " " }.map { String(scalars[...$0]) } ?? ""
        }
        return stored == text ? nil : stored
    }

    /// `nil` when the number fits with no more than `scale` decimals; the rounded text when it fits after
    /// rounding (half away from zero, as PostgreSQL rounds). Text that is not a plain decimal (`NaN`, an
    /// exponent, a Double's text) is left to the server.
    func fit(numeric text: String, precision: Int, scale: Int, _ rule: ColumnRule) throws -> String? {
        var bytes = Array(text.utf8)
        var negative = false
        if bytes.first == UInt8(ascii: "-") || bytes.first == UInt8(ascii: "+") {
            negative = bytes.first == UInt8(ascii: "-")
            bytes.removeFirst()
        }
        let point = bytes.firstIndex(of: UInt8(ascii: "."))
        var integer = Array(bytes[..<(point ?? bytes.endIndex)])
        var fraction = point.map { Array(bytes[($0 + 1)...]) } ?? []
        let isDigit = { (byte: UInt8) in byte >= 48 && byte <= 57 }
        guard !integer.isEmpty || !fraction.isEmpty, integer.allSatisfy(isDigit), fraction.allSatisfy(isDigit) else {
            return nil
        }
        var rounded = false
        if fraction.count > scale {
            let roundUp = fraction[scale] >= UInt8(ascii: "5")
            fraction.removeSubrange(scale...)
            rounded = true
            if roundUp {
                // Add one unit in the last kept place, carrying through the fraction into the integer part.
                var digits = integer + fraction
                var position = digits.count - 1
                var carry = true
                while carry, position >= 0 {
                    if digits[position] == UInt8(ascii: "9") {
                        digits[position] = UInt8(ascii: "0")
                        position -= 1
                    } else {
                        digits[position] += 1
                        carry = false
                    }
                }
                if carry { digits.insert(UInt8(ascii: "1"), at: 0) }
                integer = Array(digits[..<(digits.count - fraction.count)])
                fraction = Array(digits[(digits.count - fraction.count)...])
            }
        }
        let significantInteger = integer.drop { $0 == UInt8(ascii: "0") }
        let room = precision - scale
        if significantInteger.count > max(room, 0) { throw self.error(rule, .numericOverflow) }
        if room < 0, fraction.prefix(-room).contains(where: { $0 != UInt8(ascii: "0") }) {
            throw self.error(rule, .numericOverflow)
        }
        guard rounded else { return nil }
        var out = negative && (integer + fraction).contains(where: { $0 != UInt8(ascii: "0") }) ? "-" : ""
        out += significantInteger.isEmpty ? "0" : String(decoding: significantInteger, as: UTF8.self)
        if !fraction.isEmpty { out += "." + String(decoding: fraction, as: UTF8.self) }
        return out
    }
}

/// What a store knows of its tables' columns, and the door every write passes before it is queued: each value
/// checked against its column (``ColumnRules``), and normalised to what the column stores.
///
/// The PostgreSQL store fills it from the catalog at validation; the in-memory store from its declarations.
/// Without definitions for a table, only what every column needs is done (text without NUL, dates rounded to
/// microseconds).
package final class ColumnDoor: Sendable {
    private struct State {
        /// Column definitions by table.
        var tables: [String: [String: ColumnDefinition]] = [:]
        /// Compiled rules by entity type.
        var rules: [ObjectIdentifier: ColumnRules] = [:]
    }

    private let state = Locked(State())

    package init() {}

    /// Records (or replaces) the column definitions of a table.
    package func define(table: String, columns: [String: ColumnDefinition]) {
        self.state.withLock { state in
            state.tables[table] = columns
            state.rules.removeAll()
        }
    }

    /// The tables whose columns are known (those of the entities validated), sorted.
    package var tables: [String] { self.state.withLock { $0.tables.keys.sorted() } }

    /// The definitions of a table's columns (empty when none are known).
    package func definitions(table: String) -> [String: ColumnDefinition] {
        self.state.withLock { $0.tables[table] ?? [:] }
    }

    /// The compiled rules of `T`.
    package func rules<T: Entity>(_ plan: EntityPlan<T>) -> ColumnRules {
        let key = ObjectIdentifier(T.self)
        return self.state.withLock { state in
            if let rules = state.rules[key] { return rules }
            let rules = ColumnRules(
                entity: plan.entityName, columnNames: plan.columnNames, definitions: state.tables[plan.tableName] ?? [:],
                skipping: plan.readBackIndices)
            state.rules[key] = rules
            return rules
        }
    }

    /// Encodes a row, checks it against its columns and normalises it: the value as the table will hold it
    /// (dates rounded to microseconds, numbers to their scale, `char(n)` without trailing spaces) and its
    /// encoded values.
    /// - Throws: ``ColumnValueError`` (nothing about the value in it); ``EntityMappingError``.
    package func admit<T: Entity>(_ value: T) throws -> (value: T, encoded: [PGValue]) {
        let plan = try EntityPlan<T>.shared
        var encoded: [PGValue]
        do {
            encoded = try RowEncoder(plan: plan).encode(value)
        } catch let error as PGError where error.kind == .encoding && error.column != nil
            && error.sqlState == .characterNotInRepertoire
        {
            let column = error.column ?? ""
            let type = self.definitions(table: plan.tableName)[column]?.type.description ?? "text"
            throw ColumnValueError(entity: plan.entityName, column: column, columnType: type, reason: .nulCharacter)
        }
        if try self.rules(plan).check(&encoded) {
            // A number rounded to its scale, `char(n)` trimmed: the row as its values now read.
            return (try RowDecoder(plan: plan).decode(values: encoded), encoded)
        }
        // Dates with sub-microsecond digits (most `Date()` values): their encoding is already rounded; the row
        // gets the same values through its properties' key paths, without decoding it again.
        var normalised = value
        for (index, column) in plan.dateColumns where !encoded[index].isNull {
            guard let date = value[keyPath: column.keyPath] as? Date else { continue }
            let stored = date.postgresStored
            if stored == date { continue }
            if let path = column.keyPath as? WritableKeyPath<T, Date> {
                normalised[keyPath: path] = stored
            } else if let path = column.keyPath as? WritableKeyPath<T, Date?> {
                normalised[keyPath: path] = stored
            } else {
                // A read-only property (a `let`, or computed): decode the row from its values.
                return (try RowDecoder(plan: plan).decode(values: encoded), encoded)
            }
        }
        return (normalised, encoded)
    }

    /// Checks and normalises a row's encoded values (the in-memory store's rows, kept encoded).
    /// - Throws: ``ColumnValueError``.
    package func check<T: Entity>(_ plan: EntityPlan<T>, _ values: inout [PGValue]) throws {
        _ = try self.rules(plan).check(&values)
    }
}

/// A store that checks values at the door: the stack admits each written row through its ``ColumnDoor``.
package protocol ColumnDoorKeeping {
    var columnDoor: ColumnDoor { get }
}

/// What the door costs, for the benchmarks: public only to them (`@_spi(Benchmarks)`).
@_spi(Benchmarks) public enum ColumnDoorBenchmark {
    /// Nanoseconds per row the door adds to encoding: ``ColumnDoor/admit(_:)`` (encode, check, normalise) minus
    /// `RowEncoder.encode` alone, each timed over every value, in alternating rounds; the medians' difference.
    /// - Parameters:
    ///   - values: the rows (written as the door sees them; none may be refused).
    ///   - definitions: the table's column definitions; `nil` uses what `store` read at validation.
    ///   - store: the store whose definitions are used when `definitions` is `nil`.
    ///   - rounds: how many rounds of each.
    public static func nanosecondsPerRow<T: Entity>(
        _ values: [T], definitions: [String: ColumnDefinition]? = nil, store: (any Store)? = nil, rounds: Int = 7
    ) throws -> (admit: Double, encode: Double) {
        let door = (store as? any ColumnDoorKeeping)?.columnDoor ?? ColumnDoor()
        if let definitions { door.define(table: T.tableName, columns: definitions) }
        let encoder = try RowEncoder<T>()
        let clock = ContinuousClock()
        var admitted: [Double] = []
        var encoded: [Double] = []
        var sink = 0
        func perRow(_ duration: Duration) -> Double {
            Double(duration.components.seconds) * 1e9 / Double(values.count)
                + Double(duration.components.attoseconds) / 1e9 / Double(values.count)
        }
        for _ in 0..<max(1, rounds) {
            let start = clock.now
            for value in values { sink &+= try door.admit(value).encoded.count }
            admitted.append(perRow(clock.now - start))
            let encodeStart = clock.now
            for value in values { sink &+= try encoder.encode(value).count }
            encoded.append(perRow(clock.now - encodeStart))
        }
        precondition(sink > 0)
        func median(_ samples: [Double]) -> Double { samples.sorted()[samples.count / 2] }
        return (median(admitted), median(encoded))
    }
}
