import Chronology
import Foundation
import Testing

@Suite struct CalendarDateTests {
    @Test func roundTripsThroughComponents() throws {
        for days in stride(from: -800_000, through: 800_000, by: 997) {
            let date = CalendarDate(daysSinceEpoch: Int32(days))
            let c = date.components
            let again = try #require(CalendarDate(year: c.year, month: c.month, day: c.day))
            #expect(again == date)
        }
    }

    @Test func knownDates() throws {
        #expect(CalendarDate(year: 1970, month: 1, day: 1)?.daysSinceEpoch == 0)
        #expect(CalendarDate(year: 2000, month: 1, day: 1)?.daysSinceEpoch == 10_957)
        #expect(CalendarDate(year: 1969, month: 12, day: 31)?.daysSinceEpoch == -1)
        #expect(CalendarDate(year: 2023, month: 2, day: 29) == nil)
        #expect(CalendarDate(year: 2024, month: 2, day: 29) != nil)
        #expect(CalendarDate(year: 1900, month: 2, day: 29) == nil)
        #expect(CalendarDate(year: 2000, month: 2, day: 29) != nil)
        #expect(try #require(CalendarDate(year: 1905, month: 3, day: 7)).description == "1905-03-07")
    }

    @Test func fullYearsFollowsPostgresAge() throws {
        let leapBirth = try #require(CalendarDate(year: 2000, month: 2, day: 29))
        let feb28 = try #require(CalendarDate(year: 2023, month: 2, day: 28))
        let mar1 = try #require(CalendarDate(year: 2023, month: 3, day: 1))
        #expect(feb28.fullYears(since: leapBirth) == 22)
        #expect(mar1.fullYears(since: leapBirth) == 23)
        let leapDay = try #require(CalendarDate(year: 2024, month: 2, day: 29))
        #expect(leapDay.fullYears(since: leapBirth) == 24)
        let birth = try #require(CalendarDate(year: 1990, month: 6, day: 15))
        #expect(try #require(CalendarDate(year: 2020, month: 6, day: 14)).fullYears(since: birth) == 29)
        #expect(try #require(CalendarDate(year: 2020, month: 6, day: 15)).fullYears(since: birth) == 30)
    }
}

@Suite struct TimestampTests {
    @Test func parsesOperatorForms() throws {
        let z = try #require(Timestamp(iso8601: "2026-03-01T03:00:00Z"))
        #expect(z.iso8601 == "2026-03-01T03:00:00Z")
        #expect(Timestamp(iso8601: "2026-03-01T12:00:00+09:00") == z)
        #expect(Timestamp(iso8601: "2026-03-01 03:00+00") == z)
        #expect(
            Timestamp(iso8601: "2026-03-01T03:00:00.250000Z")?.microsecondsSinceEpoch == z.microsecondsSinceEpoch
                + 250_000)
        #expect(Timestamp(iso8601: "2026-03-01")?.iso8601 == "2026-03-01T00:00:00Z")
        #expect(Timestamp(iso8601: "yesterday") == nil)
        #expect(Timestamp(iso8601: "2026-02-30T00:00:00Z") == nil)
        #expect(Timestamp(iso8601: "2026-03-01T25:00:00Z") == nil)
    }

    @Test func tokyoDateChangesAtFifteenUTC() throws {
        let tokyo = try #require(TimeZone(identifier: "Asia/Tokyo"))
        let before = try #require(Timestamp(iso8601: "2026-02-28T14:59:59.999999Z"))
        let after = try #require(Timestamp(iso8601: "2026-02-28T15:00:00Z"))
        #expect(before.calendarDate(in: tokyo).description == "2026-02-28")
        #expect(after.calendarDate(in: tokyo).description == "2026-03-01")
        let utc = try #require(TimeZone(identifier: "UTC"))
        #expect(after.calendarDate(in: utc).description == "2026-02-28")
        let preEpoch = try #require(Timestamp(iso8601: "1969-12-31T23:59:59.5Z"))
        #expect(preEpoch.calendarDate(in: utc).description == "1969-12-31")
        #expect(preEpoch.iso8601 == "1969-12-31T23:59:59.500000Z")
    }
}
