import Foundation
import SkyrosPostgres

/// A predicate's captured dates rounded as PostgreSQL rounds their bound parameters (to microseconds), so that a
/// predicate evaluated in memory compares what the SQL compares: a row whose stored date equals a captured date
/// with sub-microsecond digits matches `==` on both sides, and not `>`.
///
/// Every node the SQL translator accepts is rebuilt with its captured values rounded, except
/// `OptionalFlatMap` (its closure's variable cannot be rebuilt): a predicate holding one is evaluated as written.
package enum PredicateDateRounding {
    /// Evaluates `predicate` on `values` with its dates rounded (`binds`: the SQL translation's bound values,
    /// which tell whether it captures a date at all).
    package static func evaluator<T: Entity>(
        _ predicate: Predicate<T>, binds: [PGValue]
    ) -> @Sendable (T) throws -> Bool {
        let capturesDate = binds.contains { $0.type == .timestamptz || $0.type == .timestamptzArray }
        guard capturesDate, let rounded = (predicate.expression as? any DateRounding)?.roundingDatesErased(),
            let expression = rounded as? any StandardPredicateExpression<Bool>
        else { return { try predicate.evaluate($0) } }
        let variable = predicate.variable
        return { value in try expression.evaluate(PredicateBindings((variable, value))) }
    }
}

/// An expression that can be rebuilt with its captured dates rounded.
protocol DateRounding {
    func roundingDates() -> Self
}

extension DateRounding {
    func roundingDatesErased() -> Any { self.roundingDates() }
}

extension PredicateExpressions.Value: DateRounding {
    func roundingDates() -> Self {
        let value: Any = self.value
        if let date = value as? Date { return Self(date.postgresStored as! Output) }
        if let dates = value as? [Date?] { return Self(dates.map { $0?.postgresStored } as! Output) }
        if let dates = value as? Set<Date> { return Self(Set(dates.map(\.postgresStored)) as! Output) }
        if let range = value as? Range<Date> {
            return Self(Range(uncheckedBounds: (range.lowerBound.postgresStored, range.upperBound.postgresStored)) as! Output)
        }
        if let range = value as? ClosedRange<Date> {
            return Self(ClosedRange(uncheckedBounds: (range.lowerBound.postgresStored, range.upperBound.postgresStored)) as! Output)
        }
        return self
    }
}

extension PredicateExpressions.Variable: DateRounding {
    func roundingDates() -> Self { self }
}

extension PredicateExpressions.NilLiteral: DateRounding {
    func roundingDates() -> Self { self }
}

extension PredicateExpressions.KeyPath: DateRounding where Root: DateRounding {
    func roundingDates() -> Self { Self(root: self.root.roundingDates(), keyPath: self.keyPath) }
}

extension PredicateExpressions.Conjunction: DateRounding where LHS: DateRounding, RHS: DateRounding {
    func roundingDates() -> Self { Self(lhs: self.lhs.roundingDates(), rhs: self.rhs.roundingDates()) }
}

extension PredicateExpressions.Disjunction: DateRounding where LHS: DateRounding, RHS: DateRounding {
    func roundingDates() -> Self { Self(lhs: self.lhs.roundingDates(), rhs: self.rhs.roundingDates()) }
}

extension PredicateExpressions.Negation: DateRounding where Wrapped: DateRounding {
    func roundingDates() -> Self { Self(self.wrapped.roundingDates()) }
}

extension PredicateExpressions.Equal: DateRounding where LHS: DateRounding, RHS: DateRounding {
    func roundingDates() -> Self { Self(lhs: self.lhs.roundingDates(), rhs: self.rhs.roundingDates()) }
}

extension PredicateExpressions.NotEqual: DateRounding where LHS: DateRounding, RHS: DateRounding {
    func roundingDates() -> Self { Self(lhs: self.lhs.roundingDates(), rhs: self.rhs.roundingDates()) }
}

extension PredicateExpressions.Comparison: DateRounding where LHS: DateRounding, RHS: DateRounding {
    func roundingDates() -> Self { Self(lhs: self.lhs.roundingDates(), rhs: self.rhs.roundingDates(), op: self.op) }
}

extension PredicateExpressions.Arithmetic: DateRounding where LHS: DateRounding, RHS: DateRounding {
    func roundingDates() -> Self { Self(lhs: self.lhs.roundingDates(), rhs: self.rhs.roundingDates(), op: self.op) }
}

extension PredicateExpressions.IntDivision: DateRounding where LHS: DateRounding, RHS: DateRounding {
    func roundingDates() -> Self { Self(lhs: self.lhs.roundingDates(), rhs: self.rhs.roundingDates()) }
}

extension PredicateExpressions.IntRemainder: DateRounding where LHS: DateRounding, RHS: DateRounding {
    func roundingDates() -> Self { Self(lhs: self.lhs.roundingDates(), rhs: self.rhs.roundingDates()) }
}

extension PredicateExpressions.FloatDivision: DateRounding where LHS: DateRounding, RHS: DateRounding {
    func roundingDates() -> Self { Self(lhs: self.lhs.roundingDates(), rhs: self.rhs.roundingDates()) }
}

extension PredicateExpressions.UnaryMinus: DateRounding where Wrapped: DateRounding {
    func roundingDates() -> Self { Self(self.wrapped.roundingDates()) }
}

extension PredicateExpressions.NilCoalesce: DateRounding where LHS: DateRounding, RHS: DateRounding {
    func roundingDates() -> Self { Self(lhs: self.lhs.roundingDates(), rhs: self.rhs.roundingDates()) }
}

extension PredicateExpressions.Conditional: DateRounding
where Test: DateRounding, If: DateRounding, Else: DateRounding {
    func roundingDates() -> Self {
        Self(test: self.test.roundingDates(), trueBranch: self.trueBranch.roundingDates(),
             falseBranch: self.falseBranch.roundingDates())
    }
}

extension PredicateExpressions.CollectionContainsCollection: DateRounding where Base: DateRounding, Other: DateRounding {
    func roundingDates() -> Self { Self(base: self.base.roundingDates(), other: self.other.roundingDates()) }
}

extension PredicateExpressions.SequenceStartsWith: DateRounding where Base: DateRounding, Prefix: DateRounding {
    func roundingDates() -> Self { Self(base: self.base.roundingDates(), prefix: self.prefix.roundingDates()) }
}

extension PredicateExpressions.SequenceContains: DateRounding where LHS: DateRounding, RHS: DateRounding {
    func roundingDates() -> Self { Self(sequence: self.sequence.roundingDates(), element: self.element.roundingDates()) }
}

extension PredicateExpressions.Range: DateRounding where LHS: DateRounding, RHS: DateRounding {
    func roundingDates() -> Self { Self(lower: self.lower.roundingDates(), upper: self.upper.roundingDates()) }
}

extension PredicateExpressions.ClosedRange: DateRounding where LHS: DateRounding, RHS: DateRounding {
    func roundingDates() -> Self { Self(lower: self.lower.roundingDates(), upper: self.upper.roundingDates()) }
}

extension PredicateExpressions.RangeExpressionContains: DateRounding
where RangeExpression: DateRounding, Element: DateRounding {
    func roundingDates() -> Self { Self(range: self.range.roundingDates(), element: self.element.roundingDates()) }
}
