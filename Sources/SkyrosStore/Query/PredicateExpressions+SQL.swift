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
        } else {
            throw writer.unsupported(
                "Value<\(Output.self)>", "a captured value of type \(Output.self) cannot be sent to PostgreSQL")
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

extension PredicateExpressions.KeyPath: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        let path = self.keyPath as AnyKeyPath
        if let variable = self.root as? any SQLVariableNode, case .row? = writer.variables[variable.variableKey] {
            guard let column = writer.metadata.columnsByKeyPath[path] else {
                throw QueryError(
                    code: .unmappedKeyPath, entity: writer.entity, construct: "\(path)",
                    message: "\(path) is not a column of \(writer.entity): add it to \(writer.entity).columns")
            }
            // A String property may be stored in a column of another type that decodes as text (an enum,
            // `varchar`, `citext`): compared as text, its SQL meaning is Swift's (`mood = $1` has no operator for
            // an enum against a text parameter, and `citext` would compare ignoring case). For a `text` column
            // the cast is no cast at all (indexes still apply).
            writer.append(column.isString ? "\(column.quoted)::text" : column.quoted)
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
/// `nil == nil` is true); `IS [NOT] NULL` against a `nil` literal.
private func writeEquality(
    _ lhs: some PredicateExpression, _ rhs: some PredicateExpression, negated: Bool, into writer: inout SQLWriter
) throws {
    if lhs is any SQLNilLiteralNode || rhs is any SQLNilLiteralNode {
        let other = lhs is any SQLNilLiteralNode ? try writer.render(rhs) : try writer.render(lhs)
        writer.append("(\(other) IS \(negated ? "NOT " : "")NULL)")
        return
    }
    let optional = isOptionalType(type(of: lhs).Output.self) || isOptionalType(type(of: rhs).Output.self)
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

/// Whether values of `type` are strings, compared in code-point order (`COLLATE "C"`).
func isStringType(_ type: Any.Type) -> Bool { type == String.self || type == String?.self }

extension PredicateExpressions.Comparison: SQLFragment {
    package func writeSQL(into writer: inout SQLWriter) throws {
        let collate = isStringType(LHS.Output.self) ? " COLLATE \"C\"" : ""
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

/// A range node (`a..<b`, `a...b`) written in a predicate.
package protocol SQLRangeNode {
    /// Renders the bounds; `closed` when the upper bound is included.
    func writeBounds(into writer: inout SQLWriter) throws -> (lower: String, upper: String, closed: Bool)
}

extension PredicateExpressions.Range: SQLRangeNode {
    package func writeBounds(into writer: inout SQLWriter) throws -> (lower: String, upper: String, closed: Bool) {
        (try writer.render(self.lower), try writer.render(self.upper), false)
    }
}

extension PredicateExpressions.ClosedRange: SQLRangeNode {
    package func writeBounds(into writer: inout SQLWriter) throws -> (lower: String, upper: String, closed: Bool) {
        (try writer.render(self.lower), try writer.render(self.upper), true)
    }
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
        if let node = self.range as? any SQLRangeNode {
            bounds = try node.writeBounds(into: &writer)
        } else if let value = self.range as? any SQLValueNode, let range = value.anyValue as? any SQLRangeValue {
            bounds = try range.writeBounds(into: &writer)
        } else {
            throw writer.unsupported(
                "RangeExpressionContains", "only a..<b and a...b ranges are supported, not \(RangeExpression.Output.self)")
        }
        let collate = isStringType(Element.Output.self) ? " COLLATE \"C\"" : ""
        let element = try writer.render(self.element) + collate
        writer.append(
            "(\(element) >= \(bounds.lower)\(collate) AND \(element) \(bounds.closed ? "<=" : "<") \(bounds.upper)\(collate))")
    }
}
