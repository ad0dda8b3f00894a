import Chronology
import Foundation

/// Every repository in memory, for use-case tests: the same contracts as the PostgreSQL store, with a
/// version counter standing in for transaction snapshots. Thread-safe; each call is atomic.
public final class InMemoryStore: @unchecked Sendable {
    private let lock = NSLock()
    private var clock: Timestamp
    private var version: Int64 = 0
    private var profileRows: [Int64: Profile] = [:]
    /// Change capture: profile id -> version (and clock) of its last matching change.
    private var profileChangedAt: [Int64: Int64] = [:]
    private var profileChangedTime: [Int64: Timestamp] = [:]
    private var profileUpdatedAt: [Int64: Timestamp] = [:]
    private var filterRows: [Int64: SavedFilter] = [:]
    private var blockRows: Set<Block> = []
    /// What a unit of work writes, copied whole for a transaction and its savepoint.
    private var written = Written()
    private var runPhaseSeconds: [Int64: [RunPhase: Double]] = [:]
    private var coverageEntries = Coverage.none
    private var invalidRows: [Int64: InvalidFilter] = [:]
    private var heldLocks: Set<String> = []
    /// The locks held, by kind and shard, for the overlap of shard layouts (`tryLockAlone`).
    private var heldShards: [(kind: RunKind, shard: Shard)] = []
    private var nextRunId: Int64 = 1
    private var commitsUntilFailure: Int?
    /// Unit transactions still to be given up as a deadlock would be, and how many to let through first.
    private var conflicts: (after: Int, times: Int)?
    /// When the last change mark was taken: the store's clock, kept strictly increasing (marks are ordered by it).
    private var lastMarkTakenAt = Timestamp(microsecondsSinceEpoch: 0)
    /// The service-wide notification pause (`ServiceStateRepository`).
    private var pause: NotificationPause?
    /// When each run started and ended, and its error, as `matcher_runs` keeps them (for the status).
    private var runTimes: [Int64: (started: Timestamp, finished: Timestamp?, error: String?)] = [:]

    struct Written {
        var matchRows: [MatchPair: FilterMatch] = [:]
        var silentPairs: Set<MatchPair> = []
        var waiting: [MatchPair: Timestamp] = [:]
        var notificationRows: [MatchNotification] = []
        var lastNotifiedAt: [Int64: Timestamp] = [:]
        /// Filters that recorded matches while their `notify` was off, from when (`markUnlisted`).
        var unlistedFrom: [Int64: Timestamp] = [:]
        /// Listed matches a digest decision read and did not count (`markPassedOver`), with when their comeback
        /// starts (`Retention.comebackStart`: the deciding unit's clock, or the filter's next digest).
        var passedOverAt: [MatchPair: Timestamp] = [:]
        var runRows: [Int64: RunRecord] = [:]
        var nextNotificationId: Int64 = 1

        /// Forgets a recorded pair: its row, and its entry on the waiting list.
        mutating func forget(_ pair: MatchPair) {
            matchRows[pair] = nil
            silentPairs.remove(pair)
            waiting[pair] = nil
            passedOverAt[pair] = nil
        }

        /// A listed match a digest passed over that is no longer read at the clock (`PassedOverCutoffs`), swept
        /// or not.
        func isForgottenEntry(_ pair: MatchPair, _ cutoffs: PassedOverCutoffs) -> Bool {
            guard let listedAt = waiting[pair], let at = passedOverAt[pair] else { return false }
            return cutoffs.forgets(recordedAt: listedAt, passedOverAt: at)
        }
    }
    private var quarantineRows: [QuarantinedRow] = []

    public init(now: Timestamp) {
        self.clock = now
    }

