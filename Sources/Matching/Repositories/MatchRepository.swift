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
    /// The writing process's `RunRecord.owner`: the unit commits only while the run is still its.
    public let runOwner: String?
    public let clock: EvaluationClock
    /// The last filter id this unit covers; a resumed run continues after it.
    public let lastFilterId: Int64
    public let matches: [FilterResult]
    /// nil when the run writes no notifications (a backfill without --notify).
    public let notify: [NotificationCandidateFilter]?
    /// Filters evaluated, invalid and on a lapsed plan in this unit, added to the run's counters with it.
    public let filterCounters: RunCounters
    /// `last_login_at` as the run read it, of every profile in `matches` at least (orders digests): the run's
    /// whole map of its candidates, shared by its units, not a copy per unit.
    public let lastLoginAt: [Int64: Timestamp]
    /// The matches are recorded silent (a backfill without `--notify`): never in any digest.
    public let silent: Bool
    /// The waiting matches that still satisfy their filter's current conditions at the run's clock (runs.md:
    /// "a digest shows what the filter means at the run's clock"); nil: every eligible waiting match counts.
    /// The unit's new matches always qualify. Eligibility (status, blocks) is checked again at commit.
    public let qualifyingWaiting: Set<MatchPair>?
    /// The waiting matches the run read and found no longer qualifying. With `qualifyingWaiting`, what the run
    /// evaluated: a waiting match in neither was listed after the run's read (by another writer), and no digest
    /// decision of this unit passes it over (`UnitCommitter.passedOver`).
    public let unqualifiedWaiting: Set<MatchPair>
    /// The pairs found mutual by the run (runs.md "Mutual matches"), new or waiting.
    public let mutual: Set<MatchPair>
    /// The snapshot the run read its candidates in (every profile in `matches` was active then), when the
    /// store can tell which profiles changed since; nil: commit-time checks read every profile.
    public let readAt: ChangeMark?
    /// The run considers every profile for every filter (the service's first run, a backfill): its pairs are
    /// recorded in bulk, which a store may keep track of for retention by clock and filter rather than pair by
    /// pair (`UnitTransaction.insertMatches`).
    public let bulk: Bool
    /// The run's clock minus its retention: a pair recorded before it, and not waiting for a digest, is
    /// forgotten at the clock (nil: none is).
    public let forgottenBefore: Timestamp?
    /// The instant before which a listed match passed over by a digest then is no longer read by digests
    /// (`Retention.comebackCutoff`; nil: no such limit).
    public let passedOverBefore: Timestamp?
    /// The run's new pairs that its probe found recorded but forgotten at the clock (`RecordedPairs.expired`):
    /// the unit forgets those rows before recording the pairs again. The run's whole set, shared by its units.
    public let expired: Set<MatchPair>

    public init(
        runId: Int64, clock: EvaluationClock, lastFilterId: Int64, matches: [FilterResult],
        notify: [NotificationCandidateFilter]?, filterCounters: RunCounters,
        lastLoginAt: [Int64: Timestamp] = [:], silent: Bool = false,
        qualifyingWaiting: Set<MatchPair>? = nil, unqualifiedWaiting: Set<MatchPair> = [],
        mutual: Set<MatchPair> = [], readAt: ChangeMark? = nil, bulk: Bool = false,
        forgottenBefore: Timestamp? = nil, passedOverBefore: Timestamp? = nil, expired: Set<MatchPair> = [],
        runOwner: String? = nil
    ) {
        self.runOwner = runOwner
        self.forgottenBefore = forgottenBefore
        self.passedOverBefore = passedOverBefore
        self.expired = expired
        self.unqualifiedWaiting = unqualifiedWaiting
        self.bulk = bulk
        self.readAt = readAt
        self.qualifyingWaiting = qualifyingWaiting
        self.mutual = mutual
        self.runId = runId
        self.clock = clock
        self.lastFilterId = lastFilterId
        self.matches = matches
        self.notify = notify
        self.filterCounters = filterCounters
        self.lastLoginAt = lastLoginAt
        self.silent = silent
    }

    /// Whether the run evaluated waiting match `pair` (every one, when it gave no findings).
    func evaluated(_ pair: MatchPair) -> Bool {
        guard let qualifying = qualifyingWaiting else { return true }
        return qualifying.contains(pair) || unqualifiedWaiting.contains(pair)
    }

    /// The unit's new pairs, in filter then cap order.
    public var pairs: [MatchPair] {
        matches.flatMap { result in result.profileIds.map { MatchPair(filterId: result.filterId, profileId: $0) } }
    }

    /// The new matches of `filters` as the notification rule sees them: just evaluated, with the profile's
    /// status and blocks as they stand now (`facts`, read under the unit's lock), so that a profile hidden
    /// or blocked since the run read it is never shown.
    public func newMatchesAsWaiting(of filters: [NotificationCandidateFilter], facts: ProfileFacts) -> [WaitingMatch] {
        let owners = Dictionary(filters.map { ($0.filter.id, $0.filter.ownerId) }, uniquingKeysWith: { a, _ in a })
        return matches.flatMap { result -> [WaitingMatch] in
            guard let owner = owners[result.filterId] else { return [] }
            let blocked = facts.blocks.counterparts(of: owner)  // once per filter, not per pair
            return result.profileIds.map { id in
                WaitingMatch(
                    filterId: result.filterId, profileId: id, profileStatus: facts.status(of: id),
                    profileLastLoginAt: lastLoginAt[id], blockedEitherWay: blocked.sortedContains(id), isNew: true)
            }
        }
    }
}

