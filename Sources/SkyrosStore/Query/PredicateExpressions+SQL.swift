import Foundation
import SkyrosPostgres

// One `SQLFragment` conformance per supported `PredicateExpressions` node. Every node writes a parenthesized
// expression and keeps the invariant "SQL NULL exactly when the Swift value is nil" (see `SQLFragment`).

// MARK: - Leaves

/// A predicate variable (`$0`, or the unwrapped value inside `?.`).
package protocol SQLVariableNode {
    /// The variable's identity.
    var variableKey: PredicateExpressions.VariableID { get }
}

extension PredicateExpressions.Variable: SQLVariableNode, SQLFragment {
    package var variableKey: PredicateExpressions.VariableID { self.key }

    package func writeSQL(into writer: inout SQLWriter) throws {
        switch writer.variables[self.key] {
        case .expression(let sql)?:
            writer.append(sql)
        case .row?:
            throw writer.unsupported(
                "Variable", "the whole \(writer.entity) value cannot be used as a value; compare its properties")
        case nil:
            throw writer.unsupported("Variable", "a variable that is not bound by this predicate")
        }
    }
}

/// A captured value, seen without its generic type.
package protocol SQLValueNode {
    /// The captured value.
    var anyValue: Any { get }
}

extension PredicateExpressions.Value: SQLValueNode, SQLFragment {
    package var anyValue: Any { self.value }

    package func writeSQL(into writer: inout SQLWriter) throws {
        if let encodable = self.value as? any PGEncodable {
            try writer.bind(encodable: encodable)
        } else if let convertible = self.value as? any SQLArrayConvertible {
            try writer.bind(encodable: convertible.sqlArray)
        } else if let raw = try rawValueParameter(self.value) {
            writer.bind(raw)
        } else {
            throw writer.unsupported(
                "Value<\(Output.self)>", "a captured value of type \(Output.self) cannot be sent to PostgreSQL")
        }
    }
}

/// A raw-value enum (or an optional one) as a parameter: its raw value, untyped so that PostgreSQL gives it the
/// type of what it is compared with — the column's enum type for `"mood" = $1`, which that column's index serves
/// (a `text` parameter would need the column cast to `text`, which no index on it serves). `nil` when `value` is
/// not such an enum.
/// - Throws: `PGError` when the raw value cannot be encoded (text with NUL).
func rawValueParameter(_ value: Any) throws -> PGValue? {
    if let optional = value as? any AnyOptional {
        guard let wrapped = optional.wrappedAny else {
            return isRawValueEnum(type(of: value)) ? PGValue.null : nil
        }
        return try rawValueParameter(wrapped)
    }
    guard let representable = value as? any RawRepresentable else { return nil }
    func raw<R: RawRepresentable>(_ value: R) -> Any { value.rawValue }
    guard let encodable = raw(representable) as? any PGEncodable else { return nil }
    var parameter = try PGValue(encodable)
    parameter.type = .unspecified
    return parameter
}

/// Whether `type` (optional or not) is a `RawRepresentable` type.
private func isRawValueEnum(_ type: Any.Type) -> Bool {
    unwrapOptional(type).0 is any RawRepresentable.Type
}

/// An optional whose wrapped value can be read without knowing its type.
package protocol AnyOptional {
    /// The wrapped value, or `nil`.
    var wrappedAny: Any? { get }
}

extension Optional: AnyOptional {
    package var wrappedAny: Any? {
        switch self {
        case .some(let wrapped): return wrapped
        case .none: return nil
        }
    }
}

/// A collection that is bound as a PostgreSQL array although it is not itself `PGEncodable` (a `Set`).
package protocol SQLArrayConvertible {
    /// The elements as an encodable array.
    var sqlArray: any PGEncodable { get }
}

extension Set: SQLArrayConvertible where Element: PGArrayElement {
    package var sqlArray: any PGEncodable { Array(self) }
}

/// `nil` written in a predicate.
package protocol SQLNilLiteralNode {}

extension PredicateExpressions.NilLiteral: SQLNilLiteralNode, SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws { writer.append("NULL") }
}

// MARK: - Key paths

