import Chronology
import Foundation

/// Held while a run or backfill of a shard works; releasing it (or the process dying) frees the shard.
public protocol RunLock: Sendable {
    func release()
}

/// A run about to start.
public struct NewRun: Sendable, Hashable {
    public let kind: RunKind
    public let shard: Shard
    public let clock: Timestamp
    public let maxPerFilter: Int
    public let writesNotifications: Bool
    public let coverage: Coverage?
    public let upTo: ChangeMark?
    public let upToTakenAt: Timestamp?
    public let timeZone: String
    public let retentionDays: Int
    public let parameters: String
    public let candidates: Int

    public init(
        kind: RunKind, shard: Shard, clock: Timestamp, maxPerFilter: Int, writesNotifications: Bool,
        coverage: Coverage?, upTo: ChangeMark?, upToTakenAt: Timestamp?, timeZone: String,
        retentionDays: Int, parameters: String, candidates: Int
    ) {
        self.kind = kind
        self.shard = shard
        self.clock = clock
        self.maxPerFilter = maxPerFilter
        self.writesNotifications = writesNotifications
        self.coverage = coverage
        self.upTo = upTo
        self.upToTakenAt = upToTakenAt
        self.timeZone = timeZone
        self.retentionDays = retentionDays
        self.parameters = parameters
        self.candidates = candidates
    }
}

/// How a run ended, for the runs table.
public struct RunCompletion: Sendable, Hashable {
    public let phaseSeconds: [RunPhase: Double]
    /// Pairs the run's retention sweep forgot (added to those of earlier attempts).
    public let matchesForgotten: Int
    /// The finishing process's `RunRecord.owner`: a run another process has claimed since is not finished
    /// (`RunTakenOver`).
    public let owner: String?

    public init(phaseSeconds: [RunPhase: Double], matchesForgotten: Int = 0, owner: String? = nil) {
        self.phaseSeconds = phaseSeconds
        self.matchesForgotten = matchesForgotten
        self.owner = owner
    }
}

public protocol RunRepository: Sendable {
    /// Takes the run lock of `kind` for `shard`, or returns nil at once when another process holds it.
    /// A lock whose holder died is free again without anyone cleaning up.
    func tryLock(kind: RunKind, shard: Shard) throws -> (any RunLock)?
    /// The lock a run or backfill of `kind` starts under: `tryLock`'s, unless a `kind` of another shard layout whose
    /// owners overlap `shard` holds its own. Such runs read the same window of changes, and each took the other's
    /// committed pairs for recorded ones and filled its filters past them: up to twice `max-per-filter` new pairs a
    /// filter (review of session 35: four shards and an unsharded run started together wrote 68,555 pairs beyond
    /// one run's). One start decides at a time, service-wide, so that of two started together exactly one goes.
    func tryLockAlone(kind: RunKind, shard: Shard) throws -> RunLockAttempt
    /// The shard's run of `kind` that started and never finished (its process died), if any.
    func interruptedRun(kind: RunKind, shard: Shard) throws -> RunRecord?
    /// Incremental runs of other shard layouts that never finished and whose shards intersect `shard`.
    func interruptedRuns(intersecting shard: Shard) throws -> [RunRecord]
    /// Marks a run that no process will complete `abandoned` (it is never resumed; its commits stay).
    func abandon(runId: Int64) throws
    /// Every layout's coverage: where change capture stands for each owner.
    func coverage() throws -> Coverage
    /// Replaces the coverage in one transaction, under the lock that `finish` takes to record a run's entry:
    /// `body` gets the coverage as it stands and the store's clock, and returns the new coverage. Returns both.
    func updateCoverage(_ body: (Coverage, Timestamp) throws -> Coverage) throws -> (before: Coverage, after: Coverage)
    /// Records a new run, owned by the caller (a new `RunRecord.owner`).
    func start(_ run: NewRun) throws -> RunRecord
    /// Makes the caller the owner of an interrupted run it is about to complete, and returns the run as it then
    /// stands (its cursor after any unit its former owner committed meanwhile: a unit of the former owner either
    /// committed before the claim or, at its cursor's move, finds another owner and rolls back). A failed run is
    /// running again, its error cleared (`matcher status` shows it running, its lock held, while it is completed;
    /// review of session 37: "failed", its shard "failing"). Nil when the run is no longer running or failed.
    func claim(runId: Int64) throws -> RunRecord?
    /// Marks the run succeeded with its phase timings (added to those of earlier attempts); for an incremental
    /// run also records its coverage (`Coverage.recording`: its shard up to its mark), in the same transaction.
    /// Throws `RunTakenOver` when the run has another owner than `completion.owner`.
    func finish(runId: Int64, _ completion: RunCompletion) throws
    /// Marks the run failed, unless another process owns it now or it is no longer running or failed (an
    /// abandoned run stays abandoned); best effort: the process may be unable to reach the store.
    func fail(runId: Int64, owner: String?, error: String) throws
    func run(id: Int64) throws -> RunRecord?
    /// Records what a run read that was odd or unreadable: quarantined rows where operators look
    /// (entries of rows that now read fine are forgotten), and the counts in the run's counters (the larger
    /// of the recorded and the new, see `RunCounters.withReadIssues`).
    func recordReadIssues(_ issues: ReadIssues, runId: Int64) throws
    /// `--retention-days` of the latest run or backfill, if any (`Retention.days`).
    func latestRetentionDays() throws -> Int?
    /// The pairs recorded by every run and backfill, of any shard, whose clock is after `after` and at most
    /// `through`: what a day records service-wide, the measure of a day's expiring pairs (`Retention.sweepBatches`).
    func matchesRecorded(clockAfter after: Timestamp, through: Timestamp) throws -> Int
}

