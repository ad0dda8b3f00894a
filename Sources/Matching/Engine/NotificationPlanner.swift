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

    /// Whether `filter` may get a digest at `clock`, its last one having been at `lastNotifiedAt` (nil: never).
    public func isDue(_ filter: SavedFilter, lastNotifiedAt: Timestamp?, clock: EvaluationClock) -> Bool {
        guard let last = lastNotifiedAt else { return true }
        return filter.notifyEvery.added(to: last, in: clock.timeZone) <= clock.now
    }

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
            guard isDue(filter, lastNotifiedAt: lastNotifiedAt[filter.id], clock: clock) else { continue }
            let eligible = matches.filter { match in
                match.profileStatus == Profile.Status.active && match.profileId != filter.ownerId
                    && !match.blockedEitherWay
            }
            guard !eligible.isEmpty else { continue }
            let ordered = eligible.sorted { a, b in
                // NULL and infinite count as missing: the oldest, as in the cap's order.
                let la = a.profileLastLoginAt.flatMap { $0.isMissingOrInfinite ? nil : $0 } ?? .missing
                let lb = b.profileLastLoginAt.flatMap { $0.isMissingOrInfinite ? nil : $0 } ?? .missing
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
    ///
    /// Total for every interval the column can hold (any size, any sign): the arithmetic is done in
    /// 128 bits and a result beyond the calendar (years -4713...294276, as PostgreSQL's) saturates to
    /// the latest or earliest instant, so a huge `notify_every` means "not due again" and a negative one
    /// "due at once"; it never traps.
    public func added(to instant: Timestamp, in timeZone: TimeZone) -> Timestamp {
        if months == 0 && days == 0 {
            return instant.adding(microseconds: microseconds)
        }
        let offset = Int128(timeZone.secondsFromGMT(for: instant.date)) * 1_000_000
        let local = Int128(instant.microsecondsSinceEpoch) + offset
        let perDay = Int128(Timestamp.microsecondsPerDay)
        var dayNumber = local / perDay
        var timeOfDay = local % perDay
        if timeOfDay < 0 { timeOfDay += perDay; dayNumber -= 1 }
        if months != 0 {
            let c = CalendarDate(daysSinceEpoch: Int32(clamping: dayNumber)).components
            let totalMonths = Int64(c.year) * 12 + Int64(c.month - 1) + Int64(months)
            let year = totalMonths >= 0 ? totalMonths / 12 : (totalMonths - 11) / 12
            let month = Int(totalMonths - year * 12 + 1)
            guard let narrowYear = Int(exactly: year), (-4713...294_276).contains(narrowYear),
                  let shifted = CalendarDate(
                    year: narrowYear, month: month,
                    day: min(c.day, CalendarDate.daysIn(month: month, year: narrowYear)))
            else {
                return Timestamp(microsecondsSinceEpoch: months > 0 ? .max : .min)
            }
            dayNumber = Int128(shifted.daysSinceEpoch)
        }
        dayNumber += Int128(days)
        let shifted = dayNumber * perDay + timeOfDay - offset + Int128(microseconds)
        return Timestamp(microsecondsSinceEpoch: Int64(clamping: shifted))
    }
}
