import Foundation

/// An instant, exact to the microsecond (PostgreSQL's `timestamptz` resolution).
///
/// Stored as microseconds since 1970-01-01 00:00:00 UTC so that comparisons and
/// arithmetic never round, unlike `Date`'s floating-point seconds.
public struct Timestamp: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    public let microsecondsSinceEpoch: Int64

    public init(microsecondsSinceEpoch: Int64) {
        self.microsecondsSinceEpoch = microsecondsSinceEpoch
    }

    public init(secondsSinceEpoch: Int64) {
        self.microsecondsSinceEpoch = secondsSinceEpoch * 1_000_000
    }

    public init(_ date: Date) {
        self.microsecondsSinceEpoch = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
    }

    /// The current time of this process's clock.
    public static func now() -> Timestamp { Timestamp(Date()) }

    public var date: Date { Date(timeIntervalSince1970: Double(microsecondsSinceEpoch) / 1_000_000) }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.microsecondsSinceEpoch < rhs.microsecondsSinceEpoch
    }

    public static let microsecondsPerDay: Int64 = 86_400 * 1_000_000

    /// Saturating: a sum beyond the representable range is the earliest or latest instant, never a trap.
    public func adding(microseconds: Int64) -> Timestamp {
        let (sum, overflow) = microsecondsSinceEpoch.addingReportingOverflow(microseconds)
        return Timestamp(microsecondsSinceEpoch: overflow ? (microseconds > 0 ? .max : .min) : sum)
    }

    /// Saturating, as `adding(microseconds:)`.
    public func adding(days: Int) -> Timestamp {
        let (span, overflow) = Int64(clamping: days).multipliedReportingOverflow(by: Timestamp.microsecondsPerDay)
        return adding(microseconds: overflow ? (days > 0 ? .max : .min) : span)
    }

    /// Whole seconds since the epoch, rounded down (total: no negation that could overflow).
    var floorSeconds: Int64 {
        let (quotient, remainder) = microsecondsSinceEpoch.quotientAndRemainder(dividingBy: 1_000_000)
        return remainder < 0 ? quotient - 1 : quotient
    }

    /// The calendar date of this instant in `timeZone`.
    public func calendarDate(in timeZone: TimeZone) -> CalendarDate {
        let seconds = floorSeconds
        let offset = Int64(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(seconds))))
        let local = seconds + offset
        let days = local >= 0 ? local / 86_400 : -((-local + 86_399) / 86_400)
        return CalendarDate(daysSinceEpoch: Int32(clamping: days))
    }

    /// ISO 8601 in UTC with microseconds when there are any: `2026-03-01T03:00:00Z`.
    public var iso8601: String {
        let seconds = floorSeconds
        let remainder = microsecondsSinceEpoch % 1_000_000
        let micros = remainder < 0 ? remainder + 1_000_000 : remainder
        let days = seconds >= 0 ? seconds / 86_400 : -((-seconds + 86_399) / 86_400)
        let secondOfDay = seconds - days * 86_400
        let date = CalendarDate(daysSinceEpoch: Int32(clamping: days))
        let time = String(
            format: "%02d:%02d:%02d", Int(secondOfDay / 3600), Int(secondOfDay / 60 % 60), Int(secondOfDay % 60))
        let fraction = micros == 0 ? "" : String(format: ".%06d", Int(micros))
        return "\(date)T\(time)\(fraction)Z"
    }

    public var description: String { iso8601 }

    /// Parses an instant an operator types for a clock: ISO 8601 with a date, a time and a zone offset
    /// (`2026-03-01T03:00:00Z`, `2026-03-01T12:00:00+09:00`). A time without an offset is refused rather
    /// than read as UTC: in Tokyo `03:00` means 18:00 UTC the day before.
    public init?(instant text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        // A bare date has no time, so no zone; after the time: Z, ±HH, ±HHMM or ±HH:MM.
        guard trimmed.count > 10, trimmed.wholeMatch(of: #/.*\d([Zz]|[+-]\d\d(:?\d\d)?)/#) != nil else { return nil }
        self.init(iso8601: trimmed)
    }

    /// Parses ISO 8601 / RFC 3339 forms an operator types: `2026-03-01T03:00:00Z`,
    /// `2026-03-01T12:00:00+09:00`, `2026-03-01 03:00:00.5+00`, or a bare date (`2026-03-01`, UTC midnight).
    public init?(iso8601 text: String) {
        let s = Array(text.trimmingCharacters(in: .whitespaces).utf8)
        var i = 0
        func digits(_ count: Int) -> Int? {
            guard i + count <= s.count else { return nil }
            var value = 0
            for k in 0..<count {
                let c = s[i + k]
                guard c >= 48, c <= 57 else { return nil }
                value = value * 10 + Int(c - 48)
            }
            i += count
            return value
        }
        func expect(_ c: UInt8) -> Bool {
            guard i < s.count, s[i] == c else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect(UInt8(ascii: "-")), let month = digits(2),
            expect(UInt8(ascii: "-")), let day = digits(2),
            let date = CalendarDate(year: year, month: month, day: day)
        else { return nil }
        var seconds = Int64(date.daysSinceEpoch) * 86_400
        var micros: Int64 = 0
        if i == s.count {
            self.init(microsecondsSinceEpoch: seconds * 1_000_000)
            return
        }
        guard s[i] == UInt8(ascii: "T") || s[i] == UInt8(ascii: " ") || s[i] == UInt8(ascii: "t") else { return nil }
        i += 1
        guard let hour = digits(2), hour < 24, expect(UInt8(ascii: ":")), let minute = digits(2), minute < 60
        else { return nil }
        var second = 0
        if expect(UInt8(ascii: ":")) {
            guard let s2 = digits(2), s2 < 60 else { return nil }
            second = s2
            if expect(UInt8(ascii: ".")) || expect(UInt8(ascii: ",")) {
                var scale: Int64 = 100_000
                var count = 0
                while i < s.count, s[i] >= 48, s[i] <= 57 {
                    if scale > 0 { micros += Int64(s[i] - 48) * scale; scale /= 10 }
                    i += 1
                    count += 1
                }
                guard count > 0 else { return nil }
            }
        }
        seconds += Int64(hour * 3600 + minute * 60 + second)
        // Zone designator: Z, ±HH, ±HHMM, ±HH:MM. None means UTC.
        if i < s.count {
            if s[i] == UInt8(ascii: "Z") || s[i] == UInt8(ascii: "z") {
                i += 1
            } else if s[i] == UInt8(ascii: "+") || s[i] == UInt8(ascii: "-") {
                let sign: Int64 = s[i] == UInt8(ascii: "+") ? 1 : -1
                i += 1
                guard let oh = digits(2), oh <= 18 else { return nil }
                var om = 0
                if i < s.count {
                    _ = expect(UInt8(ascii: ":"))
                    guard let m = digits(2), m < 60 else { return nil }
                    om = m
                }
                seconds -= sign * Int64(oh * 3600 + om * 60)
            } else {
                return nil
            }
        }
        guard i == s.count else { return nil }
        self.init(microsecondsSinceEpoch: seconds * 1_000_000 + micros)
    }
}
