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
    /// Found by the unit that is deciding: it satisfies the filter as it is now by definition, so the
    /// planner does not ask `qualifies` about it.
    public let isNew: Bool
    /// A digest decision passed it over already (`UnitTransaction.markPassedOver`): still listed, and counted
    /// again if it qualifies, but not marked twice.
    public let passedOver: Bool

    public init(
        filterId: Int64, profileId: Int64, profileStatus: Int16?, profileLastLoginAt: Timestamp?,
        blockedEitherWay: Bool, isNew: Bool = false, passedOver: Bool = false
    ) {
        self.passedOver = passedOver
        self.filterId = filterId
        self.profileId = profileId
        self.profileStatus = profileStatus
        self.profileLastLoginAt = profileLastLoginAt
        self.blockedEitherWay = blockedEitherWay
        self.isNew = isNew
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
    /// How many of the counted matches are mutual (runs.md "Mutual matches").
    public let mutualCount: Int

    public init(
        filterId: Int64, recipientId: Int64, countedProfileIds: [Int64], shownProfileIds: [Int64],
        mutualCount: Int = 0
    ) {
        self.filterId = filterId
        self.recipientId = recipientId
        self.countedProfileIds = countedProfileIds
        self.shownProfileIds = shownProfileIds
        self.mutualCount = mutualCount
    }

    public var matchCount: Int { countedProfileIds.count }
}

/// What the notification rule decided for a unit's filters.
public struct NotificationDecision: Sendable, Hashable {
    public let planned: [PlannedNotification]
    /// Filters due, with waiting matches, none of which qualifies any more: no digest (held back).
    public let heldBack: [Int64]
}

/// The notification rule of runs.md, in one place:
///
/// - a filter with `notify` on, not deleted, whose owner is active, and that has unnotified matches,
///   gets one notification when it is due (`isDue`: at least `notify_every` less a tenth of it, at most
///   one hour, has passed since its last one, or it has none);
/// - it counts and shows only matches still candidates at the run's clock: the profile exists and is
///   active, is not the owner, and neither has blocked the other (the facts as read under the unit's
///   lock), and, when the run says which waiting matches still satisfy the filter's current conditions
///   (`qualifies`), only those. Others stay unnotified and out of the digest; with none left, no
///   notification is written (the digest is held back);
/// - `match_count` is the number counted; `profile_ids` the first ten in the cap's order (latest
///   `last_login_at`, then smallest id); the counted matches are marked notified.
public struct NotificationPlanner: Sendable {
    public static let digestSize = 10

    public init() {}

    /// The due rule of runs.md: no digest yet, or at least `notify_every` less a tenth of it (at most one
    /// hour) has passed since the last one, `notify_every` added on the calendar of the run's time zone.
    public static func isDue(_ filter: SavedFilter, lastNotifiedAt last: Timestamp?, clock: EvaluationClock) -> Bool {
        guard let last else { return true }
        let next = filter.notifyEvery.added(to: last, in: clock.timeZone)
        return next.adding(microseconds: -filter.notifyEvery.dueTolerance) <= clock.now
    }

    public func plan(
        filters: [NotificationCandidateFilter], waiting: [WaitingMatch],
        lastNotifiedAt: [Int64: Timestamp], clock: EvaluationClock
    ) -> [PlannedNotification] {
        decide(filters: filters, waiting: waiting, lastNotifiedAt: lastNotifiedAt, clock: clock).planned
    }

    /// The rule, with the run's findings: `qualifies` tells which waiting matches still satisfy their filter's
    /// current conditions (by default every one; a match found by the deciding unit, `isNew`, always does);
    /// `mutual` holds the pairs found mutual.
    public func decide(
        filters: [NotificationCandidateFilter], waiting: [WaitingMatch],
        lastNotifiedAt: [Int64: Timestamp], clock: EvaluationClock,
        qualifies: (MatchPair) -> Bool = { _ in true },
        mutual: Set<MatchPair> = []
    ) -> NotificationDecision {
        let waitingByFilter = Self.byFilter(waiting)
        var planned: [PlannedNotification] = []
        var heldBack: [Int64] = []
        for candidate in filters {
            let filter = candidate.filter
            guard filter.notify, !filter.isDeleted, PairEligibility.isActive(candidate.owner.status),
                let matches = waitingByFilter[filter.id], !matches.isEmpty
            else { continue }
            guard Self.isDue(filter, lastNotifiedAt: lastNotifiedAt[filter.id], clock: clock) else { continue }
            let eligible = matches.filter { match in
                PairEligibility.isActive(match.profileStatus)
                    && !PairEligibility.excludes(
                        profileId: match.profileId, ownerId: filter.ownerId, blockedEitherWay: match.blockedEitherWay)
                    && (match.isNew || qualifies(MatchPair(filterId: filter.id, profileId: match.profileId)))
            }
            guard !eligible.isEmpty else {
                heldBack.append(filter.id)
                continue
            }
            let ordered = eligible.sorted { a, b in
                // NULL and infinite count as missing: the oldest, as in the cap's order.
                let la = a.profileLastLoginAt.flatMap { $0.isMissingOrInfinite ? nil : $0 } ?? .missing
                let lb = b.profileLastLoginAt.flatMap { $0.isMissingOrInfinite ? nil : $0 } ?? .missing
                return CapOrder.precedes(
                    login: la.microsecondsSinceEpoch, id: a.profileId, login: lb.microsecondsSinceEpoch, id: b.profileId
                )
            }.map(\.profileId)
            let mutualCount =
                mutual.isEmpty
                ? 0
                : ordered.count { mutual.contains(MatchPair(filterId: filter.id, profileId: $0)) }
            planned.append(
                PlannedNotification(
                    filterId: filter.id, recipientId: filter.ownerId, countedProfileIds: ordered,
                    shownProfileIds: Array(ordered.prefix(Self.digestSize)), mutualCount: mutualCount))
        }
        return NotificationDecision(planned: planned, heldBack: heldBack)
    }