/// A node that may be a plain column of the entity row (`$0.name`).
package protocol SQLColumnReferenceNode {
    /// Whether this node is a mapped column of the row `writer` translates.
    func isColumnReference(in writer: SQLWriter) -> Bool
}

extension PredicateExpressions.KeyPath: SQLColumnReferenceNode {
    package func isColumnReference(in writer: SQLWriter) -> Bool {
        guard let variable = self.root as? any SQLVariableNode, case .row? = writer.variables[variable.variableKey]
        else { return false }
        return writer.metadata.columnsByKeyPath[self.keyPath as AnyKeyPath] != nil
    }
}

extension SQLWriter {
    /// Whether `expression` is a plain column of the row.
    func isColumn(_ expression: some PredicateExpression) -> Bool {
        (expression as? any SQLColumnReferenceNode)?.isColumnReference(in: self) ?? false
    }

    /// Whether one operand is a plain column and the other a captured value: the shape a B-tree index on the
    /// column serves. Such a string comparison is left in the column's collation; every other one is
    /// compared in code-point order (`COLLATE "C"`), as Swift compares.
    func comparesColumnWithValue(_ lhs: some PredicateExpression, _ rhs: some PredicateExpression) -> Bool {
        (self.isColumn(lhs) && rhs is any SQLValueNode) || (lhs is any SQLValueNode && self.isColumn(rhs))
    }
}

extension PredicateExpressions.KeyPath: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        let path = self.keyPath as AnyKeyPath
        if let variable = self.root as? any SQLVariableNode, case .row? = writer.variables[variable.variableKey] {
            guard let column = writer.metadata.columnsByKeyPath[path] else {
                throw QueryError(
                    code: .unmappedKeyPath, entity: writer.entity, construct: "\(path)",
                    message: "\(path) is not a column of \(writer.entity): add it to \(writer.entity).columns")
            }
            // A String property may be stored in a column of another type that decodes as text (`varchar`,
            // `citext`, `char(n)`): compared as text, its SQL meaning is Swift's (`citext` would compare ignoring
            // case). For a `text` column the cast is no cast at all, and for `varchar` a relabelling: an index on
            // the column serves both. (A String property on an enum column is refused at start; a raw-value
            // enum property is compared as the enum.)
            let qualified = writer.qualifiesColumns ? (writer.table.map { $0 + "." } ?? "") + column.quoted : column.quoted
            writer.append(column.isString ? "\(qualified)::text" : qualified)
            return
        }
        if let reference = Root.Output.self as? any SQLReferenceType.Type {
            try writer.writeReferenceMember(reference, of: self.root, keyPath: path)
            return
        }
        guard Root.Output.self == String.self else {
            throw writer.unsupported(
                "KeyPath", "a key path on \(Root.Output.self) (to \(Output.self)) is not supported; only mapped "
                    + "columns and String's count, isEmpty, localizedLowercase and localizedUppercase are")
        }
        let base = try writer.render(self.root)
        switch path {
        case \String.count:
            writer.append("char_length(\(base))")
        case \String.isEmpty:
            writer.append("(\(base) = '')")
        case \String.localizedLowercase:
            writer.append("(lower(\(base) COLLATE \(icuCollation)) COLLATE \"C\")")
        case \String.localizedUppercase:
            writer.append("(upper(\(base) COLLATE \(icuCollation)) COLLATE \"C\")")
        default:
            throw writer.unsupported(
                "KeyPath", "the key path \(path) on String (to \(Output.self)) is not supported; String's count, "
                    + "isEmpty, localizedLowercase and localizedUppercase are")
        }
    }
}

/// The ICU root collation used for `localizedLowercase` / `localizedUppercase` (full Unicode case mapping).
let icuCollation = "\"und-x-icu\""

// MARK: - Logic

extension PredicateExpressions.Conjunction: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        writer.append("(")
        try writer.write(self.lhs)
        writer.append(" AND ")
        try writer.write(self.rhs)
        writer.append(")")
    }
}

extension PredicateExpressions.Disjunction: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        writer.append("(")
        try writer.write(self.lhs)
        writer.append(" OR ")
        try writer.write(self.rhs)
        writer.append(")")
    }
}

extension PredicateExpressions.Negation: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        writer.append("(NOT ")
        try writer.write(self.wrapped)
        writer.append(")")
    }
}