    /// The store's clock for a new mark, after every earlier one (call with the lock held).
    private func nextMarkTime() -> Timestamp {
        lastMarkTakenAt = max(lastMarkTakenAt.adding(microseconds: 1), clock)
        return lastMarkTakenAt
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    // MARK: Writes the app would make (test setup)

    public func setClock(_ now: Timestamp) { locked { clock = now } }

    /// Inserts or replaces profiles, as one committed transaction. Like the PostgreSQL trigger, an insert or a
    /// change of a column matching reads (status, a non-recency item) is captured; a login alone is not.
    public func save(_ profiles: [Profile], updatedAt: Timestamp? = nil) {
        locked {
            version += 1
            for profile in profiles {
                if let old = profileRows[profile.id], !profile.isMatchingChange(from: old) {
                    // activity only: no change for matching
                } else {
                    profileChangedAt[profile.id] = version
                    profileChangedTime[profile.id] = clock
                }
                profileRows[profile.id] = profile
                profileUpdatedAt[profile.id] = updatedAt ?? clock
            }
        }
    }

    public func save(_ filters: [SavedFilter]) {
        locked { for filter in filters { filterRows[filter.id] = filter } }
    }

    public func block(_ blocker: Int64, _ blocked: Int64) {
        locked { _ = blockRows.insert(Block(blockerId: blocker, blockedId: blocked)) }
    }

    /// The push sender's write: filter `filterId`'s unsent notifications are sent at `time` (`sent_at`).
    public func markNotificationsSent(filterId: Int64, at time: Timestamp) {
        locked {
            written.notificationRows = written.notificationRows.map { n in
                guard n.filterId == filterId, n.sentAt == nil else { return n }
                return MatchNotification(
                    id: n.id, recipientId: n.recipientId, filterId: n.filterId, matchCount: n.matchCount,
                    profileIds: n.profileIds, createdAt: n.createdAt, sentAt: time, runId: n.runId,
                    mutualCount: n.mutualCount)
            }
        }
    }

    /// Lets runs of overlapping shard layouts start beside each other, as binaries before session 35 did (a fleet
    /// mid-upgrade still may): for the tests of what such runs leave behind.
    public func letOverlappingLayoutsRunTogether() { locked { overlappingLayoutsRunTogether = true } }
    private var overlappingLayoutsRunTogether = false

    /// Makes the `count`-th next unit-of-work commit fail (before writing anything), as a crash would.
    public func failCommit(after count: Int) { locked { commitsUntilFailure = count } }

    /// Makes the unit transactions after the next `count` give up `times` times in a row as PostgreSQL gives up
    /// the loser of a deadlock: the transaction's work is done, then rolled back, and the error says that
    /// starting it again may succeed (`InMemoryWriteConflict`).
    public func conflictCommits(after count: Int, times: Int) { locked { conflicts = (count, times) } }

    // MARK: Reads for assertions

    public var allMatches: [FilterMatch] { locked { written.matchRows.values.sorted { $0.pair < $1.pair } } }
    public var allNotifications: [MatchNotification] { locked { written.notificationRows } }
    public var allRuns: [RunRecord] { locked { written.runRows.values.sorted { $0.id < $1.id } } }
    /// Pairs recorded silent (by a backfill without `--notify`).
    public var silentPairs: Set<MatchPair> { locked { written.silentPairs } }
    /// Matches waiting for a digest.
    public var waitingPairs: Set<MatchPair> { locked { Set(written.waiting.keys) } }
}

public struct InMemoryCommitFailure: Error, CustomStringConvertible {
    public var description: String { "injected failure before a unit of work committed" }
}

/// A unit transaction given up as the loser of a deadlock (`InMemoryStore.conflictCommits`).
public struct InMemoryWriteConflict: ClassifiedError, CustomStringConvertible {
    public var failureKind: FailureKind { .other }
    public var isWriteConflict: Bool { true }
    public var description: String { "injected write conflict: deadlock detected" }
}

extension InMemoryStore: ProfileRepository {
    public func changedProfiles(windows: [ChangeMark?], upTo: ChangeMark?) throws -> ChangedProfiles {
        locked {
            let high = upTo.flatMap { Int64($0.token) } ?? version
            var rows: [(Profile, UInt64)] = []
            for profile in profileRows.values {
                let changed = profileChangedAt[profile.id]
                if let changed, changed > high { continue }
                var mask: UInt64 = 0
                for (index, window) in windows.enumerated() {
                    let isNew: Bool
                    switch window.map(ChangeMark.Form.init) {
                    case nil: isNew = true
                    case .snapshot(let token)?: isNew = changed.map { $0 > (Int64(token) ?? .min) } ?? false
                    case .time(let from)?: isNew = profileChangedTime[profile.id].map { $0 >= from } ?? false
                    }
                    if isNew { mask |= 1 << UInt64(index) }
                }
                if mask != 0 { rows.append((profile, mask)) }
            }
            rows.sort { $0.0.id < $1.0.id }
            return ChangedProfiles(
                profiles: ProfileColumns(rows.map(\.0)), windowMasks: rows.map(\.1),
                mark: ChangeMark(String(high)), takenAt: nextMarkTime())
        }
    }

    public func marksAhead(_ marks: [ChangeMark]) throws -> [ChangeMark] {
        locked { marks.filter(isAhead) }
    }

    /// Whether `mark` is a snapshot of changes this store has not made yet (the run's check and the status's).
    /// Under the lock.
    private func isAhead(_ mark: ChangeMark) -> Bool {
        guard case .snapshot(let token) = ChangeMark.Form(mark), let at = Int64(token) else { return false }
        return at > version
    }

    /// The in-memory store's changes are numbered by its own version: none is ever ahead of it.
    public func settleChangesAhead() throws -> Int { 0 }

    public func profiles(_ selection: ProfileSelection) throws -> ProfileColumns {
        locked {
            let chosen: [Profile]
            switch selection {
            case .all:
                chosen = Array(profileRows.values)
            case .changed(let from, let to):
                chosen = profileRows.values.filter { p in
                    // An infinite `updated_at` is in no window, as in PostgreSQL (`isfinite`).
                    guard let at = profileUpdatedAt[p.id], !at.isMissingOrInfinite else { return false }
                    return (from.map { at >= $0 } ?? true) && (to.map { at < $0 } ?? true)
                }
            }
            return ProfileColumns(chosen.sorted { $0.id < $1.id })
        }
    }

    public func profile(id: Int64) throws -> Profile? { locked { profileRows[id] } }

    public func profileColumns(ids: [Int64]) throws -> ProfileColumns {
        locked { ProfileColumns(Set(ids).sorted().compactMap { profileRows[$0] }) }
    }

    public func owners(ids: [Int64]) throws -> [Int64: FilterOwner] {
        locked {
            var owners: [Int64: FilterOwner] = [:]
            for id in ids {
                if let p = profileRows[id] { owners[id] = FilterOwner(id: id, status: p.status, plan: p.plan) }
            }
            return owners
        }
    }

