import Foundation

/// Text-format date/time conversion with microsecond precision, without `Calendar` (fast and locale-free).
enum PostgresDateCoding {
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

    /// `YYYY-MM-DD HH:MM:SS.ffffff+00`, with ` BC` for years before 1.
    static func format(_ date: Date) -> String {
        if date == .distantFuture { return "infinity" }
        if date == .distantPast { return "-infinity" }
        let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        let perDay: Int64 = 86_400_000_000
        var dayNumber = micros / perDay
        var rest = micros % perDay
        if rest < 0 {
            rest += perDay
            dayNumber -= 1
        }
        let (year, month, day) = civil(days: Int(dayNumber))
        let seconds = Int(rest / 1_000_000)
        let fraction = Int(rest % 1_000_000)
        var out = ""
        out.reserveCapacity(34)
        pad(year <= 0 ? 1 - year : year, 4, into: &out)
        out += "-"
        pad(month, 2, into: &out)
        out += "-"
        pad(day, 2, into: &out)
        out += " "
        pad(seconds / 3600, 2, into: &out)
        out += ":"
        pad(seconds / 60 % 60, 2, into: &out)
        out += ":"
        pad(seconds % 60, 2, into: &out)
        out += "."
        pad(fraction, 6, into: &out)
        out += "+00"
        if year <= 0 { out += " BC" }
        return out
    }

    /// Parses `date`, `timestamp` and `timestamptz` output in the ISO DateStyle, with any UTC offset.
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
        let total = dayNumber * 86_400_000_000 + micros - Int64(offsetSeconds) * 1_000_000
        return Date(timeIntervalSince1970: Double(total) / 1_000_000)
    }
}