// MARK: - Equality and comparison

/// `=`/`<>` for non-optional operands; `IS [NOT] DISTINCT FROM` when either side is optional (Swift's
/// `nil == nil` is true); `IS [NOT] NULL` against a `nil` literal. An optional column equal to a captured value
/// is written so that the column's index serves it: `IS NULL` for `nil`, else `= $n AND … IS NOT NULL`.
private func writeEquality(
    _ lhs: some PredicateExpression, _ rhs: some PredicateExpression, negated: Bool, into writer: inout SQLWriter
) throws {
    if try writer.writeReferencedEquality(lhs, rhs, negated: negated) { return }
    if lhs is any SQLNilLiteralNode || rhs is any SQLNilLiteralNode {
        let other = lhs is any SQLNilLiteralNode ? try writer.render(rhs) : try writer.render(lhs)
        writer.append("(\(other) IS \(negated ? "NOT " : "")NULL)")
        return
    }
    let optional = isOptionalType(type(of: lhs).Output.self) || isOptionalType(type(of: rhs).Output.self)
    if optional, !negated, writer.comparesColumnWithValue(lhs, rhs) {
        // A column against a captured value, in a form its index serves (`IS NOT DISTINCT FROM` is served by
        // none): `IS NULL` for nil, else `=` — and `IS NOT NULL`, which keeps the result false, not NULL, on a
        // NULL column (see `SQLFragment`).
        let (column, value) = lhs is any SQLValueNode ? (rhs as any PredicateExpression, lhs as any PredicateExpression)
            : (lhs as any PredicateExpression, rhs as any PredicateExpression)
        let columnSQL = try writer.render(column)
        if let node = value as? any SQLValueNode, let optional = node.anyValue as? any AnyOptional,
            optional.wrappedAny == nil
        {
            writer.append("(\(columnSQL) IS NULL)")
            return
        }
        let valueSQL = try writer.render(value)
        writer.append("(\(columnSQL) = \(valueSQL) AND \(columnSQL) IS NOT NULL)")
        return
    }
    let op = optional ? (negated ? "IS DISTINCT FROM" : "IS NOT DISTINCT FROM") : (negated ? "<>" : "=")
    writer.append("(")
    try writer.write(lhs)
    writer.append(" \(op) ")
    try writer.write(rhs)
    writer.append(")")
}

extension PredicateExpressions.Equal: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        try writeEquality(self.lhs, self.rhs, negated: false, into: &writer)
    }
}

extension PredicateExpressions.NotEqual: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        try writeEquality(self.lhs, self.rhs, negated: true, into: &writer)
    }
}

/// Whether values of `type` are strings.
func isStringType(_ type: Any.Type) -> Bool { type == String.self || type == String?.self }

/// `COLLATE "C"` (code-point order, Swift's) for a string comparison that is not a column against a captured
/// value; nothing otherwise (a column against a value compares in the column's collation, which its index
/// serves).
private func codePointCollation(
    _ type: Any.Type, _ lhs: some PredicateExpression, _ rhs: some PredicateExpression, _ writer: SQLWriter
) -> String {
    isStringType(type) && !writer.comparesColumnWithValue(lhs, rhs) ? " COLLATE \"C\"" : ""
}

extension PredicateExpressions.Comparison: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        let collate = codePointCollation(LHS.Output.self, self.lhs, self.rhs, writer)
        let op: String
        switch self.op {
        case .lessThan: op = "<"
        case .lessThanOrEqual: op = "<="
        case .greaterThan: op = ">"
        case .greaterThanOrEqual: op = ">="
        @unknown default: throw writer.unsupported("Comparison", "an unknown comparison operator")
        }
        writer.append("(")
        try writer.write(self.lhs)
        writer.append("\(collate) \(op) ")
        try writer.write(self.rhs)
        writer.append("\(collate))")
    }
}

// MARK: - Arithmetic

extension PredicateExpressions.Arithmetic: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        let op: String
        switch self.op {
        case .add: op = "+"
        case .subtract: op = "-"
        case .multiply: op = "*"
        @unknown default: throw writer.unsupported("Arithmetic", "an unknown arithmetic operator")
        }
        try writer.writeBinary(self.lhs, op, self.rhs)
    }
}