    public func currentTime() throws -> Timestamp { locked { clock } }
}

extension InMemoryStore: FilterRepository {
    public func filters(_ selection: FilterSelection, shard: Shard, afterId: Int64?) throws -> [SavedFilter] {
        locked {
            filterRows.values.filter { f in
                guard !f.isDeleted, shard.owns(ownerId: f.ownerId), afterId.map({ f.id > $0 }) ?? true else {
                    return false
                }
                switch selection {
                case .all: return true
                case .ids(let ids): return ids.contains(f.id)
                case .owners(let owners): return owners.contains(f.ownerId)
                }
            }.sorted { $0.id < $1.id }
        }
    }

    public func filter(id: Int64) throws -> SavedFilter? { locked { filterRows[id] } }

    public func filters(ownedBy ownerIds: [Int64]) throws -> [SavedFilter] {
        let owners = Set(ownerIds)
        return locked {
            filterRows.values.filter { !$0.isDeleted && owners.contains($0.ownerId) }.sorted { $0.id < $1.id }
        }
    }

    @discardableResult
    public func recordValidation(invalid: [InvalidFilter], validIds: [Int64], runId: Int64) throws -> [InvalidFilter] {
        locked {
            for id in validIds { invalidRows[id] = nil }
            for (id, _) in invalidRows where filterRows[id]?.isDeleted == true { invalidRows[id] = nil }
            let new = invalid.filter { invalidRows[$0.filterId]?.error.description != $0.error.description }
            for record in invalid { invalidRows[record.filterId] = record }
            return new
        }
    }

    public func recordedInvalidFilters() throws -> [InvalidFilter] {
        locked { invalidRows.values.sorted { $0.filterId < $1.filterId } }
    }
}

extension InMemoryStore: BlockRepository {
    public func blocks(involving ids: [Int64]?) throws -> BlockSet {
        locked {
            let wanted = ids.map(Set.init)
            let pairs = blockRows.filter { b in
                wanted.map { $0.contains(b.blockerId) || $0.contains(b.blockedId) } ?? true
            }
            return BlockSet(pairs.map { (blocker: $0.blockerId, blocked: $0.blockedId) })
        }
    }
}

extension InMemoryStore: MatchRepository {
    public func recordedPairs(among pairs: [MatchPair], forgottenBefore cutoff: Timestamp?) throws -> RecordedPairs {
        locked {
            var kept = Set<MatchPair>()
            var expired = Set<MatchPair>()
            for pair in pairs {
                guard written.matchRows[pair] != nil else { continue }
                if let cutoff, isExpired(pair, before: cutoff) { expired.insert(pair) } else { kept.insert(pair) }
            }
            return RecordedPairs(kept: kept, expired: expired)
        }
    }

    public func lastNotified(filterIds: [Int64]) throws -> [Int64: Timestamp] {
        let wanted = Set(filterIds)
        return locked { written.lastNotifiedAt.filter { wanted.contains($0.key) } }
    }

    public func waitingProfiles(filterIds: [Int64], forgetting cutoffs: PassedOverCutoffs) throws -> WaitingProfiles {
        let wanted = Set(filterIds)
        return locked {
            let pairs = written.waiting.keys.filter {
                wanted.contains($0.filterId) && !written.isForgottenEntry($0, cutoffs)
            }.sorted()
            let profiles = Set(pairs.map(\.profileId)).sorted().compactMap { profileRows[$0] }
            return WaitingProfiles(pairs: pairs, profiles: ProfileColumns(profiles))
        }
    }

    public func withUnitTransaction<T>(_ body: (any UnitTransaction) throws -> T) throws -> T {
        try locked {
            if let remaining = commitsUntilFailure {
                if remaining <= 0 {
                    commitsUntilFailure = nil
                    throw InMemoryCommitFailure()
                }
                commitsUntilFailure = remaining - 1
            }
            let tx = InMemoryUnitTransaction(
                written: written, profiles: profileRows, filters: filterRows,
                blocks: blockRows, paused: pause != nil)
            let result = try body(tx)
            if let pending = conflicts {
                if pending.after > 0 {
                    conflicts = (pending.after - 1, pending.times)
                } else {
                    conflicts = pending.times > 1 ? (0, pending.times - 1) : nil
                    throw InMemoryWriteConflict()
                }
            }
            written = tx.written
            return result
        }
    }

    /// Whether recorded `pair` is forgotten at `cutoff` (`isExpired(_:before:_:filters:profiles:)`). Called under
    /// the store's lock.
    private func isExpired(_ pair: MatchPair, before cutoff: Timestamp) -> Bool {
        Self.isExpired(pair, before: cutoff, written, filters: filterRows, profiles: profileRows)
    }

    /// Whether recorded `pair` is forgotten at a clock whose cutoff is `cutoff`: recorded before it and not
    /// waiting for a digest (`RetentionSQL.waitsForDigest`). The sweep, the run's probe and a unit's
    /// `forgetExpired` all ask this.
    static func isExpired(
        _ pair: MatchPair, before cutoff: Timestamp, _ written: Written, filters: [Int64: SavedFilter],
        profiles: [Int64: Profile]
    ) -> Bool {
        guard let row = written.matchRows[pair], row.matchedAt < cutoff else { return false }
        return !stillWaits(pair, written, filters: filters, profiles: profiles)
    }

