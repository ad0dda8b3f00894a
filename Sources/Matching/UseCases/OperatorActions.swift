import Chronology

/// `matcher runs abandon`: gives up a run that no process will complete (its retries keep failing), so the
/// next run of its shard starts afresh from the shard's progress instead of completing it. Never resumed
/// afterwards; what it committed stays (its matches, its digests). Taken under the shard's run lock, so a
/// run that is working is never abandoned under it.
public struct AbandonRun: Sendable {
    public enum Target: Sendable, Hashable {
        case run(Int64)
        /// The interrupted (running or failed, latest) incremental run of the shard.
        case shard(Shard)
    }

    public struct Outcome: Sendable, Hashable {
        /// The run as it was before (its status says what it was: running or failed).
        public let run: RunRecord
        /// It was abandoned already: nothing changed.
        public let alreadyAbandoned: Bool
    }

    private let runs: any RunRepository

    public init(_ repositories: MatchingRepositories) {
        runs = repositories.runs
    }

    /// nil when the shard has no interrupted run (nothing to do).
    public func execute(_ target: Target) throws -> Outcome? {
        let found: RunRecord?
        switch target {
        case .shard(let shard):
            found = try runs.interruptedRun(kind: .run, shard: shard)
        case .run(let id):
            guard let run = try runs.run(id: id) else {
                throw OperatorRefusal("there is no run #\(id) in matcher_runs")
            }
            found = run
        }
        guard let run = found else { return nil }
        switch run.status {
        case .abandoned:
            return Outcome(run: run, alreadyAbandoned: true)
        case .succeeded:
            throw OperatorRefusal("run #\(run.id) succeeded; only a running or failed run can be abandoned")
        case .running, .failed:
            break
        }
        guard let lock = try runs.tryLock(kind: run.kind, shard: run.shard) else {
            throw RunLocked(kind: run.kind, shard: run.shard)
        }
        defer { lock.release() }
        // Read again under the lock: the run may have been completed meanwhile.
        guard let current = try runs.run(id: run.id), current.status.isUnfinished else {
            throw OperatorRefusal("run #\(run.id) finished while it was being abandoned; nothing changed")
        }
        try runs.abandon(runId: current.id)
        return Outcome(run: current, alreadyAbandoned: false)
    }
}

/// `matcher progress reset --shard K/N --to TIME`: after a restore or a failover, recorded progress can be
/// ahead of the database's transactions (a run refuses with `ProgressAhead`). The reset replaces the
/// coverage of the shard by a mark at TIME (`Coverage.resetting`): the next run takes every profile whose
/// change was recorded at or after TIME as new for the shard's filters (pairs already recorded are never
/// recorded again). Under the shard's run lock, so no run of it is working; its interrupted run, if any, is
/// abandoned (completing it would record its old mark again).
public struct ResetProgress: Sendable {
    public struct Outcome: Sendable, Hashable {
        public let shard: Shard
        public let time: Timestamp
        public let before: Coverage
        public let after: Coverage
        /// The shard's interrupted run that the reset abandoned.
        public let abandonedRunId: Int64?
        /// Recorded changes from another server's transactions (a dump restored into a new cluster), settled
        /// (`ProfileRepository.settleChangesAhead`).
        public let changesSettled: Int
    }

    private let runs: any RunRepository
    private let profiles: any ProfileRepository

    public init(_ repositories: MatchingRepositories) {
        runs = repositories.runs
        profiles = repositories.profiles
    }

    public func execute(shard: Shard, to time: Timestamp) throws -> Outcome {
        // A time after the database's clock (a mistyped year or zone) would hide every change recorded before
        // it: the next run would take none of them, and its mark would count them as seen.
        let now = try profiles.currentTime()
        guard time <= now else {
            throw OperatorRefusal(
                "--to \(time.iso8601) is after the database's clock (\(now.iso8601)): the changes recorded until then "
                    + "would never count as new; check the date and zone (the time `matcher status` shows for the "
                    + "shard's progress is the usual one); nothing was changed")
        }
        guard let lock = try runs.tryLock(kind: .run, shard: shard) else { throw RunLocked(kind: .run, shard: shard) }
        defer { lock.release() }
        var abandoned: Int64?
        if let interrupted = try runs.interruptedRun(kind: .run, shard: shard) {
            try runs.abandon(runId: interrupted.id)
            abandoned = interrupted.id
        }
        let ahead = Set(try profiles.marksAhead(try runs.coverage().relevant(to: shard).entries.map(\.mark)))
        // Before the new progress: a run that starts once the reset is done finds them settled.
        let settled = try profiles.settleChangesAhead()
        let (before, after) = try runs.updateCoverage { coverage, now in
            coverage.resetting(shard, to: time, takenAt: now, ahead: ahead)
        }
        return Outcome(
            shard: shard, time: time, before: before, after: after, abandonedRunId: abandoned,
            changesSettled: settled)
    }
}

/// An operator's request that cannot be carried out as asked (exit 64, with the reason).
public struct OperatorRefusal: ClassifiedError, Sendable, CustomStringConvertible {
    public let description: String
    public var failureKind: FailureKind { .usage }

    public init(_ description: String) {
        self.description = description
    }
}