/// Profiles' eligibility facts as they stand in a unit's transaction: status and blocks.
public struct ProfileFacts: Sendable {
    /// The statuses read (nil: the profile has no row).
    public let statuses: [Int64: Int16?]
    /// The status of every profile asked about that `statuses` does not list: active when the store read only
    /// those that changed since the run's snapshot (every candidate was active in it); nil, no row, when it
    /// read every one.
    public let unlistedStatus: Int16?
    /// Every block with a side among the owners asked about.
    public let blocks: BlockSet

    public init(statuses: [Int64: Int16?], unlistedStatus: Int16? = nil, blocks: BlockSet) {
        self.statuses = statuses
        self.unlistedStatus = unlistedStatus
        self.blocks = blocks
    }

    /// The status of a profile asked about (nil: no row).
    public func status(of profileId: Int64) -> Int16? {
        guard !statuses.isEmpty, let listed = statuses[profileId] else { return unlistedStatus }
        return listed
    }
}

/// The waiting matches of some filters, with their profiles' current columns (one row per profile).
public struct WaitingProfiles: Sendable {
    public let pairs: [MatchPair]
    public let profiles: ProfileColumns

    public init(pairs: [MatchPair], profiles: ProfileColumns) {
        self.pairs = pairs
        self.profiles = profiles
    }
}

public struct WorkUnitOutcome: Sendable, Hashable {
    public let matchesWritten: Int
    public let notificationsWritten: Int
    /// New matches recorded as mutual.
    public let mutualWritten: Int
    /// Digests due that nothing qualified for any more.
    public let digestsHeldBack: Int

    public init(matchesWritten: Int, notificationsWritten: Int, mutualWritten: Int = 0, digestsHeldBack: Int = 0) {
        self.matchesWritten = matchesWritten
        self.notificationsWritten = notificationsWritten
        self.mutualWritten = mutualWritten
        self.digestsHeldBack = digestsHeldBack
    }
}