    static func stillWaits(
        _ pair: MatchPair, _ written: Written, filters: [Int64: SavedFilter], profiles: [Int64: Profile]
    ) -> Bool {
        guard written.waiting[pair] != nil, written.passedOverAt[pair] == nil,
            let filter = filters[pair.filterId], !filter.isDeleted, filter.notify,
            let owner = profiles[filter.ownerId], owner.status != Profile.Status.deleted
        else { return false }
        return true
    }

    public func forgetExpired(
        before cutoff: Timestamp, passedOverBefore: Timestamp?, batchSize: Int, maxBatches: Int, stop: StopRequest
    ) throws -> RetentionOutcome? {
        locked {
            // All at once: a stop can only come before it starts, and then nothing is listed either (as in
            // PostgreSQL's sweep).
            if let reason = stop.requestedReason {
                let expired = written.matchRows.values.contains { $0.matchedAt < cutoff }
                return RetentionOutcome(forgotten: 0, backlog: expired, stoppedByRequest: reason)
            }
            // First, as PostgreSQL's sweep: the matches every filter notifying now recorded while notify was off.
            let listed = listUnlisted(Set(filterRows.values.filter { $0.notify && $0.deletedAt == nil }.map(\.id)))
            let limit = max(1, batchSize) * max(1, maxBatches)
            var forgotten = 0
            var backlog = false
            for pair in written.matchRows.keys.sorted() where isExpired(pair, before: cutoff) {
                guard forgotten < limit else {
                    backlog = true
                    break
                }
                written.forget(pair)
                forgotten += 1
            }
            // Then the waiting-list entries of matches a digest passed over, past their comeback
            // (`RetentionSQL.forgetPassedOverEntriesBatch`, whatever the pairs' sweep leaves): their pairs stay
            // recorded.
            var entries = 0
            if let passedOverBefore {
                for (pair, at) in written.passedOverAt where at < passedOverBefore {
                    written.waiting[pair] = nil
                    written.passedOverAt[pair] = nil
                    entries += 1
                }
            }
            if backlog {
                return RetentionOutcome(
                    forgotten: forgotten, backlog: true, bookkeepingForgotten: entries, listed: listed)
            }
            // Then sent notifications older than the cutoff (`RetentionSQL.forgetNotificationsBatch`).
            let before = written.notificationRows.count
            written.notificationRows.removeAll { $0.sentAt != nil && $0.createdAt < cutoff }
            // And the notification state of filters gone or soft-deleted before the cutoff
            // (`RetentionSQL.forgetBookkeeping`; an infinite `deleted_at`, read as `Timestamp.missing`, is long ago).
            func stateGoes(_ id: Int64) -> Bool {
                guard let filter = filterRows[id] else { return true }
                return filter.deletedAt.map { $0 < cutoff } ?? false
            }
            for id in written.lastNotifiedAt.keys where stateGoes(id) { written.lastNotifiedAt[id] = nil }
            for id in written.unlistedFrom.keys where stateGoes(id) { written.unlistedFrom[id] = nil }
            return RetentionOutcome(
                forgotten: forgotten, backlog: false,
                notificationsForgotten: before - written.notificationRows.count, bookkeepingForgotten: entries,
                listed: listed)
        }
    }

    public func listUnlistedMatches(ofNotifying filterIds: [Int64]) throws -> UnlistedListing {
        let listed = locked { listUnlisted(Set(filterIds)) }
        return UnlistedListing(filters: listed.filters, matches: listed.matches)
    }

    /// The listing of `listUnlistedMatches` for `notifying`; called under the store's lock.
    private func listUnlisted(_ notifying: Set<Int64>) -> (filters: Int, matches: Int) {
        let noted = notifying.filter { written.unlistedFrom[$0] != nil }
        guard !noted.isEmpty else { return (0, 0) }
        var listed = 0
        for (pair, row) in written.matchRows where noted.contains(pair.filterId) {
            guard let from = written.unlistedFrom[pair.filterId], row.notificationId == nil,
                !written.silentPairs.contains(pair), row.matchedAt >= from,
                written.waiting[pair] == nil
            else { continue }
            written.waiting[pair] = row.matchedAt
            listed += 1
        }
        for id in noted { written.unlistedFrom[id] = nil }
        return (noted.count, listed)
    }

    public func matches(filterId: Int64) throws -> [FilterMatch] {
        locked {
            written.matchRows.values.filter { $0.filterId == filterId }.sorted { $0.pair < $1.pair }
                .map { $0.with(silent: written.silentPairs.contains($0.pair)) }
        }
    }

    public func notifications(filterId: Int64) throws -> [MatchNotification] {
        locked { written.notificationRows.filter { $0.filterId == filterId } }
    }
}

/// The unit-of-work primitives over a copy of the store's written state, kept only when the body returns.
final class InMemoryUnitTransaction: UnitTransaction {

    var written: InMemoryStore.Written
    private var saved: InMemoryStore.Written?
    private let profiles: [Int64: Profile]
    private let filters: [Int64: SavedFilter]
    private let blocks: Set<Block>
    private let paused: Bool

    init(
        written: InMemoryStore.Written, profiles: [Int64: Profile], filters: [Int64: SavedFilter], blocks: Set<Block>,
        paused: Bool = false
    ) {
        self.written = written
        self.profiles = profiles
        self.filters = filters
        self.blocks = blocks
        self.paused = paused
    }

