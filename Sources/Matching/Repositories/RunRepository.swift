import Chronology

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
    public let since: ChangeMark?
    public let upTo: ChangeMark?
    public let parameters: String
    public let candidates: Int

    public init(kind: RunKind, shard: Shard, clock: Timestamp, maxPerFilter: Int, writesNotifications: Bool,
                since: ChangeMark?, upTo: ChangeMark?, parameters: String, candidates: Int) {
        self.kind = kind
        self.shard = shard
        self.clock = clock
        self.maxPerFilter = maxPerFilter
        self.writesNotifications = writesNotifications
        self.since = since
        self.upTo = upTo
        self.parameters = parameters
        self.candidates = candidates
    }
}

/// How a run ended, for the runs table.
public struct RunCompletion: Sendable, Hashable {
    public let phaseSeconds: [RunPhase: Double]

    public init(phaseSeconds: [RunPhase: Double]) {
        self.phaseSeconds = phaseSeconds
    }
}

public protocol RunRepository: Sendable {
    /// Takes the run lock of `kind` for `shard`, or returns nil at once when another process holds it.
    /// A lock whose holder died is free again without anyone cleaning up.
    func tryLock(kind: RunKind, shard: Shard) throws -> (any RunLock)?
    /// The shard's run of `kind` that started and never finished (its process died), if any.
    func interruptedRun(kind: RunKind, shard: Shard) throws -> RunRecord?
    /// The mark of the shard's last successful run; nil before its first.
    func progressMark(shard: Shard) throws -> ChangeMark?
    func start(_ run: NewRun) throws -> RunRecord
    /// Marks the run succeeded with its phase timings (added to those of earlier attempts); for an incremental run also moves the shard's progress
    /// to the run's mark, in the same transaction.
    func finish(runId: Int64, _ completion: RunCompletion) throws
    /// Marks the run failed (best effort: the process may be unable to reach the store).
    func fail(runId: Int64, error: String) throws
    func run(id: Int64) throws -> RunRecord?
    /// Records what a run read that was odd or unreadable: quarantined rows where operators look
    /// (entries of rows that now read fine are forgotten), and the counts in the run's counters (the larger
    /// of the recorded and the new, see `RunCounters.withReadIssues`).
    func recordReadIssues(_ issues: ReadIssues, runId: Int64) throws
}

extension RunRepository {
    /// A store with no place for them records nothing.
    public func recordReadIssues(_ issues: ReadIssues, runId: Int64) throws {}
}