/// A match row to insert.
public struct NewMatch: Sendable, Hashable {
    public let pair: MatchPair
    /// The digest that counts it, when it is notified as it is recorded.
    public let notificationId: Int64?
    /// Recorded by a backfill without `--notify`: never counted or shown in a digest.
    public let silent: Bool
    /// Found mutual by the run (runs.md "Mutual matches").
    public let mutual: Bool
    /// Listed as waiting for its filter's digest: the row is marked notified later, in place, which a store
    /// may prepare for where it lays the row out (`UnitTransaction.insertMatches`).
    public let waits: Bool

    public init(
        pair: MatchPair, notificationId: Int64? = nil, silent: Bool = false, mutual: Bool = false, waits: Bool = false
    ) {
        self.pair = pair
        self.notificationId = notificationId
        self.silent = silent
        self.mutual = mutual
        self.waits = waits
    }
}

/// The primitives of one unit-of-work transaction. `UnitCommitter` holds the algorithm; a store supplies
/// only these, so production and the in-memory twin commit units the same way.
public protocol UnitTransaction {
    /// Marks this transaction as unit `key`'s until it ends, so that a later unit's `awaitUnit(key)` waits for it
    /// where the store's deadlock detection sees the wait (`UnitWriter`). Nothing to do for a store without one.
    func holdUnit(_ key: Int64) throws
    /// Waits, for at most twice the store's deadlock-check delay (at least two seconds), while unit `key`'s
    /// transaction is open (`holdUnit`), as a wait the
    /// store's deadlock detection sees: units wait for their turn to commit inside open transactions, and a
    /// circle through another writer's row locks and a turn was invisible, broken only by a lock timeout a
    /// minute later (session 29). Returns at once when no transaction holds `key`; throws a write conflict when
    /// the store finds this transaction in a deadlock.
    func awaitUnit(_ key: Int64) throws
    /// Among `filterIds`, those with waiting matches (recorded, not notified, not silent), leaving out the
    /// passed-over entries no longer read at the clock (`PassedOverCutoffs`, swept or not: `waitingMatches`).
    func filtersWithWaitingMatches(_ filterIds: [Int64], forgetting: PassedOverCutoffs) throws -> Set<Int64>
    /// The filters' last notification times, read without a lock (a hint: `lockNotificationStates` decides).
    func notificationStates(_ filterIds: [Int64]) throws -> [Int64: Timestamp]
    /// Locks the filters' notification state in id order, so that no other writer decides their digests
    /// until this transaction ends; returns their last notification times.
    func lockNotificationStates(_ filterIds: [Int64]) throws -> [Int64: Timestamp]
    /// The filters' waiting matches with the facts eligibility needs, as they stand now, leaving out the
    /// passed-over entries no longer read at the clock (`PassedOverCutoffs`). The retention sweep deletes those;
    /// whether it has yet, in this run or another shard's, must not change a digest.
    func waitingMatches(
        _ filters: [NotificationCandidateFilter], forgetting: PassedOverCutoffs
    ) throws
        -> [WaitingMatch]
    /// Forgets `pairs` (recorded, and found by the run's probe past the retention: `RecordedPairs.expired`) as the
    /// retention sweep would: each row still recorded before `cutoff` and not waiting for a digest goes, with its
    /// waiting-list entry, so that the unit can record the pair again. A row recorded again meanwhile, or kept
    /// by a digest it still waits for, stays (and the insert then meets it as any recorded pair).
    func forgetExpired(_ pairs: [MatchPair], before cutoff: Timestamp) throws
    /// The status of `profileIds` (sorted, each once) and the blocks involving `ownerIds` (the owners of the
    /// filters they matched: a block between an owner and a profile has the owner on one side), as they stand
    /// now. With `readAt`, a snapshot in which every one of the profiles was active (a run's read, where they
    /// matched), a store that records matching changes may read the status only of those changed since
    /// (updated, or their row deleted) and report the others active: the same answer, without a probe per
    /// profile.
    func profileFacts(_ profileIds: [Int64], ownerIds: [Int64], readAt: ChangeMark?) throws -> ProfileFacts
    /// Marks a point `rollbackToSavepoint` returns to (one at a time).
    func savepoint() throws
    func rollbackToSavepoint() throws
    /// Inserts every row in one go and returns how many; nil when some pair was recorded already (then the
    /// caller must roll back to its savepoint: what this call wrote is undefined). `bulk` (`WorkUnit.bulk`):
    /// the store may track these pairs' retention by clock and filter instead of one by one (PostgreSQL lists
    /// them in `matcher_bulk_matches` rather than the retention index); which pairs are forgotten, and when,
    /// is the same either way. The rows come in no particular order; a store may lay them out as it sees fit
    /// (PostgreSQL spreads those that wait among the others, so that their later marks stay on their pages).
    func insertMatches(_ rows: [NewMatch], at time: Timestamp, runId: Int64, bulk: Bool) throws -> Int?
    /// Inserts the rows whose pairs are not recorded yet; returns those it inserted.
    func insertMatchesSkippingRecorded(
        _ rows: [NewMatch], at time: Timestamp, runId: Int64, bulk: Bool
    ) throws -> [MatchPair]
    /// Lists recorded, unnotified, non-silent matches as waiting for a digest.
    func addWaiting(_ pairs: [MatchPair], at time: Timestamp) throws
    /// Notes that these filters (sorted, each once) recorded matches at `time` that are not listed as waiting,
    /// because their `notify` was off: the first run that finds one notifying lists them
    /// (`MatchRepository.listUnlistedMatches`). An earlier time noted stays.
    func markUnlisted(_ filterIds: [Int64], at time: Timestamp) throws
    /// Writes the digests; returns their ids in `planned` order.
    func writeNotifications(_ planned: [PlannedNotification], at time: Timestamp, runId: Int64) throws -> [Int64]
    /// Marks recorded matches notified by the given digests (and no longer waiting), with their latest
    /// mutual finding (`mutual` holds the pairs found mutual; others are set not mutual).
    func markNotified(_ marks: [MatchPair: Int64], mutual: Set<MatchPair>) throws
    /// Remembers when these filters were last notified.
    func recordNotified(_ filterIds: [Int64], at time: Timestamp) throws
    /// Marks listed matches that a digest decision read and did not count (a digest written without them, or
    /// held back because none still qualified): they no longer wait for a digest, though they stay listed and a
    /// later digest counts any that qualify again (`UnitCommitter.passedOver`) until `Retention.comebackDays`
    /// after each entry's `comebackFrom` (`Retention.comebackStart`: the deciding unit's clock, or the filter's
    /// next digest if that is later). Stored as the entry's `passed_over_at`.
    func markPassedOver(_ entries: [(pair: MatchPair, comebackFrom: Timestamp)]) throws
    /// Whether notifications are paused service-wide (`ServiceStateRepository`), as this transaction sees it.
    func notificationsPaused() throws -> Bool
    /// Moves run `runId`'s cursor past `lastFilterId` and adds to its counters; throws `RunTakenOver` when the run
    /// has another owner than `owner` or is no longer running or failed (abandoned, finished), so that the unit
    /// rolls back.
    func advanceRun(
        _ runId: Int64, owner: String?, pastFilter lastFilterId: Int64, adding counters: RunCounters)
        throws
}