    func notificationsPaused() throws -> Bool { paused }

    func filtersWithWaitingMatches(_ filterIds: [Int64], forgetting cutoffs: PassedOverCutoffs) throws -> Set<Int64> {
        let wanted = Set(filterIds)
        return Set(
            written.waiting.keys.filter {
                wanted.contains($0.filterId) && !written.isForgottenEntry($0, cutoffs)
            }
            .map(\.filterId))
    }

    func forgetExpired(_ pairs: [MatchPair], before cutoff: Timestamp) throws {
        for pair in pairs
        where InMemoryStore.isExpired(pair, before: cutoff, written, filters: filters, profiles: profiles) {
            written.forget(pair)
        }
    }

    func notificationStates(_ filterIds: [Int64]) throws -> [Int64: Timestamp] {
        written.lastNotifiedAt.filter { filterIds.contains($0.key) }
    }

    func lockNotificationStates(_ filterIds: [Int64]) throws -> [Int64: Timestamp] {
        makeNotificationStates(filterIds)
        return written.lastNotifiedAt.filter { filterIds.contains($0.key) }
    }

    /// The state of each of `filterIds` that has none, from its latest notification, as PostgreSQL makes the
    /// row (`lockNotificationStates`, `markUnlisted`): a filter whose state the sweep forgot (soft-deleted, then
    /// restored) is due by its last digest, not taken for one that never had one.
    private func makeNotificationStates(_ filterIds: [Int64]) {
        let missing = Set(filterIds.filter { written.lastNotifiedAt[$0] == nil })
        guard !missing.isEmpty else { return }
        for row in written.notificationRows where missing.contains(row.filterId) {
            written.lastNotifiedAt[row.filterId] = max(
                written.lastNotifiedAt[row.filterId] ?? row.createdAt, row.createdAt)
        }
    }

    func waitingMatches(
        _ filters: [NotificationCandidateFilter], forgetting cutoffs: PassedOverCutoffs
    ) throws -> [WaitingMatch] {
        let owners = Dictionary(filters.map { ($0.filter.id, $0.filter.ownerId) }, uniquingKeysWith: { a, _ in a })
        return written.waiting.keys.sorted().compactMap { pair in
            guard let owner = owners[pair.filterId], !written.isForgottenEntry(pair, cutoffs) else { return nil }
            let profile = profiles[pair.profileId]
            let blocked =
                blocks.contains(Block(blockerId: owner, blockedId: pair.profileId))
                || blocks.contains(Block(blockerId: pair.profileId, blockedId: owner))
            return WaitingMatch(
                filterId: pair.filterId, profileId: pair.profileId, profileStatus: profile?.status,
                profileLastLoginAt: profile?.lastLoginAt, blockedEitherWay: blocked,
                passedOver: written.passedOverAt[pair] != nil)
        }
    }

    /// Reads every status: the twin has no cost to save, and its answer is the one the shortcut must give.
    func profileFacts(_ profileIds: [Int64], ownerIds: [Int64], readAt: ChangeMark?) throws -> ProfileFacts {
        var statuses: [Int64: Int16?] = [:]
        for id in Set(profileIds) { if let profile = profiles[id] { statuses.updateValue(profile.status, forKey: id) } }
        let owners = Set(ownerIds)
        let involved = blocks.filter { owners.contains($0.blockerId) || owners.contains($0.blockedId) }
        return ProfileFacts(statuses: statuses, blocks: BlockSet(involved.map { ($0.blockerId, $0.blockedId) }))
    }

    func savepoint() throws { saved = written }

    func rollbackToSavepoint() throws {
        if let saved { written = saved }
    }

    /// `bulk` changes nothing here: this store forgets every expired pair by looking at each.
    func insertMatches(_ rows: [NewMatch], at time: Timestamp, runId: Int64, bulk: Bool) throws -> Int? {
        guard rows.allSatisfy({ written.matchRows[$0.pair] == nil }), Set(rows.map(\.pair)).count == rows.count
        else { return nil }
        return try insertMatchesSkippingRecorded(rows, at: time, runId: runId, bulk: bulk).count
    }

    func insertMatchesSkippingRecorded(
        _ rows: [NewMatch], at time: Timestamp, runId: Int64, bulk: Bool
    ) throws -> [MatchPair] {
        var inserted: [MatchPair] = []
        for row in rows.sorted(by: { $0.pair < $1.pair }) where written.matchRows[row.pair] == nil {
            written.matchRows[row.pair] = FilterMatch(
                filterId: row.pair.filterId, profileId: row.pair.profileId,
                matchedAt: time, runId: runId, notificationId: row.notificationId,
                mutual: row.mutual)
            if row.silent { written.silentPairs.insert(row.pair) }
            inserted.append(row.pair)
        }
        return inserted
    }

    func addWaiting(_ pairs: [MatchPair], at time: Timestamp) throws {
        for pair in pairs { written.waiting[pair] = time }
    }

    func markUnlisted(_ filterIds: [Int64], at time: Timestamp) throws {
        makeNotificationStates(filterIds)
        for id in filterIds { written.unlistedFrom[id] = min(written.unlistedFrom[id] ?? time, time) }
    }