    /// `matches` by filter, in their order, hashed once per run of one filter's matches: a unit's waiting
    /// and new matches come grouped by filter (a first run's unit has about a hundred thousand).
    static func byFilter(_ matches: [WaitingMatch]) -> [Int64: [WaitingMatch]] {
        var groups: [Int64: [WaitingMatch]] = [:]
        var start = matches.startIndex
        while start < matches.endIndex {
            let filterId = matches[start].filterId
            var end = start + 1
            while end < matches.endIndex, matches[end].filterId == filterId { end += 1 }
            groups[filterId, default: []].append(contentsOf: matches[start..<end])
            start = end
        }
        return groups
    }
}

extension NotifyInterval {
    /// The tolerance of the due rule (runs.md): a tenth of the interval, at most one hour; none for an
    /// interval that is not positive. The interval's length counts a month as 30 days and a day as 24 hours,
    /// as PostgreSQL compares and divides intervals.
    public var dueTolerance: Int64 {
        let length =
            Int128(months) * 30 * Int128(Timestamp.microsecondsPerDay)
            + Int128(days) * Int128(Timestamp.microsecondsPerDay) + Int128(microseconds)
        guard length > 0 else { return 0 }
        return Int64(min(length / 10, 3_600_000_000))
    }

    /// `instant + self` exactly as PostgreSQL's `timestamptz + interval` with `TimeZone` set to `timeZone`:
    /// the months move the local date (the day clamped to the month's end) keeping the local time of day,
    /// and the local time is converted back with the zone's offset at that new local time; then the days,
    /// the same way; then the time part is added as absolute time. A local time that does not exist (the
    /// clocks spring forward) or exists twice (they fall back) is read as PostgreSQL reads it: with the
    /// smaller of the two offsets around the transition, that is the later instant (02:30 on a
    /// spring-forward night in Berlin is 03:30 summer time; on the autumn night, 02:30 winter time).
    ///
    /// Total for every interval the column can hold (any size, any sign): the arithmetic is done in
    /// 128 bits and a result beyond the calendar (years -4713...294276, as PostgreSQL's) saturates to
    /// the latest or earliest instant, so a huge `notify_every` means "not due again" and a negative one
    /// "due at once"; it never traps.
    public func added(to instant: Timestamp, in timeZone: TimeZone) -> Timestamp {
        var current = Int128(instant.microsecondsSinceEpoch)
        let perDay = Int128(Timestamp.microsecondsPerDay)
        if months != 0 {
            let (dayNumber, timeOfDay) = Self.local(current, in: timeZone)
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
            current = Self.instant(localMicroseconds: Int128(shifted.daysSinceEpoch) * perDay + timeOfDay, in: timeZone)
        }
        if days != 0 {
            let (dayNumber, timeOfDay) = Self.local(current, in: timeZone)
            let shifted = dayNumber + Int128(days)
            // Beyond PostgreSQL's calendar: saturate (the zone lookup below would be meaningless).
            guard shifted > -2_450_000, shifted < 106_800_000 else {
                return Timestamp(microsecondsSinceEpoch: days > 0 ? .max : .min)
            }
            current = Self.instant(localMicroseconds: shifted * perDay + timeOfDay, in: timeZone)
        }
        return Timestamp(microsecondsSinceEpoch: Int64(clamping: current + Int128(microseconds)))
    }

    /// The local day number and time of day (µs) of an instant in `timeZone`.
    private static func local(_ instant: Int128, in timeZone: TimeZone) -> (day: Int128, timeOfDay: Int128) {
        let perDay = Int128(Timestamp.microsecondsPerDay)
        let local = instant + Int128(offset(atMicroseconds: instant, in: timeZone)) * 1_000_000
        var day = local / perDay
        var timeOfDay = local % perDay
        if timeOfDay < 0 { timeOfDay += perDay; day -= 1 }
        return (day, timeOfDay)
    }

    /// The instant of a local time in `timeZone`, resolved as PostgreSQL's `DetermineTimeZoneOffset`: the
    /// offsets in force a day before and a day after are the candidates (no zone changes its offset twice
    /// within two days); a candidate is valid when the zone has that offset at the instant it gives. One
    /// valid: that one. Both valid (an ambiguous time) or neither (a skipped time): the smaller offset.
    private static func instant(localMicroseconds local: Int128, in timeZone: TimeZone) -> Int128 {
        let perDay = Int128(Timestamp.microsecondsPerDay)
        let before = offset(atMicroseconds: local - perDay, in: timeZone)
        let after = offset(atMicroseconds: local + perDay, in: timeZone)
        if before == after { return local - Int128(before) * 1_000_000 }
        let beforeValid = offset(atMicroseconds: local - Int128(before) * 1_000_000, in: timeZone) == before
        let afterValid = offset(atMicroseconds: local - Int128(after) * 1_000_000, in: timeZone) == after
        let chosen = beforeValid == afterValid ? min(before, after) : (beforeValid ? before : after)
        return local - Int128(chosen) * 1_000_000
    }

    /// The zone's offset from UTC in seconds at an instant (clamped to a range the zone data covers).
    private static func offset(atMicroseconds instant: Int128, in timeZone: TimeZone) -> Int {
        let seconds = Double(Int64(clamping: instant / 1_000_000))
        let bounded = min(max(seconds, -210_000_000_000), 9_000_000_000_000)
        return timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: bounded))
    }
}