/// What the retention sweep did.
public struct RetentionOutcome: Sendable, Hashable {
    /// Pairs forgotten now.
    public let forgotten: Int
    /// Whether expired pairs remain (the sweep stopped at its bound; the next run continues).
    public let backlog: Bool
    /// Sent notifications older than the retention, forgotten once no expired pair is left.
    public let notificationsForgotten: Int
    /// Bookkeeping rows forgotten: finished runs past the retention, rows of filters and profiles that no
    /// longer exist, and waiting-list entries of matches a digest passed over, past `Retention.comebackDays`.
    public let bookkeepingForgotten: Int
    /// Batches the database rolled back for a conflict with another writer (a concurrent run's or backfill's
    /// unit): each was tried again, or the sweep stopped at it.
    public let conflictsRolledBack: Int
    /// Why the sweep stopped early with a backlog: a batch kept conflicting with another writer (the
    /// database's reason), its first listing included. The run does not fail for it; the next runs forget the
    /// rest.
    public let stoppedByConflict: String?

    /// The stop request (SIGTERM, SIGINT) that ended the sweep early, leaving the rest for the next runs.
    public let stoppedByRequest: String?

    /// Why the sweep could not start (no connection for it: the database's or the role's connection slots
    /// full). The run's units are committed by then, and the run does not fail for it; the next runs forget.
    public let notStartedBecause: String?