extension PredicateExpressions.IntDivision: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        // PostgreSQL integer division truncates toward zero, like Swift.
        try writer.writeBinary(self.lhs, "/", self.rhs)
    }
}

extension PredicateExpressions.IntRemainder: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        // The sign follows the dividend in both languages: -7 % 2 == -1.
        try writer.writeBinary(self.lhs, "%", self.rhs)
    }
}

extension PredicateExpressions.FloatDivision: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        try writer.writeBinary(self.lhs, "/", self.rhs)
    }
}

extension PredicateExpressions.UnaryMinus: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        writer.append("(-")
        try writer.write(self.wrapped)
        writer.append(")")
    }
}

extension SQLWriter {
    /// `(lhs op rhs)`; operands are parenthesized nodes or placeholders, so `- -` never forms a comment.
    mutating func writeBinary(_ lhs: some PredicateExpression, _ op: String, _ rhs: some PredicateExpression) throws {
        self.append("(")
        try self.write(lhs)
        self.append(" \(op) ")
        try self.write(rhs)
        self.append(")")
    }
}

// MARK: - Optionals and conditionals

extension PredicateExpressions.NilCoalesce: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        writer.append("COALESCE(")
        try writer.write(self.lhs)
        writer.append(", ")
        try writer.write(self.rhs)
        writer.append(")")
    }
}

extension PredicateExpressions.OptionalFlatMap: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        // `x?.f` is nil when x is nil, else f(x): exactly a CASE, whatever f does with NULLs.
        let wrapped = try writer.render(self.wrapped)
        writer.append("(CASE WHEN \(wrapped) IS NULL THEN NULL ELSE ")
        try writer.with(self.variable.key, boundTo: .expression(wrapped), write: self.transform)
        writer.append(" END)")
    }
}

extension PredicateExpressions.Conditional: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        writer.append("(CASE WHEN ")
        try writer.write(self.test)
        writer.append(" THEN ")
        try writer.write(self.trueBranch)
        writer.append(" ELSE ")
        try writer.write(self.falseBranch)
        writer.append(" END)")
    }
}

// MARK: - Strings

/// Escapes `\`, `%` and `_` for a `LIKE … ESCAPE '\'` pattern.
package func likeEscaped(_ text: String) -> String {
    var out = ""
    out.reserveCapacity(text.utf8.count)
    for character in text.unicodeScalars {
        if character == "\\" || character == "%" || character == "_" { out.unicodeScalars.append("\\") }
        out.unicodeScalars.append(character)
    }
    return out
}

/// The `ESCAPE` clause for LIKE patterns built by ``likeEscaped(_:)``; valid whatever
/// `standard_conforming_strings` is.
let likeEscapeClause = " ESCAPE E'\\\\'"

extension PredicateExpressions.CollectionContainsCollection: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        guard Base.Output.self == String.self, Other.Output.self == String.self else {
            throw writer.unsupported(
                "CollectionContainsCollection", "contains(_:) is supported on String operands, not \(Base.Output.self)")
        }
        if let value = self.other as? PredicateExpressions.Value<String> {
            // A bound LIKE pattern (so a trigram index can serve it); "x".contains("") is true, as is LIKE '%%'.
            writer.append("(")
            try writer.write(self.base)
            writer.append(" LIKE ")
            writer.bind(PGValue(type: .text, text: "%" + likeEscaped(value.value) + "%"))
            writer.append(likeEscapeClause + ")")
        } else {
            writer.append("(strpos(")
            try writer.write(self.base)
            writer.append(", ")
            try writer.write(self.other)
            writer.append(") > 0)")
        }
    }
}

extension PredicateExpressions.SequenceStartsWith: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        guard Base.Output.self == String.self, Prefix.Output.self == String.self else {
            throw writer.unsupported(
                "SequenceStartsWith", "starts(with:) is supported on String operands, not \(Base.Output.self)")
        }
        if let value = self.prefix as? PredicateExpressions.Value<String> {
            writer.append("(")
            try writer.write(self.base)
            writer.append(" LIKE ")
            writer.bind(PGValue(type: .text, text: likeEscaped(value.value) + "%"))
            writer.append(likeEscapeClause + ")")
        } else {
            writer.append("starts_with(")
            try writer.write(self.base)
            writer.append(", ")
            try writer.write(self.prefix)
            writer.append(")")
        }
    }
}

