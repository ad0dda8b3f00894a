import Chronology

/// One filter's new pairs, in the cap's order (latest `last_login_at`, then smallest id).
public struct FilterResult: Sendable, Hashable {
    public let filterId: Int64
    public let profileIds: [Int64]

    public init(filterId: Int64, profileIds: [Int64]) {
        self.filterId = filterId
        self.profileIds = profileIds
    }
}

/// A filter whose waiting matches a unit of work considers for a notification.
public struct NotificationCandidateFilter: Sendable, Hashable {
    public let filter: SavedFilter
    public let owner: FilterOwner

    public init(filter: SavedFilter, owner: FilterOwner) {
        self.filter = filter
        self.owner = owner
    }
}

/// The writes of one unit of work, committed together or not at all: new matches, the notifications
/// they and earlier waiting matches make due, and the run's progress.
public struct WorkUnit: Sendable {
    public let runId: Int64
    public let clock: EvaluationClock
    /// The last filter id this unit covers; a resumed run continues after it.
    public let lastFilterId: Int64
    public let matches: [FilterResult]
    /// nil when the run writes no notifications (a backfill without --notify).
    public let notify: [NotificationCandidateFilter]?
    /// Filters evaluated, invalid and on a lapsed plan in this unit, added to the run's counters with it.
    public let filterCounters: RunCounters
    /// `last_login_at` of every profile in `matches` as the run read it (orders digests).
    public let lastLoginAt: [Int64: Timestamp]

    public init(runId: Int64, clock: EvaluationClock, lastFilterId: Int64, matches: [FilterResult],
                notify: [NotificationCandidateFilter]?, filterCounters: RunCounters,
                lastLoginAt: [Int64: Timestamp] = [:]) {
        self.runId = runId
        self.clock = clock
        self.lastFilterId = lastFilterId
        self.matches = matches
        self.notify = notify
        self.filterCounters = filterCounters
        self.lastLoginAt = lastLoginAt
    }

    /// The unit's new matches as the notification rule sees them: just evaluated, so eligible.
    public var newMatchesAsWaiting: [WaitingMatch] {
        matches.flatMap { result in
            result.profileIds.map { id in
                WaitingMatch(filterId: result.filterId, profileId: id, profileStatus: Profile.Status.active,
                             profileLastLoginAt: lastLoginAt[id], blockedEitherWay: false)
            }
        }
    }
}

public struct WorkUnitOutcome: Sendable, Hashable {
    public let matchesWritten: Int
    public let notificationsWritten: Int

    public init(matchesWritten: Int, notificationsWritten: Int) {
        self.matchesWritten = matchesWritten
        self.notificationsWritten = notificationsWritten
    }
}

public protocol MatchRepository: Sendable {
    /// Pairs already in `filter_matches` for these profiles (every pair when nil).
    func existingPairs(profileIds: [Int64]?) throws -> Set<MatchPair>
    /// Commits a unit of work atomically: inserts the pairs not present yet (a pair is recorded at most
    /// once, ever, whoever else writes concurrently), lets `planner` decide the notifications from the
    /// unit filters' unnotified matches as they stand under lock, writes them and marks their matches,
    /// and advances run `unit.runId` past `unit.lastFilterId`, adding `unit.filterCounters` and what it wrote
    /// to the run's counters.
    func commit(_ unit: WorkUnit, planner: NotificationPlanner) throws -> WorkUnitOutcome
    func matches(filterId: Int64) throws -> [FilterMatch]
    func notifications(filterId: Int64) throws -> [MatchNotification]
}