    /// The filters and matches the sweep listed first: matches recorded while a filter's notify was off, the
    /// filter notifying now (`MatchRepository.forgetExpired`).
    public let listedFilters: Int
    public let listedMatches: Int

    public init(
        forgotten: Int, backlog: Bool, notificationsForgotten: Int = 0, bookkeepingForgotten: Int = 0,
        conflictsRolledBack: Int = 0, stoppedByConflict: String? = nil, stoppedByRequest: String? = nil,
        notStartedBecause: String? = nil, listed: (filters: Int, matches: Int) = (0, 0)
    ) {
        self.listedFilters = listed.filters
        self.listedMatches = listed.matches
        self.notStartedBecause = notStartedBecause
        self.stoppedByRequest = stoppedByRequest
        self.forgotten = forgotten
        self.backlog = backlog
        self.notificationsForgotten = notificationsForgotten
        self.bookkeepingForgotten = bookkeepingForgotten
        self.conflictsRolledBack = conflictsRolledBack
        self.stoppedByConflict = stoppedByConflict
    }
}

/// What a probe of recorded pairs found (`MatchRepository.recordedPairs`).
public struct RecordedPairs: Sendable, Equatable {
    /// Recorded, and kept at the run's clock: not new.
    public let kept: Set<MatchPair>
    /// Recorded before the retention's cutoff and not waiting for a digest: forgotten at the run's clock,
    /// whether or not a retention sweep (this run's, or another shard's that ran first) has deleted the row
    /// yet, so new again (runs.md: "a forgotten pair may match again").
    public let expired: Set<MatchPair>

    public init(kept: Set<MatchPair>, expired: Set<MatchPair> = []) {
        self.kept = kept
        self.expired = expired
    }

    /// Several probes' findings as one, each set built once (not copied again for every part merged).
    public static func merging(_ parts: some Sequence<RecordedPairs>) -> RecordedPairs {
        var kept = Set<MatchPair>()
        var expired = Set<MatchPair>()
        for part in parts {
            kept.formUnion(part.kept)
            expired.formUnion(part.expired)
        }
        return RecordedPairs(kept: kept, expired: expired)
    }
}

/// What `MatchRepository.listUnlistedMatches` did: the noted filters it listed and their matches now waiting, and
/// the matches it left for later (`deferred`: a sweep in progress; their notes stay).
public struct UnlistedListing: Sendable, Equatable {
    public let filters: Int
    public let matches: Int
    /// The matches a listing would have listed (unnotified, non-silent, recorded since their filter's note), not
    /// listed now. They still wait for a digest: the pass must not take those past the retention for expired
    /// (`ExpiredKeptLookup`).
    public let deferred: Set<MatchPair>

    public init(filters: Int, matches: Int, deferred: Set<MatchPair> = []) {
        self.filters = filters
        self.matches = matches
        self.deferred = deferred
    }

    public static let none = UnlistedListing(filters: 0, matches: 0)
}

