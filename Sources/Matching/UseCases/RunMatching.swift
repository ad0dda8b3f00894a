import Chronology
import Foundation

/// The incremental run the timer starts (runs.md): profiles changed since the shard's last successful
/// run, against the shard's filters; new pairs capped per filter; notifications by each filter's rules.
///
/// An earlier run of the shard that died or failed before finishing is completed first, with its own
/// clock and change window, continuing after the last unit it committed; then this run proceeds.
public struct RunMatching: Sendable {
    public struct Input: Sendable {
        /// The run's clock; nil = the store's clock when the run starts.
        public let now: Timestamp?
        public let timeZone: TimeZone
        public let shard: Shard
        public let maxPerFilter: Int
        public let dryRun: Bool

        public init(now: Timestamp? = nil, timeZone: TimeZone = .tokyo, shard: Shard = .all,
                    maxPerFilter: Int = 100, dryRun: Bool = false) {
            self.now = now
            self.timeZone = timeZone
            self.shard = shard
            self.maxPerFilter = maxPerFilter
            self.dryRun = dryRun
        }
    }

    private let profiles: any ProfileRepository
    private let filters: any FilterRepository
    private let blocks: any BlockRepository
    private let matches: any MatchRepository
    private let runs: any RunRepository
    private let engine: any MatchEngine
    private let output: any RunOutputHandler
    private let stop: StopRequest
    private let unitFilterLimit: Int
    private let unitMatchLimit: Int

    public init(profiles: any ProfileRepository, filters: any FilterRepository, blocks: any BlockRepository,
                matches: any MatchRepository, runs: any RunRepository, engine: any MatchEngine = BitsetMatchEngine(),
                output: any RunOutputHandler = SilentRunOutput(), stop: StopRequest = StopRequest(),
                unitFilterLimit: Int = 2_000, unitMatchLimit: Int = 50_000) {
        self.profiles = profiles
        self.filters = filters
        self.blocks = blocks
        self.matches = matches
        self.runs = runs
        self.engine = engine
        self.output = output
        self.stop = stop
        self.unitFilterLimit = max(1, unitFilterLimit)
        self.unitMatchLimit = max(1, unitMatchLimit)
    }

    private var pass: MatchingPass {
        MatchingPass(filters: filters, profiles: profiles, blocks: blocks, matches: matches, runs: runs,
                     engine: engine, output: output, stop: stop, unitFilterLimit: unitFilterLimit,
                     unitMatchLimit: unitMatchLimit)
    }

    public func execute(_ input: Input) throws -> RunSummary {
        guard let lock = try runs.tryLock(kind: .run, shard: input.shard) else {
            throw RunLocked(kind: .run, shard: input.shard)
        }
        defer { lock.release() }

        var resumedId: Int64?
        if !input.dryRun, let interrupted = try runs.interruptedRun(kind: .run, shard: input.shard) {
            _ = try complete(interrupted, timeZone: input.timeZone)
            resumedId = interrupted.id
        }

        var timer = PhaseTimer()
        timer.begin(.read, output)
        let since = try runs.progressMark(shard: input.shard)
        let changed = try profiles.changedProfiles(since: since, upTo: nil)
        let now = try input.now ?? profiles.currentTime()
        timer.end(.read, output)
        output.handle(.candidatesLoaded(changed.profiles.count))
        let clock = EvaluationClock(now: now, timeZone: input.timeZone)

        if input.dryRun {
            output.handle(.started(kind: .run, shard: input.shard, clock: now, runId: nil, resumed: false, dryRun: true))
            let outcome = try pass.execute(
                .init(run: nil, clock: clock, shard: input.shard, selection: .all, maxPerFilter: input.maxPerFilter,
                      writesNotifications: true, resumeAfterFilter: nil),
                candidates: changed.profiles, timings: &timer)
            return pass.summarize(runId: nil, kind: .run, shard: input.shard, clock: now, dryRun: true, resumedId: nil,
                             counters: outcome.counters + RunCounters(candidates: changed.profiles.count),
                             found: outcome.matchesFound, timer: timer)
        }

        let run = try runs.start(NewRun(
            kind: .run, shard: input.shard, clock: now, maxPerFilter: input.maxPerFilter, writesNotifications: true,
            since: since, upTo: changed.mark, parameters: "{}", candidates: changed.profiles.count))
        output.handle(.started(kind: .run, shard: input.shard, clock: now, runId: run.id, resumed: false, dryRun: false))
        return try pass.finishing(run, timer: timer, resumedId: resumedId) { timer in
            try pass.execute(
                .init(run: run, clock: clock, shard: input.shard, selection: .all, maxPerFilter: input.maxPerFilter,
                      writesNotifications: true, resumeAfterFilter: nil),
                candidates: changed.profiles, timings: &timer)
        }
    }

    /// Completes a run that an earlier process left unfinished.
    private func complete(_ run: RunRecord, timeZone: TimeZone) throws -> RunSummary {
        var timer = PhaseTimer()
        timer.begin(.read, output)
        let changed = try profiles.changedProfiles(since: run.since, upTo: run.upTo)
        timer.end(.read, output)
        output.handle(.started(kind: .run, shard: run.shard, clock: run.clock, runId: run.id, resumed: true, dryRun: false))
        return try pass.finishing(run, timer: timer, resumedId: nil) { timer in
            try pass.execute(
                .init(run: run, clock: EvaluationClock(now: run.clock, timeZone: timeZone), shard: run.shard,
                      selection: .all, maxPerFilter: run.maxPerFilter, writesNotifications: true,
                      resumeAfterFilter: run.resumeAfterFilter),
                candidates: changed.profiles, timings: &timer)
        }
    }
}
