/// A date without a time or zone (PostgreSQL's `date`), stored as days since 1970-01-01.
public struct CalendarDate: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    public let daysSinceEpoch: Int32

    public init(daysSinceEpoch: Int32) {
        self.daysSinceEpoch = daysSinceEpoch
    }

    /// A valid proleptic Gregorian date, or nil (for example 2023-02-29).
    public init?(year: Int, month: Int, day: Int) {
        guard (1...12).contains(month), day >= 1, day <= CalendarDate.daysIn(month: month, year: year),
            (-4713...294_276).contains(year)
        else { return nil }
        self.daysSinceEpoch = Int32(CalendarDate.daysFromCivil(year: year, month: month, day: day))
    }

    public var year: Int { components.year }
    public var month: Int { components.month }
    public var day: Int { components.day }

    /// Howard Hinnant's civil-from-days algorithm.
    public var components: (year: Int, month: Int, day: Int) {
        let z = Int(daysSinceEpoch) + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? y + 1 : y, m, d)
    }

    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = month > 2 ? month - 3 : month + 9
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    public static func isLeap(_ year: Int) -> Bool {
        (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    }

    public static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Full years from `birth` to `self`, exactly as PostgreSQL's
    /// `date_part('year', age(self, birth))`: a person born on 29 February
    /// turns a year older on 1 March in non-leap years. Negative when `birth` is later.
    public func fullYears(since birth: CalendarDate) -> Int {
        let a = components, b = birth.components
        if self >= birth {
            var years = a.year - b.year
            if (a.month, a.day) < (b.month, b.day) { years -= 1 }
            return years
        } else {
            var years = a.year - b.year
            if (a.month, a.day) > (b.month, b.day) { years += 1 }
            return years
        }
    }

    /// Saturating: a date beyond Int32 days is clamped, never a trap.
    public func adding(days: Int) -> CalendarDate {
        CalendarDate(daysSinceEpoch: Int32(clamping: Int64(daysSinceEpoch) + Int64(clamping: days)))
    }

    public static func < (lhs: CalendarDate, rhs: CalendarDate) -> Bool {
        lhs.daysSinceEpoch < rhs.daysSinceEpoch
    }

    /// `YYYY-MM-DD` (years beyond 9999 or before 0 keep their sign and digits).
    public var description: String {
        let c = components
        let y = c.year >= 0 && c.year <= 9999 ? pad(c.year, 4) : String(c.year)
        return "\(y)-\(pad(c.month, 2))-\(pad(c.day, 2))"
    }

    public init?(iso8601 text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2])
        else { return nil }
        self.init(year: y, month: m, day: d)
    }
}

private func pad(_ value: Int, _ width: Int) -> String {
    let s = String(value)
    return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
}
