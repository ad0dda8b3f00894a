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
    /// The matches are recorded silent (a backfill without `--notify`): never in any digest.
    public let silent: Bool

    public init(runId: Int64, clock: EvaluationClock, lastFilterId: Int64, matches: [FilterResult],
                notify: [NotificationCandidateFilter]?, filterCounters: RunCounters,
                lastLoginAt: [Int64: Timestamp] = [:], silent: Bool = false) {
        self.runId = runId
        self.clock = clock
        self.lastFilterId = lastFilterId
        self.matches = matches
        self.notify = notify
        self.filterCounters = filterCounters
        self.lastLoginAt = lastLoginAt
        self.silent = silent
    }

    /// The unit's new pairs, in filter then cap order.
    public var pairs: [MatchPair] {
        matches.flatMap { result in result.profileIds.map { MatchPair(filterId: result.filterId, profileId: $0) } }
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

/// A match row to insert.
public struct NewMatch: Sendable, Hashable {
    public let pair: MatchPair
    /// The digest that counts it, when it is notified as it is recorded.
    public let notificationId: Int64?
    /// Recorded by a backfill without `--notify`: never counted or shown in a digest.
    public let silent: Bool

    public init(pair: MatchPair, notificationId: Int64? = nil, silent: Bool = false) {
        self.pair = pair
        self.notificationId = notificationId
        self.silent = silent
    }
}

/// The primitives of one unit-of-work transaction. `UnitCommitter` holds the algorithm; a store supplies
/// only these, so production and the in-memory twin commit units the same way.
public protocol UnitTransaction {
    /// Among `filterIds`, those with waiting matches (recorded, not notified, not silent).
    func filtersWithWaitingMatches(_ filterIds: [Int64]) throws -> Set<Int64>
    /// The filters' last notification times, read without a lock (a hint: `lockNotificationStates` decides).
    func notificationStates(_ filterIds: [Int64]) throws -> [Int64: Timestamp]
    /// Locks the filters' notification state in id order, so that no other writer decides their digests
    /// until this transaction ends; returns their last notification times.
    func lockNotificationStates(_ filterIds: [Int64]) throws -> [Int64: Timestamp]
    /// The filters' waiting matches with the facts eligibility needs, as they stand now.
    func waitingMatches(_ filters: [NotificationCandidateFilter]) throws -> [WaitingMatch]
    /// Marks a point `rollbackToSavepoint` returns to (one at a time).
    func savepoint() throws
    func rollbackToSavepoint() throws
    /// Inserts every row in one go and returns how many; nil when some pair was recorded already (then the
    /// caller must roll back to its savepoint: what this call wrote is undefined).
    func insertMatches(_ rows: [NewMatch], at time: Timestamp, runId: Int64) throws -> Int?
    /// Inserts the rows whose pairs are not recorded yet; returns those it inserted.
    func insertMatchesSkippingRecorded(_ rows: [NewMatch], at time: Timestamp, runId: Int64) throws -> [MatchPair]
    /// Lists recorded, unnotified, non-silent matches as waiting for a digest.
    func addWaiting(_ pairs: [MatchPair], at time: Timestamp) throws
    /// Writes the digests; returns their ids in `planned` order.
    func writeNotifications(_ planned: [PlannedNotification], at time: Timestamp, runId: Int64) throws -> [Int64]
    /// Marks recorded matches notified by the given digests (and no longer waiting).
    func markNotified(_ marks: [MatchPair: Int64]) throws
    /// Remembers when these filters were last notified.
    func recordNotified(_ filterIds: [Int64], at time: Timestamp) throws
    /// Whether notifications are paused service-wide (`ServiceStateRepository`), as this transaction sees it.
    func notificationsPaused() throws -> Bool
    /// Moves run `runId`'s cursor past `lastFilterId` and adds to its counters.
    func advanceRun(_ runId: Int64, pastFilter lastFilterId: Int64, adding counters: RunCounters) throws
}

/// What the retention sweep did.
public struct RetentionOutcome: Sendable, Hashable {
    /// Pairs forgotten now.
    public let forgotten: Int
    /// Whether expired pairs remain (the sweep stopped at its bound; the next run continues).
    public let backlog: Bool

    public init(forgotten: Int, backlog: Bool) {
        self.forgotten = forgotten
        self.backlog = backlog
    }
}

public protocol MatchRepository: Sendable {
    /// Among `pairs`, those already recorded. Costs what `pairs` costs, whatever the history holds.
    func recordedPairs(among pairs: [MatchPair]) throws -> Set<MatchPair>
    /// Runs `body` in one transaction and commits it when `body` returns (rolls back when it throws).
    func withUnitTransaction<T>(_ body: (any UnitTransaction) throws -> T) throws -> T
    /// Forgets pairs recorded before `cutoff` (runs.md retention), except matches waiting for a digest
    /// (`RetentionRule`), in bounded batches. Returns nil when another process is sweeping.
    func forgetExpired(before cutoff: Timestamp, batchSize: Int, maxBatches: Int) throws -> RetentionOutcome?
    func matches(filterId: Int64) throws -> [FilterMatch]
    func notifications(filterId: Int64) throws -> [MatchNotification]
}

extension MatchRepository {
    /// Commits a unit of work atomically (`UnitCommitter`).
    public func commit(_ unit: WorkUnit, planner: NotificationPlanner) throws -> WorkUnitOutcome {
        try UnitCommitter(planner: planner).commit(unit, to: self)
    }
}
