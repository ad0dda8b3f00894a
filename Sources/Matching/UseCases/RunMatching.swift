import Chronology
import Foundation

/// The incremental run the timer starts (runs.md): for each filter of the shard, the profiles changed
/// since the last successful run that covered it (`Coverage`, whatever shard layouts ran before), new
/// pairs capped per filter, digests by each filter's rules, then the retention sweep.
///
/// An earlier run of the shard that died or failed before finishing is completed first, with its own
/// clock and change windows, continuing after the last unit it committed; then this run proceeds. An
/// interrupted run of another layout whose shard overlaps this one is superseded (abandoned; what it
/// committed stays): this run covers its owners from their own coverage, so nothing is lost or doubled.
public struct RunMatching: Sendable, MatchingPassUseCase {
    public struct Input: Sendable {
        /// The run's clock; nil = the store's clock when the run starts.
        public let now: Timestamp?
        public let timeZone: TimeZone
        public let shard: Shard
        public let maxPerFilter: Int
        public let dryRun: Bool
        /// How long a recorded pair is kept (runs.md retention); nil: as long as the latest run kept them
        /// (`Retention.days`).
        public let retentionDays: Int?
        /// The operator accepts a time zone other than the one the shard's previous runs used.
        public let timeZoneChange: Bool

        public init(
            now: Timestamp? = nil, timeZone: TimeZone = .tokyo, shard: Shard = .all,
            maxPerFilter: Int = 100, dryRun: Bool = false, retentionDays: Int? = nil,
            timeZoneChange: Bool = false
        ) {
            self.now = now
            self.timeZone = timeZone
            self.shard = shard
            self.maxPerFilter = maxPerFilter
            self.dryRun = dryRun
            self.retentionDays = retentionDays
            self.timeZoneChange = timeZoneChange
        }
    }

    let pass: MatchingPass

    public init(
        _ repositories: MatchingRepositories, engine: any MatchEngine = BitsetMatchEngine(),
        output: any RunOutputHandler = SilentRunOutput(), options: PassOptions = PassOptions()
    ) {
        pass = MatchingPass(repositories: repositories, engine: engine, output: output, options: options)
    }

    public func execute(_ input: Input) throws -> RunSummary {
        let lock = try runs.lock(.run, input.shard, dryRun: input.dryRun)
        defer { lock?.release() }

        let retentionDays = try Retention.days(input.retentionDays, runs: runs, output: output)
        var resumedId: Int64?
        var completed: CompletedRun?
        if !input.dryRun {
            if let interrupted = try runs.interruptedRun(kind: .run, shard: input.shard) {
                if try coveredSince(interrupted) {
                    try runs.abandon(runId: interrupted.id)
                    output.handle(.superseded(runId: interrupted.id, shard: interrupted.shard))
                } else if let claimed = try runs.claim(runId: interrupted.id) {
                    // Claimed first: a process still writing it (its run lock lost) stops at its next unit, and
                    // the cursor read is the one its last committed unit left.
                    let done = try complete(claimed, timeZone: input.timeZone, retentionDays: retentionDays)
                    completed = CompletedRun(
                        runId: interrupted.id, counters: done.counters, totalSeconds: done.totalSeconds)
                    resumedId = interrupted.id
                }
            }
        }

        // A stop asked for during the completion ended it at a unit boundary (143; the next run completes it); one
        // asked for after its last unit ends here, before the new run reads.
        try pass.options.stop.throwIfRequested(runId: nil)

        var timer = PhaseTimer()
        timer.begin(.read, output)
        let coverage = try runs.coverage().inUse(by: input.shard)
        try TimeZoneChanged.check(
            coverage, shard: input.shard, kind: .run, zone: input.timeZone, accepting: input.timeZoneChange)
        try checkNotAhead(coverage, shard: input.shard)
        let windows = ChangeWindows(coverage: coverage, shard: input.shard)
        guard windows.marks.count <= ChangeWindows.maximumCount else {
            throw TooManyChangeWindows(shard: input.shard, count: windows.marks.count)
        }
        // Only once the run will go on: a refused run abandons no other layout's interrupted run.
        if !input.dryRun { try supersedeOtherLayouts(input.shard) }
        let changed = try profiles.changedProfiles(windows: windows.marks, upTo: nil)
        let now = try input.now ?? profiles.currentTime()
        timer.end(.read, output)
        output.handle(.candidatesLoaded(changed.profiles.count))
        let clock = EvaluationClock(now: now, timeZone: input.timeZone)
        let candidates = CandidateProfiles(changed.profiles, windowMasks: changed.windowMasks, readAt: changed.readAt)
        let plan = { (run: RunRecord?) in
            MatchingPass.Plan(
                run: run, clock: clock, shard: input.shard, selection: .all,
                maxPerFilter: input.maxPerFilter, writesNotifications: true, resumeAfterFilter: nil,
                windows: windows, retentionDays: retentionDays)
        }

        if input.dryRun {
            output.handle(
                .started(kind: .run, shard: input.shard, clock: now, runId: nil, resumed: false, dryRun: true))
            return try pass.dryRun(plan(nil), kind: .run, candidates: candidates, timer: timer)
        }

        let run = try runs.start(
            NewRun(
                kind: .run, shard: input.shard, clock: now, maxPerFilter: input.maxPerFilter, writesNotifications: true,
                coverage: coverage, upTo: changed.mark, upToTakenAt: changed.takenAt,
                timeZone: input.timeZone.identifier,
                retentionDays: retentionDays, parameters: "{}", candidates: changed.profiles.count))
        output.handle(
            .started(kind: .run, shard: input.shard, clock: now, runId: run.id, resumed: false, dryRun: false))
        return try pass.finishing(
            run, timer: timer, resumedId: resumedId, retentionDays: retentionDays, completed: completed
        ) {
            timer in
            try pass.execute(plan(run), candidates: candidates, timings: &timer)
        }
    }