    func writeNotifications(_ planned: [PlannedNotification], at time: Timestamp, runId: Int64) throws -> [Int64] {
        planned.map { n in
            let id = written.nextNotificationId
            written.nextNotificationId += 1
            written.notificationRows.append(
                MatchNotification(
                    id: id, recipientId: n.recipientId, filterId: n.filterId, matchCount: n.matchCount,
                    profileIds: n.shownProfileIds, createdAt: time, runId: runId, mutualCount: n.mutualCount))
            return id
        }
    }

    func markNotified(_ marks: [MatchPair: Int64], mutual: Set<MatchPair>) throws {
        for (pair, id) in marks {
            written.matchRows[pair] = written.matchRows[pair]?.notified(by: id, mutual: mutual.contains(pair))
            written.waiting[pair] = nil
            written.passedOverAt[pair] = nil
        }
    }

    func recordNotified(_ filterIds: [Int64], at time: Timestamp) throws {
        for id in filterIds { written.lastNotifiedAt[id] = time }
    }

    /// The in-memory store has no lock waits to see: a unit's turn is the writer's order alone.
    func holdUnit(_ key: Int64) throws {}
    func awaitUnit(_ key: Int64) throws {}

    func markPassedOver(_ entries: [(pair: MatchPair, comebackFrom: Timestamp)]) throws {
        for (pair, from) in entries where written.waiting[pair] != nil && written.passedOverAt[pair] == nil {
            written.passedOverAt[pair] = from
        }
    }

    func advanceRun(
        _ runId: Int64, owner: String?, pastFilter lastFilterId: Int64, adding counters: RunCounters
    )
        throws
    {
        guard let run = written.runRows[runId] else { throw InMemoryStoreError.unknownRun(runId) }
        guard run.isOwned(by: owner) else { throw RunTakenOver(runId: runId) }
        written.runRows[runId] = run.updating(resumeAfterFilter: lastFilterId, adding: counters)
    }
}

public enum InMemoryStoreError: Error {
    case unknownRun(Int64)
}

extension InMemoryStore: RunRepository {
    private final class HeldLock: RunLock, @unchecked Sendable {
        let release_: @Sendable () -> Void
        init(_ release: @escaping @Sendable () -> Void) { release_ = release }
        func release() { release_() }
    }

    public func tryLock(kind: RunKind, shard: Shard) throws -> (any RunLock)? {
        let key = "\(kind.rawValue) \(shard)"
        return locked {
            guard !heldLocks.contains(key) else { return nil }
            return hold(key, kind, shard)
        }
    }

    /// Takes the lock `key` of `kind` for `shard` (the caller holds the store's mutex).
    private func hold(_ key: String, _ kind: RunKind, _ shard: Shard) -> HeldLock {
        heldLocks.insert(key)
        heldShards.append((kind, shard))
        return HeldLock { [weak self] in
            self?.locked {
                _ = self?.heldLocks.remove(key)
                if let index = self?.heldShards.firstIndex(where: { $0.kind == kind && $0.shard == shard }) {
                    self?.heldShards.remove(at: index)
                }
            }
        }
    }

    public func tryLockAlone(kind: RunKind, shard: Shard) throws -> RunLockAttempt {
        let key = "\(kind.rawValue) \(shard)"
        return locked {
            // In PostgreSQL's order (`PostgresMatchingStore.tryLockAlone`): the overlap first, then its own lock.
            let overlapping = heldShards.filter {
                $0.kind == kind && $0.shard != shard && $0.shard.intersects(shard) && !overlappingLayoutsRunTogether
            }
            guard overlapping.isEmpty else {
                return .overlapping(overlapping.map(\.shard).sorted { $0.description < $1.description })
            }
            guard !heldLocks.contains(key) else { return .held }
            return .acquired(hold(key, kind, shard))
        }
    }

    public func interruptedRun(kind: RunKind, shard: Shard) throws -> RunRecord? {
        locked {
            let latest = written.runRows.values.filter { $0.kind == kind && $0.shard == shard }.max { $0.id < $1.id }
            return latest.flatMap { $0.status.isUnfinished ? $0 : nil }
        }
    }

    public func interruptedRuns(intersecting shard: Shard) throws -> [RunRecord] {
        locked {
            let latest = Dictionary(grouping: written.runRows.values.filter { $0.kind == .run }, by: \.shard)
                .compactMap { $0.value.max { $0.id < $1.id } }
            return latest.filter { run in
                run.shard.count != shard.count && run.shard.intersects(shard)
                    && run.status.isUnfinished
            }.sorted { $0.id < $1.id }
        }
    }

    public func abandon(runId: Int64) throws {
        locked {
            guard let run = written.runRows[runId], run.status.isUnfinished else { return }
            written.runRows[runId] = run.updating(status: .abandoned)
            if let times = runTimes[runId] { runTimes[runId] = (times.started, times.finished ?? clock, times.error) }
        }
    }

    public func coverage() throws -> Coverage { locked { coverageEntries } }

    public func updateCoverage(
        _ body: (Coverage, Timestamp) throws -> Coverage
    ) throws -> (before: Coverage, after: Coverage) {
        try locked {
            let before = coverageEntries
            coverageEntries = try body(before, nextMarkTime())
            return (before, coverageEntries)
        }
    }

    /// Sets the coverage as an operator's reset would (tests of time going backwards and resets).
    public func setCoverage(_ coverage: Coverage) { locked { coverageEntries = coverage } }

