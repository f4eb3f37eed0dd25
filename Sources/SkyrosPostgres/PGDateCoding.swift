import Foundation

/// Text-format date/time conversion with microsecond precision, without `Calendar` (fast and locale-free).
enum PGDateCoding {
    /// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? y + 1 : y, m, d)
    }

    private static func pad(_ value: Int, _ width: Int, into out: inout String) {
        let digits = String(value)
        if digits.count < width { out += String(repeating: "0", count: width - digits.count) }
        out += digits
    }

    /// The first second PostgreSQL's `timestamp` and `timestamptz` can hold, from 1970: 4714-11-24 00:00:00 BC
    /// (`MIN_TIMESTAMP`).
    static let minimumSeconds = Int64(days(year: -4713, month: 11, day: 24)) * 86_400
    /// The second after the last one they can hold: 294277-01-01 00:00:00 (`END_TIMESTAMP`). Its microseconds
    /// from 1970 do not fit in an `Int64`, so dates are converted in whole seconds and microseconds.
    static let endSeconds = Int64(days(year: 294_277, month: 1, day: 1)) * 86_400

    /// Whole seconds and microseconds of a finite interval since 1970, rounded to the nearest microsecond, ties
    /// to even: what PostgreSQL does with more fractional digits in `timestamptz` input (`rint`).
    static func microseconds(_ interval: Double) -> (seconds: Int64, fraction: Int64) {
        let whole = interval.rounded(.down)
        var seconds = Int64(whole)
        var fraction = Int64(((interval - whole) * 1_000_000).rounded(.toNearestOrEven))
        if fraction == 1_000_000 {
            seconds += 1
            fraction = 0
        }
        return (seconds, fraction)
    }

    /// Whether seconds from 1970 may be within PostgreSQL's timestamp range: finite, and within a second of it.
    /// The bounds are whole seconds, exact in a Double; the margin lets rounding to microseconds decide at the
    /// edges.
    private static func mayBeStored(_ interval: Double) -> Bool {
        interval.isFinite && interval > Double(minimumSeconds - 1) && interval < Double(endSeconds + 1)
    }

    /// The date as PostgreSQL stores it after ``format(_:)``: rounded to microseconds, and built the way
    /// ``parse(_:)`` builds it, so that `stored(d) == parse(format(d))`. A date ``format(_:)`` refuses, or one
    /// too far out to hold microseconds, is returned as it is.
    static func stored(_ date: Date) -> Date {
        let interval = date.timeIntervalSince1970
        guard date != .distantFuture, date != .distantPast, self.mayBeStored(interval) else { return date }
        let (seconds, fraction) = self.microseconds(interval)
        let (micros, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000)
        if !overflow {
            let (total, overflow) = micros.addingReportingOverflow(fraction)
            if !overflow { return Date(timeIntervalSince1970: Double(total) / 1_000_000) }
        }
        return Date(timeIntervalSince1970: Double(seconds) + Double(fraction) / 1_000_000)
    }

    /// `YYYY-MM-DD HH:MM:SS.ffffff+00`, with ` BC` for years before 1; `infinity` and `-infinity` for
    /// `Date.distantFuture` and `Date.distantPast`.
    /// - Throws: ``PGError`` of kind `.encoding` for a date PostgreSQL cannot store: NaN, infinite, or
    ///   outside its timestamp range (4714 BC to 294276 AD).
    static func format(_ date: Date) throws -> String {
        if date == .distantFuture { return "infinity" }
        if date == .distantPast { return "-infinity" }
        let interval = date.timeIntervalSince1970
        let outOfRange = PGError(
            kind: .encoding,
            message: "cannot send a Date \(interval) seconds from 1970: PostgreSQL's timestamps range from 4714 BC to 294276 AD")
        guard self.mayBeStored(interval) else { throw outOfRange }
        let (seconds, fraction) = self.microseconds(interval)
        guard seconds >= minimumSeconds, seconds < endSeconds else { throw outOfRange }
        var dayNumber = seconds / 86_400
        var timeOfDay = seconds % 86_400
        if timeOfDay < 0 {
            timeOfDay += 86_400
            dayNumber -= 1
        }
        let (year, month, day) = civil(days: Int(dayNumber))
        let secondsOfDay = Int(timeOfDay)
        var out = ""
        out.reserveCapacity(34)
        pad(year <= 0 ? 1 - year : year, 4, into: &out)
        out += "-"
        pad(month, 2, into: &out)
        out += "-"
        pad(day, 2, into: &out)
        out += " "
        pad(secondsOfDay / 3600, 2, into: &out)
        out += ":"
        pad(secondsOfDay / 60 % 60, 2, into: &out)
        out += ":"
        pad(secondsOfDay % 60, 2, into: &out)
        out += "."
        pad(Int(fraction), 6, into: &out)
        out += "+00"
        if year <= 0 { out += " BC" }
        return out
    }

    /// Parses `date`, `timestamp` and `timestamptz` output in the ISO DateStyle, with any UTC offset; `nil`
    /// for anything else (the caller throws a decoding error), never a trap.
    static func parse(_ bytes: ArraySlice<UInt8>) -> Date? {
        if bytes.elementsEqual("infinity".utf8) { return .distantFuture }
        if bytes.elementsEqual("-infinity".utf8) { return .distantPast }
        var index = bytes.startIndex
        let end = bytes.endIndex
        func number(maxDigits: Int = 9) -> (value: Int, digits: Int)? {
            var value = 0
            var digits = 0
            while index < end, digits < maxDigits, bytes[index] >= 48, bytes[index] <= 57 {
                value = value * 10 + Int(bytes[index] - 48)
                digits += 1
                index += 1
            }
            return digits == 0 ? nil : (value, digits)
        }
        func expect(_ c: Character) -> Bool {
            guard index < end, bytes[index] == c.asciiValue! else { return false }
            index += 1
            return true
        }
        guard var year = number()?.value, expect("-"), let month = number(maxDigits: 2)?.value, expect("-"),
            let day = number(maxDigits: 2)?.value
        else { return nil }
        var micros: Int64 = 0
        var offsetSeconds = 0
        if index < end, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "T"),
            index + 1 < end, bytes[index + 1] >= 48, bytes[index + 1] <= 57
        {
            index += 1
            guard let hour = number(maxDigits: 2)?.value, expect(":"), let minute = number(maxDigits: 2)?.value,
                expect(":"), let second = number(maxDigits: 2)?.value
            else { return nil }
            micros = Int64(hour * 3600 + minute * 60 + second) * 1_000_000
            if expect(".") {
                guard let (fraction, digits) = number(maxDigits: 6) else { return nil }
                var scaled = fraction
                for _ in digits..<6 { scaled *= 10 }
                micros += Int64(scaled)
                while index < end, bytes[index] >= 48, bytes[index] <= 57 { index += 1 }
            }
            if index < end, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
                index += 1
                guard let oh = number(maxDigits: 2)?.value else { return nil }
                var offset = oh * 3600
                if expect(":") {
                    guard let om = number(maxDigits: 2)?.value else { return nil }
                    offset += om * 60
                    if expect(":") {
                        guard let os = number(maxDigits: 2)?.value else { return nil }
                        offset += os
                    }
                }
                offsetSeconds = sign * offset
            }
        }
        if index < end {
            let rest = bytes[index...]
            if rest.elementsEqual(" BC".utf8) {
                year = 1 - year
                index = end
            } else {
                return nil
            }
        }
        let dayNumber = Int64(days(year: year, month: month, day: day))
        // In microseconds while they fit in an Int64 (one division: the nearest Double to the exact time).
        let (dayMicros, dayOverflow) = dayNumber.multipliedReportingOverflow(by: 86_400_000_000)
        if !dayOverflow {
            let (total, overflow) = dayMicros.addingReportingOverflow(micros - Int64(offsetSeconds) * 1_000_000)
            if !overflow { return Date(timeIntervalSince1970: Double(total) / 1_000_000) }
        }
        // Beyond ±292,000 years from 1970 (PostgreSQL's `date` reaches 5874897 AD): whole seconds, then the
        // fraction (a Double that far out holds no microseconds anyway).
        let (daySeconds, secondsOverflow) = dayNumber.multipliedReportingOverflow(by: 86_400)
        let (total, overflow) = daySeconds.addingReportingOverflow(micros / 1_000_000 - Int64(offsetSeconds))
        guard !secondsOverflow, !overflow else { return nil }
        return Date(timeIntervalSince1970: Double(total) + Double(micros % 1_000_000) / 1_000_000)
    }
}
