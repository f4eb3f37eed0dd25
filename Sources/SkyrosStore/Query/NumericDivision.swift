import Foundation

/// PostgreSQL's `numeric` division as `avg` uses it (`numeric_div`: `select_div_scale`, then rounding half away
/// from zero), so that an average computed in memory equals the one PostgreSQL returns, digit for digit.
///
/// The result scale gives at least 16 significant digits (`NUMERIC_MIN_SIG_DIGITS`), and no fewer decimals
/// than the dividend shows: `avg` of 1, 1 and 2 is 4 / 3 = `1.3333333333333333`; of 0, 1, 1 and 1 it is
/// `0.75000000000000000000`.
///
/// ```swift
/// NumericDivision.quotient(Decimal(4), scale: 0, dividedBy: 3)   // 1.3333333333333333
/// ```
package enum NumericDivision {
    /// `dividend / divisor` rounded to PostgreSQL's result scale.
    /// - Parameters:
    ///   - dividend: the sum.
    ///   - scale: the dividend's display scale (decimals shown; 0 for a sum of integers).
    ///   - divisor: the count, at least 1.
    package static func quotient(_ dividend: Decimal, scale: Int, dividedBy divisor: Int) -> Decimal {
        let count = Decimal(divisor)
        let (weight1, first1) = self.leadingDigit(dividend)
        let (weight2, first2) = self.leadingDigit(count)
        var quotientWeight = weight1 - weight2
        if first1 <= first2 { quotientWeight -= 1 }
        var resultScale = 16 - quotientWeight * 4
        resultScale = Swift.max(resultScale, scale)
        resultScale = Swift.max(resultScale, 0)
        resultScale = Swift.min(resultScale, 1000)
        var exact = dividend / count
        var rounded = Decimal()
        NSDecimalRound(&rounded, &exact, resultScale, .plain)
        return rounded
    }

    /// The number of decimals `value` shows as PostgreSQL reads its text (`Decimal.description`, the text
    /// Skyros binds).
    package static func displayScale(_ value: Decimal) -> Int {
        let text = value.description
        guard let point = text.firstIndex(of: ".") else { return 0 }
        return text.distance(from: text.index(after: point), to: text.endIndex)
    }

    /// The weight (power of 10000) and value of the first non-zero base-10000 digit of `|value|`, as
    /// `numeric` stores it; `(0, 0)` for zero.
    static func leadingDigit(_ value: Decimal) -> (weight: Int, digit: Int) {
        guard !value.isZero else { return (0, 0) }
        let magnitude = value.magnitude
        var significand = magnitude.significand
        var integral = Decimal()
        NSDecimalRound(&integral, &significand, 0, .plain)
        let digits = integral.description
        let power = digits.count - 1 + magnitude.exponent     // the power of ten of the leading digit
        let weight = power >= 0 ? power / 4 : -((-power + 3) / 4)
        let length = power - 4 * weight + 1                   // leading digits in that base-10000 digit: 1…4
        var group = String(digits.prefix(length))
        while group.count < length { group += "0" }
        return (weight, Int(group) ?? 0)
    }
}