// MARK: - Membership

extension PredicateExpressions.SequenceContains: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        if let captured = self.sequence as? any SQLValueNode,
            let (array, containsNil) = try capturedElements(captured.anyValue)
        {
            // `x = ANY($n)`, which an index on x serves, with only the non-nil elements bound: an array holding
            // NULL would make a non-matching x NULL, not false.
            let element = try writer.render(self.element)
            writer.binds.append(array)
            let membership = "\(element) = ANY($\(writer.binds.count))"
            if !isOptionalType(RHS.Output.self) {
                writer.append("(\(membership))")
            } else if containsNil {
                // Two-valued for a NULL x, and true when nil is listed (Swift's `[nil].contains(nil)`).
                writer.append("((\(membership) AND \(element) IS NOT NULL) OR \(element) IS NULL)")
            } else {
                writer.append("(\(membership) AND \(element) IS NOT NULL)")
            }
            return
        }
        let element = try writer.render(self.element)
        let sequence = try writer.render(self.sequence)
        if isOptionalType(RHS.Output.self) {
            // `[nil, "a"].contains(x)` is true for a nil x: NULL-safe comparison against every element.
            writer.append(
                "(EXISTS (SELECT 1 FROM unnest(\(sequence)) AS \"__skyros_element\"(\"value\") "
                    + "WHERE \"__skyros_element\".\"value\" IS NOT DISTINCT FROM \(element)))")
        } else {
            writer.append("(\(element) = ANY(\(sequence)))")
        }
    }
}

/// A captured array or set, for `x = ANY($n)`: its non-nil elements as one array parameter (typed as its
/// elements are; untyped for raw-value enums, so that PostgreSQL types it as the compared column's enum array),
/// and whether it holds `nil`. `nil` when `value` is not such a collection of bindable elements.
/// - Throws: `PGError` when an element cannot be encoded (text with NUL).
func capturedElements(_ value: Any) throws -> (array: PGValue, containsNil: Bool)? {
    // An array of a native element type (no nil to drop, nothing to unwrap) is bound as it is: one cast for the
    // array, not three per element (a prefetch binds every id it looks up this way).
    if let native = value as? any NativeArrayParameter, !type(of: native).hasOptionalElements {
        return (try native.arrayParameter(), false)
    }
    guard let collection = value as? any CapturedCollection else { return nil }
    var elements: [Any] = []
    var containsNil = false
    for element in collection.elementsAny {
        if let optional = element as? any AnyOptional {
            if let wrapped = optional.wrappedAny { elements.append(wrapped) } else { containsNil = true }
        } else {
            elements.append(element)
        }
    }
    let elementType = unwrapOptional(type(of: collection).capturedElementType).0
    func typedArray<E: PGArrayElement>(_ type: E.Type, _ values: [Any]) throws -> PGValue? {
        var typed: [E] = []
        typed.reserveCapacity(values.count)
        for value in values {
            guard let element = value as? E else { return nil }
            typed.append(element)
        }
        return try PGValue(typed)
    }
    if let native = elementType as? any PGArrayElement.Type {
        return try typedArray(native, elements).map { ($0, containsNil) }
    }
    guard let representable = elementType as? any RawRepresentable.Type else { return nil }
    func rawType<R: RawRepresentable>(_ type: R.Type) -> Any.Type { R.RawValue.self }
    guard let raw = rawType(representable) as? any PGArrayElement.Type else { return nil }
    func rawValue<R: RawRepresentable>(_ value: R) -> Any { value.rawValue }
    let raws = elements.compactMap { element -> Any? in (element as? any RawRepresentable).map { rawValue($0) } }
    guard raws.count == elements.count, var array = try typedArray(raw, raws) else { return nil }
    array.type = .unspecified
    return (array, containsNil)
}

/// An array whose elements PostgreSQL takes as one array parameter (`int8[]`, `text[]`, `uuid[]`, …).
protocol NativeArrayParameter {
    /// Whether the elements are optionals (their nils are not bound: see `SequenceContains`).
    static var hasOptionalElements: Bool { get }
    /// The array as one bound value.
    func arrayParameter() throws -> PGValue
}