    public func start(_ run: NewRun) throws -> RunRecord {
        locked {
            let record = RunRecord(
                id: nextRunId, kind: run.kind, shard: run.shard, clock: run.clock, maxPerFilter: run.maxPerFilter,
                writesNotifications: run.writesNotifications, status: .running, coverage: run.coverage, upTo: run.upTo,
                upToTakenAt: run.upToTakenAt, timeZone: run.timeZone, retentionDays: run.retentionDays,
                resumeAfterFilter: nil, parameters: run.parameters, counters: RunCounters(candidates: run.candidates),
                owner: UUID().uuidString.lowercased())
            nextRunId += 1
            written.runRows[record.id] = record
            runTimes[record.id] = (clock, nil, nil)
            return record
        }
    }

    public func claim(runId: Int64) throws -> RunRecord? {
        locked {
            guard let run = written.runRows[runId], run.status.isUnfinished else { return nil }
            let claimed = run.updating(status: .running, owner: UUID().uuidString.lowercased())
            written.runRows[runId] = claimed
            runTimes[runId] = (runTimes[runId]?.started ?? clock, nil, nil)
            return claimed
        }
    }

    public func finish(runId: Int64, _ completion: RunCompletion) throws {
        try locked {
            guard let run = written.runRows[runId] else { throw InMemoryStoreError.unknownRun(runId) }
            guard run.isOwned(by: completion.owner) else { throw RunTakenOver(runId: runId) }
            written.runRows[runId] = run.updating(
                status: .succeeded,
                adding: RunCounters(matchesForgotten: completion.matchesForgotten))
            runPhaseSeconds[runId, default: [:]].merge(completion.phaseSeconds, uniquingKeysWith: +)
            runTimes[runId] = (runTimes[runId]?.started ?? clock, clock, nil)
            if run.kind == .run, let mark = run.upTo, let takenAt = run.upToTakenAt {
                coverageEntries = coverageEntries.recording(
                    CoverageEntry(shard: run.shard, mark: mark, takenAt: takenAt, timeZone: run.timeZone))
            }
        }
    }

    public func fail(runId: Int64, owner: String?, error: String) throws {
        locked {
            guard written.runRows[runId]?.isOwned(by: owner) == true else { return }
            written.runRows[runId] = written.runRows[runId]?.updating(status: .failed)
            runTimes[runId] = (runTimes[runId]?.started ?? clock, clock, error)
        }
    }

    public func run(id: Int64) throws -> RunRecord? { locked { written.runRows[id] } }

    public func latestRetentionDays() throws -> Int? { locked { latestRetentionDaysLocked } }

    /// `--retention-days` of the latest run or backfill that recorded one; called under the lock.
    private var latestRetentionDaysLocked: Int? {
        written.runRows.values.filter { $0.retentionDays != nil }.max { $0.id < $1.id }?.retentionDays
    }

    public func matchesRecorded(clockAfter after: Timestamp, through: Timestamp) throws -> Int {
        locked {
            written.runRows.values.filter { $0.clock > after && $0.clock <= through }
                .reduce(0) { $0 + $1.counters.matchesWritten }
        }
    }

    public func recordReadIssues(_ issues: ReadIssues, runId: Int64) throws {
        locked {
            let readFine = Set(
                issues.filterIdsRead.map { QuarantineKey(kind: .filter, id: $0) }
                    + issues.profileIdsRead.map { QuarantineKey(kind: .profile, id: $0) })
            quarantineRows.removeAll { row in
                row.rowId.map { readFine.contains(QuarantineKey(kind: row.kind, id: $0)) } ?? false
            }
            quarantineRows.append(contentsOf: issues.quarantined)
            if let run = written.runRows[runId] {
                written.runRows[runId] = run.replacing(counters: run.counters.withReadIssues(issues.counters))
            }
        }
    }

    /// The rows quarantined and not read fine since, as `matcher_quarantine` holds them.
    public var quarantinedRows: [QuarantinedRow] { locked { quarantineRows } }
}

private struct QuarantineKey: Hashable {
    let kind: QuarantinedRow.Kind
    let id: Int64
}

extension RunRecord {
    func replacing(counters: RunCounters) -> RunRecord {
        RunRecord(
            id: id, kind: kind, shard: shard, clock: clock, maxPerFilter: maxPerFilter,
            writesNotifications: writesNotifications, status: status, coverage: coverage, upTo: upTo,
            upToTakenAt: upToTakenAt, timeZone: timeZone, retentionDays: retentionDays,
            resumeAfterFilter: resumeAfterFilter, parameters: parameters, counters: counters, owner: owner)
    }

    func updating(
        status: RunStatus? = nil, resumeAfterFilter: Int64? = nil, adding: RunCounters = .zero, owner: String? = nil
    ) -> RunRecord {
        RunRecord(
            id: id, kind: kind, shard: shard, clock: clock, maxPerFilter: maxPerFilter,
            writesNotifications: writesNotifications, status: status ?? self.status, coverage: coverage,
            upTo: upTo, upToTakenAt: upToTakenAt, timeZone: timeZone, retentionDays: retentionDays,
            resumeAfterFilter: resumeAfterFilter ?? self.resumeAfterFilter, parameters: parameters,
            counters: counters + adding, owner: owner ?? self.owner)
    }

