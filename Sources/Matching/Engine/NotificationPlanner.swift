import Chronology
import Foundation

/// An unnotified match as it stands when a unit of work decides notifications.
public struct WaitingMatch: Sendable, Hashable {
    public let filterId: Int64
    public let profileId: Int64
    /// nil when the profile row no longer exists.
    public let profileStatus: Int16?
    public let profileLastLoginAt: Timestamp?
    /// Whether the filter's owner and the profile have blocked each other, either way, by now.
    public let blockedEitherWay: Bool

    public init(filterId: Int64, profileId: Int64, profileStatus: Int16?, profileLastLoginAt: Timestamp?,
                blockedEitherWay: Bool) {
        self.filterId = filterId
        self.profileId = profileId
        self.profileStatus = profileStatus
        self.profileLastLoginAt = profileLastLoginAt
        self.blockedEitherWay = blockedEitherWay
    }
}

/// A notification to write, and the matches it marks notified.
public struct PlannedNotification: Sendable, Hashable {
    public let filterId: Int64
    public let recipientId: Int64
    /// Every match the digest counts, in digest order; all are marked notified.
    public let countedProfileIds: [Int64]
    /// The first `NotificationPlanner.digestSize` of them.
    public let shownProfileIds: [Int64]

    public var matchCount: Int { countedProfileIds.count }
}

/// The notification rule of runs.md, in one place:
///
/// - a filter with `notify` on, not deleted, whose owner is active, and that has unnotified matches,
///   gets one notification when at least `notify_every` has passed since its last one (or it has none);
/// - it counts and shows only matches still eligible at the run's clock: the profile exists and is
///   active, is not the owner, and neither has blocked the other. Others stay unnotified and out of
///   the digest; with none left, no notification is written;
/// - `match_count` is the number counted; `profile_ids` the first ten in the cap's order (latest
///   `last_login_at`, then smallest id); the counted matches are marked notified.
public struct NotificationPlanner: Sendable {
    public static let digestSize = 10

    public init() {}

    public func plan(filters: [NotificationCandidateFilter], waiting: [WaitingMatch],
                     lastNotifiedAt: [Int64: Timestamp], clock: EvaluationClock) -> [PlannedNotification] {
        var waitingByFilter: [Int64: [WaitingMatch]] = [:]
        for match in waiting { waitingByFilter[match.filterId, default: []].append(match) }
        var planned: [PlannedNotification] = []
        for candidate in filters {
            let filter = candidate.filter
            guard filter.notify, !filter.isDeleted, candidate.owner.isActive,
                  let matches = waitingByFilter[filter.id], !matches.isEmpty
            else { continue }
            if let last = lastNotifiedAt[filter.id],
               filter.notifyEvery.added(to: last, in: clock.timeZone) > clock.now {
                continue
            }
            let eligible = matches.filter { match in
                match.profileStatus == Profile.Status.active && match.profileId != filter.ownerId
                    && !match.blockedEitherWay
            }
            guard !eligible.isEmpty else { continue }
            let ordered = eligible.sorted { a, b in
                let la = a.profileLastLoginAt ?? Timestamp(microsecondsSinceEpoch: .min)
                let lb = b.profileLastLoginAt ?? Timestamp(microsecondsSinceEpoch: .min)
                return la != lb ? la > lb : a.profileId < b.profileId
            }.map(\.profileId)
            planned.append(PlannedNotification(
                filterId: filter.id, recipientId: filter.ownerId, countedProfileIds: ordered,
                shownProfileIds: Array(ordered.prefix(Self.digestSize))))
        }
        return planned
    }
}

extension NotifyInterval {
    /// `instant + self` the way PostgreSQL adds an interval to a timestamptz: months first on the
    /// calendar of `timeZone` (the day clamped to the month's end), then days, then the time part.
    public func added(to instant: Timestamp, in timeZone: TimeZone) -> Timestamp {
        if months == 0 && days == 0 {
            return instant.adding(microseconds: microseconds)
        }
        let offset = Int64(timeZone.secondsFromGMT(for: instant.date)) * 1_000_000
        let local = instant.microsecondsSinceEpoch + offset
        let perDay = Timestamp.microsecondsPerDay
        var dayNumber = local / perDay
        var timeOfDay = local % perDay
        if timeOfDay < 0 { timeOfDay += perDay; dayNumber -= 1 }
        var date = CalendarDate(daysSinceEpoch: Int32(dayNumber))
        if months != 0 {
            let c = date.components
            let totalMonths = c.year * 12 + (c.month - 1) + Int(months)
            let year = totalMonths >= 0 ? totalMonths / 12 : (totalMonths - 11) / 12
            let month = totalMonths - year * 12 + 1
            let day = min(c.day, CalendarDate.daysIn(month: month, year: year))
            date = CalendarDate(year: year, month: month, day: day) ?? date
        }
        date = date.adding(days: Int(days))
        let shiftedLocal = Int64(date.daysSinceEpoch) * perDay + timeOfDay
        return Timestamp(microsecondsSinceEpoch: shiftedLocal - offset + microseconds)
    }
}
