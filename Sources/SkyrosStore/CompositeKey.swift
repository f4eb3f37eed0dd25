import SkyrosPostgres

/// The id of an ``Entity`` whose primary key has several columns.
///
/// Use it as the entity's `ID`, computed from the key's stored properties, and name the key's columns with
/// ``Entity/primaryKey`` in the same order:
///
/// ```swift
/// struct Enrollment: Entity {
///     var courseID: Int64
///     var studentID: UUID
///     var grade: String?
///
///     var id: CompositeKey<Int64, UUID> { CompositeKey(self.courseID, self.studentID) }
///
///     static let tableName = "enrollments"   // PRIMARY KEY (course_id, student_id)
///     static let columns: [EntityColumn<Enrollment>] = [
///         EntityColumn(\.courseID, "course_id"), EntityColumn(\.studentID, "student_id"), EntityColumn(\.grade, "grade"),
///     ]
///     static let primaryKey = PrimaryKey<Enrollment>(\.courseID, \.studentID)
/// }
///
/// let studentID = UUID()
/// let enrollment = try await context.object(Enrollment.self, id: CompositeKey(7, studentID))
/// ```
///
/// Its text form is PostgreSQL's for `ROW(course_id, student_id)`, `(7,0b6e…)`: the form in which change
/// capture names a changed row, so a cached row and a change to it from any writer meet under one key.
public struct CompositeKey<each Value: PGCodable & Hashable>: Hashable, Sendable {
    /// The key's values, in the primary key's column order.
    public let values: (repeat each Value)

    /// A key from its values, in the order ``Entity/primaryKey`` names their columns.
    public init(_ value: repeat each Value) {
        self.values = (repeat each value)
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        for (left, right) in repeat (each lhs.values, each rhs.values) {
            guard left == right else { return false }
        }
        return true
    }

    public func hash(into hasher: inout Hasher) {
        for value in repeat each self.values { hasher.combine(value) }
    }
}

extension CompositeKey: CustomStringConvertible {
    /// The key as PostgreSQL prints `ROW(…)`: `(7,0b6e…)`.
    public var description: String { (try? self.postgresText()) ?? "(…)" }
}

extension CompositeKey: PGEncodable {
    /// `record`. A composite key is never bound as one parameter: the stores bind its values one by one.
    public static var postgresType: PGType { .record }

    /// The key as PostgreSQL prints `ROW(…)` of its columns.
    public func postgresText() throws -> String? {
        RecordText.format(try self.componentValues().map(\.text))
    }
}

extension CompositeKey: PGDecodable {
    /// Decodes the text PostgreSQL prints for `ROW(…)` of the key's columns.
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
        let fields = try RecordText.parse(bytes)
        var index = 0
        func next<V: PGCodable>(_ type: V.Type) throws -> V {
            defer { index += 1 }
            guard index < fields.count else {
                throw PGError(kind: .decoding, message: "a key of \(fields.count) columns where \(Self.self) has more")
            }
            guard let text = fields[index] else { return try V.postgresNull(type: V.postgresType) }
            return try V(postgresText: ArraySlice(text.utf8), type: V.postgresType)
        }
        guard fields.count == Self.componentTypes.count else {
            throw PGError(kind: .decoding, message: "a key of \(fields.count) columns where \(Self.self) has \(Self.componentTypes.count)")
        }
        self.init(repeat try next((each Value).self))
    }
}

/// What the stores ask of a composite key without knowing its value types.
package protocol CompositeKeyProtocol {
    /// Each value bound as its own parameter, in key order.
    func componentValues() throws -> [PGValue]
    /// The values' types, in key order.
    static var componentTypes: [Any.Type] { get }
    /// The values' parameter types, in key order.
    static var componentPostgresTypes: [PGType] { get }
}

extension CompositeKey: CompositeKeyProtocol {
    package func componentValues() throws -> [PGValue] {
        var values: [PGValue] = []
        for value in repeat each self.values { values.append(try PGValue(value)) }
        return values
    }

    package static var componentTypes: [Any.Type] {
        var types: [Any.Type] = []
        for type in repeat (each Value).self { types.append(type) }
        return types
    }

    package static var componentPostgresTypes: [PGType] {
        var types: [PGType] = []
        for type in repeat (each Value).self { types.append(type.postgresType) }
        return types
    }
}

/// The columns of a primary key that has several (see ``CompositeKey``), by key path, in the key's order.
///
/// ```swift
/// static let primaryKey = PrimaryKey<Enrollment>(\.courseID, \.studentID)
/// ```
public struct PrimaryKey<Root>: @unchecked Sendable {
    // @unchecked Sendable: key paths to stored properties are immutable values; the standard library does not
    // mark them Sendable.
    /// The key's properties, in order.
    public let keyPaths: [PartialKeyPath<Root>]

    /// The key's properties, in the order of the entity's ``CompositeKey`` values; none for the default, the
    /// column for `\.id`.
    public init(_ keyPaths: PartialKeyPath<Root>...) {
        self.keyPaths = keyPaths
    }
}

extension CompositeKey: Comparable where repeat each Value: Comparable {
    /// Orders keys by their first value, then the next: the order of `ORDER BY a, b`.
    public static func < (lhs: Self, rhs: Self) -> Bool {
        for (left, right) in repeat (each lhs.values, each rhs.values) {
            if left < right { return true }
            if right < left { return false }
        }
        return false
    }
}