    /// Whether `owner` may still write the run (`UnitTransaction.advanceRun`, `RunRepository.finish`).
    func isOwned(by owner: String?) -> Bool {
        self.owner == owner && status.isUnfinished
    }
}

extension InMemoryStore: ServiceStateRepository {
    public func notificationsPaused() throws -> NotificationPause? { locked { pause } }

    @discardableResult
    public func pauseNotifications(by: String, reason: String) throws -> NotificationPause {
        locked {
            let current = NotificationPause(pausedAt: pause?.pausedAt ?? clock, pausedBy: by, reason: reason)
            pause = current
            return current
        }
    }

    @discardableResult
    public func resumeNotifications() throws -> NotificationPause? {
        locked {
            defer { pause = nil }
            return pause
        }
    }
}

extension InMemoryStore {
    /// Status's test for a suspended filter, as `PostgresStatusRepository` makes it, by the keys alone (a filter
    /// no run has validated yet may hold values it would refuse): an object with keys, each of an item that
    /// needs a plan above `plan`.
    static func allKeysNeedAPlan(_ json: String, above plan: Int16) -> Bool {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any], !object.isEmpty
        else { return false }
        let required = Dictionary(MasterItem.all.map { ($0.key, $0.requiredPlan) }) { first, _ in first }
        return object.keys.allSatisfy { key in required[key].map { $0 > max(plan, 0) } ?? false }
    }
}

extension InMemoryStore: StatusRepository {
    public func serviceStatus(retention: Bool, digestsOf digestShard: Shard) throws -> ServiceStatus {
        locked {
            let runs = written.runRows.values.filter { $0.kind == .run }.sorted { $0.id < $1.id }
            func brief(_ run: RunRecord) -> RunBrief {
                let times = runTimes[run.id]
                return RunBrief(
                    id: run.id, kind: run.kind, shard: run.shard, status: run.status, clock: run.clock,
                    startedAt: times?.started, finishedAt: times?.finished, error: times?.error,
                    lockHeld: run.status == .running ? heldLocks.contains("\(run.kind.rawValue) \(run.shard)") : nil)
            }
            let statuses = ShardStatus.statuses(runs: runs.map(brief), coverage: coverageEntries) { isAhead($0.mark) }
            // The retention sweep's rule, for owners who are active, of filters a run prepares (not invalid,
            // quarantined or suspended): their digests can come now.
            let quarantinedFilters = Set(quarantineRows.filter { $0.kind == .filter }.compactMap(\.rowId))
            func sends(_ filterId: Int64) -> Bool {
                guard let filter = filterRows[filterId], let owner = profileRows[filter.ownerId], owner.isActive,
                    invalidRows[filterId] == nil, !quarantinedFilters.contains(filterId)
                else { return false }
                return !Self.allKeysNeedAPlan(filter.conditionsJSON, above: owner.plan)
            }
            // Of `digestShard`'s filters (a filter whose row is gone is no shard's: counted only for `.all`).
            let listed = written.waiting.filter { pair, _ in
                digestShard == .all || filterRows[pair.filterId].map { digestShard.owns(ownerId: $0.ownerId) } == true
            }
            let waiting = listed.filter { pair, _ in
                Self.stillWaits(pair, written, filters: filterRows, profiles: profileRows) && sends(pair.filterId)
            }
            let zone = coverageEntries.entries.lazy.compactMap(\.timeZone).first.flatMap(TimeZone.init(identifier:))
            let dueSince = Dictionary(grouping: waiting, by: \.key.filterId).compactMap { filterId, entries in
                filterRows[filterId].map { filter in
                    WaitingDigests.dueSince(
                        firstWaiting: entries.map(\.value).min() ?? clock,
                        lastNotifiedAt: written.lastNotifiedAt[filterId], every: filter.notifyEvery,
                        timeZone: zone ?? .tokyo)
                }
            }
            let matches = written.matchRows.values
            let unsent = written.notificationRows.filter { $0.sentAt == nil }
            return ServiceStatus(
                now: clock, shards: statuses,
                digests: WaitingDigests(
                    matches: waiting.count, filters: Set(waiting.keys.map(\.filterId)).count,
                    oldestMatchedAt: waiting.values.min(), oldestDueSince: dueSince.min(),
                    notNotifiable: listed.count - waiting.count),
                invalidFilters: invalidRows.keys.filter { filterRows[$0].map { !$0.isDeleted } ?? false }.count,
                quarantinedProfiles: Set(quarantineRows.filter { $0.kind == .profile }.map(\.rowId)).count,
                quarantinedFilters: Set(quarantineRows.filter { $0.kind == .filter }.map(\.rowId)).count,
                retention: RetentionState(
                    rows: matches.count, rowsEstimated: false,
                    oldestMatchedAt: retention ? matches.map(\.matchedAt).min() : nil,
                    oldestForgettableAt: retention
                        ? written.matchRows.filter { pair, _ in
                            !Self.stillWaits(pair, written, filters: filterRows, profiles: profileRows)
                        }.map(\.value.matchedAt).min() : nil,
                    retentionDays: latestRetentionDaysLocked),
                notificationPause: pause,
                unsent: UnsentNotifications(count: unsent.count, oldestCreatedAt: unsent.map(\.createdAt).min()))
        }
    }
}