    /// Completes a run that an earlier process left unfinished, with its own clock, zone and windows.
    private func complete(_ run: RunRecord, timeZone: TimeZone, retentionDays: Int) throws -> RunSummary {
        // Its marks are checked as the new run's are, before it reads: after a restore, completing it would read
        // with the old server's snapshot (every change settled by another shard's reset counts as seen) and then
        // record that snapshot as the shard's progress. The shard's reset abandons it.
        var timer = PhaseTimer()
        let (windows, changed) = try runs.failingClaimed(run) {
            try checkNotAhead(run.coverage ?? .none, upTo: run.upTo, shard: run.shard)
            timer.begin(.read, output)
            let windows = ChangeWindows(coverage: run.coverage ?? .none, shard: run.shard)
                .leavingOut(ownersOf: try newerCoverage(than: run))
            return (windows, try profiles.changedProfiles(windows: windows.marks, upTo: run.upTo))
        }
        timer.end(.read, output)
        output.handle(
            .started(kind: .run, shard: run.shard, clock: run.clock, runId: run.id, resumed: true, dryRun: false))
        let plan = MatchingPass.Plan.resuming(
            run, zone: timeZone, shard: run.shard, selection: .all, windows: windows, retentionDays: retentionDays)
        let candidates = CandidateProfiles(changed.profiles, windowMasks: changed.windowMasks, readAt: changed.readAt)
        return try pass.finishing(run, timer: timer, resumedId: nil, retentionDays: plan.retentionDays) { timer in
            try pass.execute(plan, candidates: candidates, timings: &timer)
        }
    }

    /// Whether runs that read the changes after `run` did have since covered every owner of its shard (an
    /// unsharded run, or a new layout's shards, that succeeded while it was still running and then failed):
    /// completing it would consider again, for its remaining filters, changes those runs considered. It is
    /// abandoned instead (what it committed stays), and this run goes on from the owners' newer coverage.
    private func coveredSince(_ run: RunRecord) throws -> Bool {
        guard run.upToTakenAt != nil else { return false }
        return Coverage.covers(try newerCoverage(than: run), wholly: run.shard)
    }

    /// The shards of progress entries recorded by runs that read their changes after `run` did: their owners have
    /// been shown every change `run` would show them. None when the run's read time is unknown.
    private func newerCoverage(than run: RunRecord) throws -> [Shard] {
        guard let readAt = run.upToTakenAt else { return [] }
        return try runs.coverage().entries.filter { $0.takenAt > readAt }.map(\.shard)
    }

    /// Interrupted runs of other shard layouts that overlap this shard are abandoned when no process holds
    /// them: resuming one later would replay an old window over filters this run covers anew.
    private func supersedeOtherLayouts(_ shard: Shard) throws {
        for other in try runs.interruptedRuns(intersecting: shard) {
            guard let held = try runs.tryLock(kind: .run, shard: other.shard) else { continue }
            defer { held.release() }
            try runs.abandon(runId: other.id)
            output.handle(.superseded(runId: other.id, shard: other.shard))
        }
    }

    /// Progress taken on a server whose transactions are behind it (a restore, a failover) would find no
    /// change for a long time: refuse, and say how to reset.
    private func checkNotAhead(_ coverage: Coverage, upTo: ChangeMark? = nil, shard: Shard) throws {
        let ahead = try profiles.marksAhead(coverage.entries.map(\.mark) + [upTo].compactMap { $0 })
        guard !ahead.isEmpty else { return }
        var shards = coverage.entries.filter { ahead.contains($0.mark) }.map(\.shard.description)
        if let upTo, ahead.contains(upTo), !shards.contains(shard.description) { shards.append(shard.description) }
        throw ProgressAhead(shard: shard, shards: shards)
    }
}