extension Array: NativeArrayParameter where Element: PGArrayElement {
    static var hasOptionalElements: Bool { isOptionalType(Element.self) }
    func arrayParameter() throws -> PGValue { try PGValue(self) }
}

/// An array or set captured by a predicate, seen without its element type.
package protocol CapturedCollection {
    /// The elements.
    var elementsAny: [Any] { get }
    /// The static element type.
    static var capturedElementType: Any.Type { get }
}

extension Array: CapturedCollection {
    package var elementsAny: [Any] { self.map { $0 } }
    package static var capturedElementType: Any.Type { Element.self }
}

extension Set: CapturedCollection {
    package var elementsAny: [Any] { self.map { $0 } }
    package static var capturedElementType: Any.Type { Element.self }
}

/// A range node (`a..<b`, `a...b`) written in a predicate.
package protocol SQLRangeNode {
    /// Renders the bounds; `closed` when the upper bound is included.
    func writeBounds(into writer: inout SQLWriter) throws -> (lower: String, upper: String, closed: Bool)
    /// Whether both bounds are captured values.
    var hasCapturedBounds: Bool { get }
}

extension PredicateExpressions.Range: SQLRangeNode {
    package func writeBounds(into writer: inout SQLWriter) throws -> (lower: String, upper: String, closed: Bool) {
        (try writer.render(self.lower), try writer.render(self.upper), false)
    }
    package var hasCapturedBounds: Bool { self.lower is any SQLValueNode && self.upper is any SQLValueNode }
}

extension PredicateExpressions.ClosedRange: SQLRangeNode {
    package func writeBounds(into writer: inout SQLWriter) throws -> (lower: String, upper: String, closed: Bool) {
        (try writer.render(self.lower), try writer.render(self.upper), true)
    }
    package var hasCapturedBounds: Bool { self.lower is any SQLValueNode && self.upper is any SQLValueNode }
}

/// A captured range value (`let r = 1...5; r.contains($0.n)`).
package protocol SQLRangeValue {
    /// Binds the bounds.
    func writeBounds(into writer: inout SQLWriter) throws -> (lower: String, upper: String, closed: Bool)
}

extension Range: SQLRangeValue where Bound: PGEncodable {
    package func writeBounds(into writer: inout SQLWriter) throws -> (lower: String, upper: String, closed: Bool) {
        (try writer.renderBind(self.lowerBound), try writer.renderBind(self.upperBound), false)
    }
}

extension ClosedRange: SQLRangeValue where Bound: PGEncodable {
    package func writeBounds(into writer: inout SQLWriter) throws -> (lower: String, upper: String, closed: Bool) {
        (try writer.renderBind(self.lowerBound), try writer.renderBind(self.upperBound), true)
    }
}

extension SQLWriter {
    /// Binds `value` and returns its placeholder without appending it.
    mutating func renderBind(_ value: some PGEncodable) throws -> String {
        self.binds.append(try PGValue(value))
        return "$\(self.binds.count)"
    }
}

extension PredicateExpressions.RangeExpressionContains: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        let bounds: (lower: String, upper: String, closed: Bool)
        let capturedBounds: Bool
        if let node = self.range as? any SQLRangeNode {
            bounds = try node.writeBounds(into: &writer)
            capturedBounds = node.hasCapturedBounds
        } else if let value = self.range as? any SQLValueNode, let range = value.anyValue as? any SQLRangeValue {
            bounds = try range.writeBounds(into: &writer)
            capturedBounds = true
        } else {
            throw writer.unsupported(
                "RangeExpressionContains", "only a..<b and a...b ranges are supported, not \(RangeExpression.Output.self)")
        }
        // A column between captured bounds compares in the column's collation (its index serves it); anything
        // else in code-point order, as Swift compares.
        let inColumnCollation = capturedBounds && writer.isColumn(self.element)
        let collate = isStringType(Element.Output.self) && !inColumnCollation ? " COLLATE \"C\"" : ""
        let element = try writer.render(self.element) + collate
        writer.append(
            "(\(element) >= \(bounds.lower)\(collate) AND \(element) \(bounds.closed ? "<=" : "<") \(bounds.upper)\(collate))")
    }
}
