import Chronology
import Foundation

/// Every repository in memory, for use-case tests: the same contracts as the PostgreSQL store, with a
/// version counter standing in for transaction snapshots. Thread-safe; each call is atomic.
public final class InMemoryStore: @unchecked Sendable {
    private let lock = NSLock()
    private var clock: Timestamp
    private var version: Int64 = 0
    private var profileRows: [Int64: Profile] = [:]
    private var profileChangedAt: [Int64: Int64] = [:]   // profile id -> version of its last write
    private var profileUpdatedAt: [Int64: Timestamp] = [:]
    private var filterRows: [Int64: SavedFilter] = [:]
    private var blockRows: Set<Block> = []
    private var matchRows: [MatchPair: FilterMatch] = [:]
    private var notificationRows: [MatchNotification] = []
    private var runRows: [Int64: RunRecord] = [:]
    private var runPhaseSeconds: [Int64: [RunPhase: Double]] = [:]
    private var progress: [Shard: ChangeMark] = [:]
    private var invalidRows: [Int64: InvalidFilter] = [:]
    private var heldLocks: Set<String> = []
    private var nextRunId: Int64 = 1
    private var nextNotificationId: Int64 = 1
    private var commitsUntilFailure: Int?
    private var quarantineRows: [QuarantinedRow] = []