/// A lookup that counts `waiting` as kept when it finds them expired: a pass whose listing of matches recorded
/// while notify was off was deferred (`UnlistedListing.deferred`) neither records them again as new (a backfill
/// without --notify: as silent, never in a digest; review of session 37) nor forgets them before recording.
/// Only those: a notified pair of the same filter past the retention is forgotten and may match again (the
/// review of the change: keeping every expired pair of the filter lost that re-match).
public struct ExpiredKeptLookup: RecordedPairLookup {
    let waiting: Set<MatchPair>
    let base: any RecordedPairLookup

    public init(waiting: Set<MatchPair>, base: any RecordedPairLookup) {
        self.waiting = waiting
        self.base = base
    }

    public func recordedPairs(among pairs: [MatchPair], forgottenBefore: Timestamp?) throws -> RecordedPairs {
        let found = try base.recordedPairs(among: pairs, forgottenBefore: forgottenBefore)
        let waiting = found.expired.intersection(self.waiting)
        guard !waiting.isEmpty else { return found }
        return RecordedPairs(kept: found.kept.union(waiting), expired: found.expired.subtracting(waiting))
    }
}

/// What the selection of new pairs asks of a store (`NewPairSelection`): which chosen pairs are recorded.
public protocol RecordedPairLookup: Sendable {
    /// Among `pairs`, those already recorded, as kept or expired at `forgottenBefore` (the run's clock minus its
    /// retention; nil: every recorded pair is kept). Costs what `pairs` costs, whatever the history holds.
    func recordedPairs(among pairs: [MatchPair], forgottenBefore: Timestamp?) throws -> RecordedPairs
}

public protocol MatchRepository: RecordedPairLookup {
    /// The waiting matches (recorded, unnotified, not silent) of `filterIds`, with the current columns of
    /// their profiles (a profile without a row is absent), leaving out the entries forgotten at the clock as
    /// `UnitTransaction.waitingMatches` does. Costs what the waiting matches cost.
    func waitingProfiles(filterIds: [Int64], forgetting: PassedOverCutoffs) throws -> WaitingProfiles
    /// When each of `filterIds` last had a digest, as recorded (a filter without a recorded time is absent),
    /// read without a lock. A unit reads the time again under its lock, and it can only have moved later, so
    /// a filter not due by this reading is not due in any unit of the run.
    func lastNotified(filterIds: [Int64]) throws -> [Int64: Timestamp]
    /// Runs `body` in one transaction and commits it when `body` returns (rolls back when it throws).
    func withUnitTransaction<T>(_ body: (any UnitTransaction) throws -> T) throws -> T
    /// Runs `body` with the stores units of work may be written on at the same time: this one, and as many more
    /// of its own connections as it was made with (`PostgresMatchingStore(writeConnections:)`), closed when
    /// `body` returns. `UnitWriter` keeps their commits in filter-id order. When fewer could be opened than
    /// the store was made with, the units are written by fewer, and `shortfall` says so before `body` runs.
    func withUnitWriters<T>(
        shortfall: (UnitWriterShortfall) -> Void, _ body: ([any MatchRepository]) throws -> T
    ) throws -> T
    /// Forgets pairs recorded before `cutoff` (runs.md retention), except matches waiting for a digest, in
    /// bounded batches, after listing as waiting the matches that every filter notifying now (by the app's table:
    /// not deleted, notify on) recorded while its notify was off (as `listUnlistedMatches` does, for every
    /// shard's filters: the sweep is service-wide; when that cannot be done, nothing is forgotten, with a backlog,
    /// `RetentionOutcome.stoppedByConflict`); once none is left, also sent notifications created before it (and,
    /// in PostgreSQL, the bookkeeping rows of `RetentionSQL.forgetBookkeeping`). Returns nil when another process
    /// is sweeping. When `stop` is requested (SIGTERM), it ends after the batches in progress and leaves the rest
    /// for the next runs (`RetentionOutcome.stoppedByRequest`).
    func forgetExpired(
        before cutoff: Timestamp, passedOverBefore: Timestamp?, batchSize: Int, maxBatches: Int, stop: StopRequest
    ) throws -> RetentionOutcome?
    /// Of `filterIds` (filters with `notify` on), those noted as having recorded matches while `notify` was off
    /// (`UnitTransaction.markUnlisted`): lists as waiting for a digest their unnotified, non-silent matches
    /// recorded since the note, unless listed already, and clears the notes, together. Returns how many filters
    /// and matches, and the noted filters it left for a later pass (`UnlistedListing.deferred`). runs.md: a filter
    /// with notify on and unnotified matches gets a digest when due, those recorded while notify was off included,
    /// and forgetting never drops a match that waits for its digest: a match still recorded is listed even when it
    /// is past the retention now (no run forgot it while notify was off; review of session 37).
    func listUnlistedMatches(ofNotifying filterIds: [Int64]) throws -> UnlistedListing
    func matches(filterId: Int64) throws -> [FilterMatch]
    func notifications(filterId: Int64) throws -> [MatchNotification]
}