extension RunRepository {
    /// A store with no place for them records nothing.
    public func recordReadIssues(_ issues: ReadIssues, runId: Int64) throws {}
}

extension RunRepository {
    /// Runs `body`, the steps of completing `claimed` (an interrupted run this process claimed) before its pass;
    /// when one fails, the run is recorded failed with the error, as a failure in its pass is
    /// (`MatchingPass.finishing`): the claim made it running, its error cleared, and without this it stayed so,
    /// shown interrupted and without its error (review of session 37). Nil: nothing was claimed.
    func failingClaimed<T>(_ claimed: RunRecord?, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch {
            if let claimed { try? fail(runId: claimed.id, owner: claimed.owner, error: String(describing: error)) }
            throw error
        }
    }

    /// The run lock of `kind` for `shard`, or none for a dry run: a dry run writes nothing and takes no lock,
    /// so it never blocks, delays or fails a real run beside it. Throws `RunLocked` when another holds it.
    ///
    /// A lock of an overlapping layout may be held for a moment only: a run superseding an interrupted run of
    /// another layout takes that run's lock to abandon it, and `runs abandon` and `progress reset` take a shard's
    /// (review of session 35: a sibling shard started then was refused as if a run were running). Such a start
    /// tries again for about a second before it gives up.
    func lock(_ kind: RunKind, _ shard: Shard, dryRun: Bool) throws -> (any RunLock)? {
        guard !dryRun else { return nil }
        var tries = 0
        while true {
            switch try tryLockAlone(kind: kind, shard: shard) {
            case .acquired(let lock): return lock
            case .held: throw RunLocked(kind: kind, shard: shard)
            case .overlapping(let shards):
                tries += 1
                guard tries < overlapTries else { throw RunLocked(kind: kind, shard: shard, overlapping: shards) }
                Thread.sleep(forTimeInterval: 0.25)
            }
        }
    }
}

/// How many times a start whose layout overlaps a held lock tries, 250 ms apart (`RunRepository.lock`).
let overlapTries = 5

/// What `RunRepository.tryLockAlone` found.
public enum RunLockAttempt: Sendable {
    case acquired(any RunLock)
    /// Another process holds this shard's lock.
    case held
    /// Processes of other shard layouts whose owners overlap hold these shards' locks.
    case overlapping([Shard])
}