    public init(now: Timestamp) {
        self.clock = now
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    // MARK: Writes the app would make (test setup)

    public func setClock(_ now: Timestamp) { locked { clock = now } }

    /// Inserts or replaces profiles, as one committed transaction.
    public func save(_ profiles: [Profile], updatedAt: Timestamp? = nil) {
        locked {
            version += 1
            for profile in profiles {
                profileRows[profile.id] = profile
                profileChangedAt[profile.id] = version
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

    /// Makes the `count`-th next unit-of-work commit fail (before writing anything), as a crash would.
    public func failCommit(after count: Int) { locked { commitsUntilFailure = count } }

    // MARK: Reads for assertions

    public var allMatches: [FilterMatch] { locked { matchRows.values.sorted { $0.pair < $1.pair } } }
    public var allNotifications: [MatchNotification] { locked { notificationRows } }
    public var allRuns: [RunRecord] { locked { runRows.values.sorted { $0.id < $1.id } } }
}

public struct InMemoryCommitFailure: Error, CustomStringConvertible {
    public var description: String { "injected failure before a unit of work committed" }
}

extension InMemoryStore: ProfileRepository {
    public func changedProfiles(since: ChangeMark?, upTo: ChangeMark?) throws -> ChangedProfiles {
        locked {
            let low = since.flatMap { Int64($0.token) } ?? Int64.min
            let high = upTo.flatMap { Int64($0.token) } ?? version
            let changed = profileRows.values.filter { profile in
                let v = profileChangedAt[profile.id] ?? 0
                return v > low && v <= high
            }
            return ChangedProfiles(profiles: ProfileColumns(changed.sorted { $0.id < $1.id }), mark: ChangeMark(String(high)))
        }
    }

    public func profiles(_ selection: ProfileSelection) throws -> ProfileColumns {
        locked {
            let chosen: [Profile]
            switch selection {
            case .all:
                chosen = Array(profileRows.values)
            case .changed(let from, let to):
                chosen = profileRows.values.filter { p in
                    guard let at = profileUpdatedAt[p.id] else { return false }
                    return at >= from && at < to
                }
            }
            return ProfileColumns(chosen.sorted { $0.id < $1.id })
        }
    }

    public func profile(id: Int64) throws -> Profile? { locked { profileRows[id] } }

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
                guard !f.isDeleted, shard.owns(ownerId: f.ownerId), f.id > (afterId ?? Int64.min) else { return false }
                switch selection {
                case .all: return true
                case .ids(let ids): return ids.contains(f.id)
                case .owners(let owners): return owners.contains(f.ownerId)
                }
            }.sorted { $0.id < $1.id }
        }
    }

    public func filter(id: Int64) throws -> SavedFilter? { locked { filterRows[id] } }

    public func recordValidation(invalid: [InvalidFilter], validIds: [Int64], runId: Int64) throws {
        locked {
            for id in validIds { invalidRows[id] = nil }
            for record in invalid { invalidRows[record.filterId] = record }
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
    public func existingPairs(profileIds: [Int64]?) throws -> Set<MatchPair> {
        locked {
            let wanted = profileIds.map(Set.init)
            return Set(matchRows.keys.filter { wanted?.contains($0.profileId) ?? true })
        }
    }

    public func commit(_ unit: WorkUnit, planner: NotificationPlanner) throws -> WorkUnitOutcome {
        try locked {
            if let remaining = commitsUntilFailure {
                if remaining <= 0 {
                    commitsUntilFailure = nil
                    throw InMemoryCommitFailure()
                }
                commitsUntilFailure = remaining - 1
            }
            guard let run = runRows[unit.runId] else { throw InMemoryStoreError.unknownRun(unit.runId) }
            var inserted = 0
            for result in unit.matches {
                for profileId in result.profileIds {
                    let pair = MatchPair(filterId: result.filterId, profileId: profileId)
                    if matchRows[pair] == nil {
                        matchRows[pair] = FilterMatch(filterId: result.filterId, profileId: profileId,
                                                      matchedAt: unit.clock.now, runId: unit.runId)
                        inserted += 1
                    }
                }
            }
            var written = 0
            if let notify = unit.notify {
                let filterIds = Set(notify.map(\.filter.id))
                let waiting = matchRows.values.filter { filterIds.contains($0.filterId) && $0.notificationId == nil }
                    .map { match -> WaitingMatch in
                        let profile = profileRows[match.profileId]
                        let owner = filterRows[match.filterId]?.ownerId ?? 0
                        let blocked = blockRows.contains(Block(blockerId: owner, blockedId: match.profileId))
                            || blockRows.contains(Block(blockerId: match.profileId, blockedId: owner))
                        return WaitingMatch(filterId: match.filterId, profileId: match.profileId,
                                            profileStatus: profile?.status, profileLastLoginAt: profile?.lastLoginAt,
                                            blockedEitherWay: blocked)
                    }
                var last: [Int64: Timestamp] = [:]
                for n in notificationRows where filterIds.contains(n.filterId) {
                    last[n.filterId] = max(last[n.filterId] ?? n.createdAt, n.createdAt)
                }
                for planned in planner.plan(filters: notify, waiting: waiting, lastNotifiedAt: last, clock: unit.clock) {
                    let id = nextNotificationId
                    nextNotificationId += 1
                    notificationRows.append(MatchNotification(
                        id: id, recipientId: planned.recipientId, filterId: planned.filterId,
                        matchCount: planned.matchCount, profileIds: planned.shownProfileIds,
                        createdAt: unit.clock.now, runId: unit.runId))
                    for profileId in planned.countedProfileIds {
                        let pair = MatchPair(filterId: planned.filterId, profileId: profileId)
                        matchRows[pair] = matchRows[pair]?.notified(by: id)
                    }
                    written += 1
                }
            }
            runRows[run.id] = run.updating(
                resumeAfterFilter: unit.lastFilterId,
                adding: unit.filterCounters + RunCounters(matchesWritten: inserted, notificationsWritten: written))
            return WorkUnitOutcome(matchesWritten: inserted, notificationsWritten: written)
        }
    }

    public func matches(filterId: Int64) throws -> [FilterMatch] {
        locked { matchRows.values.filter { $0.filterId == filterId }.sorted { $0.pair < $1.pair } }
    }

    public func notifications(filterId: Int64) throws -> [MatchNotification] {
        locked { notificationRows.filter { $0.filterId == filterId } }
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
            heldLocks.insert(key)
            return HeldLock { [weak self] in self?.locked { _ = self?.heldLocks.remove(key) } }
        }
    }

    public func interruptedRun(kind: RunKind, shard: Shard) throws -> RunRecord? {
        locked {
            let latest = runRows.values.filter { $0.kind == kind && $0.shard == shard }.max { $0.id < $1.id }
            return latest.flatMap { $0.status == .succeeded ? nil : $0 }
        }
    }

    public func progressMark(shard: Shard) throws -> ChangeMark? { locked { progress[shard] } }

    public func start(_ run: NewRun) throws -> RunRecord {
        locked {
            let record = RunRecord(
                id: nextRunId, kind: run.kind, shard: run.shard, clock: run.clock, maxPerFilter: run.maxPerFilter,
                writesNotifications: run.writesNotifications, status: .running, since: run.since, upTo: run.upTo,
                resumeAfterFilter: nil, parameters: run.parameters, counters: RunCounters(candidates: run.candidates))
            nextRunId += 1
            runRows[record.id] = record
            return record
        }
    }

    public func finish(runId: Int64, _ completion: RunCompletion) throws {
        try locked {
            guard let run = runRows[runId] else { throw InMemoryStoreError.unknownRun(runId) }
            runRows[runId] = run.updating(status: .succeeded)
            runPhaseSeconds[runId, default: [:]].merge(completion.phaseSeconds, uniquingKeysWith: +)
            if run.kind == .run, let mark = run.upTo { progress[run.shard] = mark }
        }
    }

    public func fail(runId: Int64, error: String) throws {
        locked { runRows[runId] = runRows[runId]?.updating(status: .failed) }
    }

    public func run(id: Int64) throws -> RunRecord? { locked { runRows[id] } }

    public func recordReadIssues(_ issues: ReadIssues, runId: Int64) throws {
        locked {
            let readFine = Set(issues.filterIdsRead.map { QuarantineKey(kind: .filter, id: $0) }
                + issues.profileIdsRead.map { QuarantineKey(kind: .profile, id: $0) })
            quarantineRows.removeAll { row in row.rowId.map { readFine.contains(QuarantineKey(kind: row.kind, id: $0)) } ?? false }
            quarantineRows.append(contentsOf: issues.quarantined)
            if let run = runRows[runId] {
                runRows[runId] = RunRecord(
                    id: run.id, kind: run.kind, shard: run.shard, clock: run.clock, maxPerFilter: run.maxPerFilter,
                    writesNotifications: run.writesNotifications, status: run.status, since: run.since,
                    upTo: run.upTo, resumeAfterFilter: run.resumeAfterFilter, parameters: run.parameters,
                    counters: run.counters.withReadIssues(issues.counters))
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
    func updating(status: RunStatus? = nil, resumeAfterFilter: Int64? = nil, adding: RunCounters = .zero) -> RunRecord {
        RunRecord(id: id, kind: kind, shard: shard, clock: clock, maxPerFilter: maxPerFilter,
                  writesNotifications: writesNotifications, status: status ?? self.status, since: since, upTo: upTo,
                  resumeAfterFilter: resumeAfterFilter ?? self.resumeAfterFilter, parameters: parameters,
                  counters: counters + adding)
    }
}