/// The run's zone differs from the zone its shard's previous runs used (exit 78).
public struct TimeZoneChanged: ClassifiedError, Sendable, CustomStringConvertible {
    /// The shard of the refused run or backfill.
    public let shard: Shard
    /// The zones its owners' progress entries ran in, each with those entries' shards, in the entries' order.
    public let previous: [(zone: String, shards: [Shard])]
    public let requested: String
    public var kind: RunKind = .run
    public var failureKind: FailureKind { .configuration }
    public var description: String {
        func shards(_ list: [Shard]) -> String {
            list.sorted { ($0.count, $0.index) < ($1.count, $1.index) }.map(\.description).joined(separator: ", ")
        }
        guard previous.count == 1, let only = previous.first else {
            // Shards changed one at a time (review of session 34: the advice named this run's shard and one zone,
            // and following it gave the opposite refusal).
            let zones = previous.map { "\($0.zone) (\(shards($0.shards)))" }.joined(separator: "; ")
            let advice =
                kind == .backfill
                ? "backfill the owners of each zone apart (--shard K/N, or --filter/--owner lists split by zone) with "
                    + "that zone's --time-zone"
                : "finish the change: run the other shards with the zone they should use and --time-zone-change, or "
                    + "pass --time-zone-change here to move every owner of shard \(shard) to \(requested)"
            return "the owners of this \(kind.rawValue) (shard \(shard)) took their last changes in different time "
                + "zones: \(zones), and it asks for \(requested); \(advice)"
        }
        return "shard \(shards(only.shards)) ran in time zone \(only.zone) before, and this \(kind.rawValue) of shard "
            + "\(shard) asks for \(requested): digests' due times and ages would shift; pass --time-zone "
            + "\(only.zone), or --time-zone-change to switch on purpose"
    }

    /// A shard keeps the zone it ran with: its digests' "same time tomorrow" and ages depend on it. A backfill
    /// over its filters is held to it too, or it would record and notify pairs a run at the same clock would not
    /// (an age one day off around midnight).
    static func check(_ coverage: Coverage, shard: Shard, kind: RunKind, zone: TimeZone, accepting: Bool) throws {
        guard !accepting else { return }
        let requested = zone.identifier
        guard coverage.entries.contains(where: { ($0.timeZone ?? requested) != requested }) else { return }
        var zones: [(zone: String, shards: [Shard])] = []
        // An entry with no zone recorded (older progress, a reset of a fresh shard) accepts any: not listed.
        for entry in coverage.entries {
            guard let zone = entry.timeZone else { continue }
            if let at = zones.firstIndex(where: { $0.zone == zone }) {
                zones[at].shards.append(entry.shard)
            } else {
                zones.append((zone, [entry.shard]))
            }
        }
        throw TimeZoneChanged(shard: shard, previous: zones, requested: requested, kind: kind)
    }
}

/// A `--now` well after the database's clock (exit 64): a mistyped year, or a zone offset left off and added
/// wrong. Such a run would stamp its digests' `last_notified_at` in the future (no digest for those filters
/// until the real clock catches up, and no alert: nothing looks overdue) and forget every pair older than its
/// clock less the retention (a year ahead: all of them, which may then match and be shown again).
public struct ClockAhead: ClassifiedError, Sendable, CustomStringConvertible {
    /// How far after the database's clock a `--now` may be without `--allow-future-now`.
    public static let tolerance: Int64 = 3_600 * 1_000_000
    public let requested: Timestamp
    public let database: Timestamp
    public var failureKind: FailureKind { .usage }
    public var description: String {
        let hours = (requested.microsecondsSinceEpoch - database.microsecondsSinceEpoch) / 3_600_000_000
        let ahead = hours < 48 ? "\(hours) h" : "\(hours / 24) days"
        return "--now \(requested.iso8601) is \(ahead) after the database's clock (\(database.iso8601)): a run's "
            + "digests and retention follow its clock; check the date and zone, or pass --allow-future-now to "
            + "run ahead of the database on purpose (a test world)"
    }

    /// The commands' check of their `--now` (not the use cases': they take the clock they are given, as tests
    /// and replays do); a dry run writes nothing and is not checked.
    public static func check(_ now: Timestamp?, against profiles: any ProfileRepository) throws {
        guard let now else { return }
        let database = try profiles.currentTime()
        if now.microsecondsSinceEpoch > database.microsecondsSinceEpoch &+ tolerance {
            throw ClockAhead(requested: now, database: database)
        }
    }
}

/// Recorded progress is ahead of the database's transactions (exit 78).
public struct ProgressAhead: ClassifiedError, Sendable, CustomStringConvertible {
    public let shard: Shard
    public let shards: [String]
    public var failureKind: FailureKind { .configuration }
    public var description: String {
        "the progress of shard(s) \(shards.joined(separator: ", ")) is ahead of this database's transactions "
            + "(restored from a backup, or failed over to a server behind the old one?): a run would find no change; "
            + "run `matcher progress reset --shard \(shard) --to <time the data was current>` and run again"
    }
}

/// More shard layouts' progress overlaps this shard than one read can tell apart (exit 78).
public struct TooManyChangeWindows: ClassifiedError, Sendable, CustomStringConvertible {
    public let shard: Shard
    public let count: Int
    public var failureKind: FailureKind { .configuration }
    public var description: String {
        "shard \(shard) would need \(count) change windows (at most \(ChangeWindows.maximumCount)): its owners were "
            + "last covered by that many shards of other layouts (going from more than 64 shards to few, or "
            + "several layouts that never ran whole); go through a layout in between, each of whose shards meets "
            + "at most 64 of the last layout's (from 100 shards to 1: run 10 shards once, then 1), see README "
            + "\"Resharding\"; nothing was written"
    }
}