extension MatchRepository {
    /// `forgetExpired` that no one stops.
    public func forgetExpired(
        before cutoff: Timestamp, passedOverBefore: Timestamp? = nil, batchSize: Int, maxBatches: Int
    ) throws -> RetentionOutcome? {
        try forgetExpired(
            before: cutoff, passedOverBefore: passedOverBefore, batchSize: batchSize, maxBatches: maxBatches,
            stop: StopRequest())
    }

    /// One writer, this store: units are written one after another.
    public func withUnitWriters<T>(
        shortfall: (UnitWriterShortfall) -> Void, _ body: ([any MatchRepository]) throws -> T
    ) throws -> T { try body([self]) }

    /// Commits a unit of work atomically (`UnitCommitter`).
    public func commit(_ unit: WorkUnit, planner: NotificationPlanner) throws -> WorkUnitOutcome {
        try UnitCommitter(planner: planner).commit(unit, to: self)
    }
}

/// Fewer writers than a store was made with (`--write-connections`): the server refused the others (at
/// `max_connections`, say). The run goes on with those it has; the operator learns why from the log.
public struct UnitWriterShortfall: Sendable, Equatable {
    public let opened: Int
    public let configured: Int
    /// The first refusal, as the server or libpq gave it.
    public let reason: String

    public init(opened: Int, configured: Int, reason: String) {
        self.opened = opened
        self.configured = configured
        self.reason = reason
    }
}

/// When a listed match that a digest passed over stops being read, at a run's clock (runs.md: it is shown later
/// only if it qualifies again): once its pair is past the retention (recorded before `recordedBefore`: the pair
/// is forgotten), or once its comeback started (`passed_over_at`, `Retention.comebackStart`) before
/// `passedOverBefore` (`Retention.comebackDays`). Applied at
/// the clock whether or not the sweep has removed the entry yet, so that layouts agree row for row. Nil fields:
/// no such limit.
public struct PassedOverCutoffs: Sendable, Hashable {
    public let recordedBefore: Timestamp?
    public let passedOverBefore: Timestamp?

    public init(recordedBefore: Timestamp?, passedOverBefore: Timestamp?) {
        self.recordedBefore = recordedBefore
        self.passedOverBefore = passedOverBefore
    }

    /// Whether an entry passed over (at `passedOverAt`) and recorded at `recordedAt` is no longer read.
    public func forgets(recordedAt: Timestamp, passedOverAt: Timestamp?) -> Bool {
        if let recordedBefore, recordedAt < recordedBefore { return true }
        if let passedOverBefore, (passedOverAt ?? recordedAt) < passedOverBefore { return true }
        return false
    }
}

extension WorkUnit {
    /// The unit's rule for passed-over entries.
    public var passedOverCutoffs: PassedOverCutoffs {
        PassedOverCutoffs(recordedBefore: forgottenBefore, passedOverBefore: passedOverBefore)
    }
}
