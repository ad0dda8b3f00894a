import Chronology
import Foundation

/// The run's clock: the instant recency compares with, and the date (in the run's time zone) that
/// ages are counted on.
public struct EvaluationClock: Sendable, Hashable {
    public let now: Timestamp
    public let timeZone: TimeZone
    /// `now`'s calendar date in `timeZone`.
    public let runDate: CalendarDate

    public init(now: Timestamp, timeZone: TimeZone = .tokyo) {
        self.now = now
        self.timeZone = timeZone
        self.runDate = now.calendarDate(in: timeZone)
    }
}

extension TimeZone {
    /// Asia/Tokyo, the default run time zone. Should the system lack time zone data, UTC+9 (Japan has
    /// kept that offset, without daylight saving, since 1951).
    public static let tokyo: TimeZone =
        TimeZone(identifier: "Asia/Tokyo") ?? TimeZone(secondsFromGMT: 9 * 3600) ?? .gmt
}
