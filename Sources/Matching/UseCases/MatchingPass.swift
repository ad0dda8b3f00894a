import Chronology
import Foundation

/// The evaluation and writes shared by `RunMatching` and `Backfill`, in phases: read the chosen filters,
/// prepare them (validate, apply the owner's plan, assign each its change window), evaluate them
/// against their window's candidates, keep only pairs not recorded yet (`NewPairSelection`), and commit
/// the results in units of work, in filter-id order (`UnitCommitter`).
struct MatchingPass {
    let repositories: MatchingRepositories
    let engine: any MatchEngine
    let output: any RunOutputHandler
    let options: PassOptions

    private var filters: any FilterRepository { repositories.filters }
    private var profiles: any ProfileRepository { repositories.profiles }
    private var blocks: any BlockRepository { repositories.blocks }
    private var matches: any MatchRepository { repositories.matches }
    private var runs: any RunRepository { repositories.runs }

    struct Plan {
        let run: RunRecord?  // nil for a dry run
        let clock: EvaluationClock
        let shard: Shard
        let selection: FilterSelection
        let maxPerFilter: Int
        /// Digests are decided (a run, or a backfill with `--notify`); otherwise matches are recorded silent.
        let writesNotifications: Bool
        let resumeAfterFilter: Int64?
        /// Which candidates each filter considers; `.all` for a backfill.
        let windows: ChangeWindows
        /// `--retention-days` as the run applies it: a pair recorded more than this before the clock is
        /// forgotten at the clock (runs.md), whether or not a sweep has deleted it yet.
        let retentionDays: Int
        /// When set, filters the app created after it take no part: a run completed later, at its own clock,
        /// evaluates the filters its first process could have read, not one created since (review of session
        /// 36: evaluated against the old window, such a filter was notified at a clock before it existed, then
        /// again by the new run a moment later). A created time the worker cannot read counts as long ago.
        var filtersCreatedBy: Timestamp? = nil

        /// How far ahead of the database's clock an app's `created_at` may run and its filter still count as read
        /// by the first process: a filter stamped by an app server whose clock is ahead was read, and left out of
        /// the completion its first window was never evaluated (the review of the change). Ten minutes: more than
        /// any clock an NTP-kept server keeps, less than the time a completion comes after its run.
        static let appClockAllowance: Int64 = 10 * 60 * 1_000_000

        /// The plan `run` was started with, to complete it: its clock in its own zone (`zone` when it kept none),
        /// its cap, whether it notifies and its retention (`retentionDays` when it kept none), after the last
        /// filter it committed; what it does not keep (its shard, selection and windows) as given.
        static func resuming(
            _ run: RunRecord, zone: TimeZone, shard: Shard, selection: FilterSelection, windows: ChangeWindows,
            retentionDays: Int
        ) -> Plan {
            Plan(
                run: run,
                clock: EvaluationClock(
                    now: run.clock, timeZone: run.timeZone.flatMap(TimeZone.init(identifier:)) ?? zone),
                shard: shard, selection: selection, maxPerFilter: run.maxPerFilter,
                writesNotifications: run.writesNotifications, resumeAfterFilter: run.resumeAfterFilter,
                windows: windows, retentionDays: run.retentionDays ?? retentionDays,
                // The first process read the filters at its start: its clock, or later when `--now` was earlier.
                filtersCreatedBy: max(run.clock, run.upToTakenAt ?? run.clock).adding(microseconds: appClockAllowance))
        }

        /// The clock minus the retention (`Retention.cutoff`).
        var forgottenBefore: Timestamp { Retention.cutoff(clock: clock.now, retentionDays: retentionDays) }
        /// When a match a digest passed over is no longer read at the clock (`PassedOverCutoffs`).
        var passedOverCutoffs: PassedOverCutoffs {
            PassedOverCutoffs(
                recordedBefore: forgottenBefore, passedOverBefore: Retention.comebackCutoff(clock: clock.now))
        }
    }

    struct Outcome {
        let counters: RunCounters
        let matchesFound: Int
    }

    func execute(_ plan: Plan, candidates: CandidateProfiles, timings: inout PhaseTimer) throws -> Outcome {
        // Read: the shard's filters, their owners and the blocks.
        timings.begin(.read, output)
        let read = try filters.filters(plan.selection, shard: plan.shard, afterId: plan.resumeAfterFilter)
        let chosen = read.filter { filter in plan.filtersCreatedBy.map { filter.createdAt <= $0 } ?? true }
        if chosen.count < read.count, let run = plan.run {
            output.handle(.filtersCreatedSinceLeftOut(runId: run.id, count: read.count - chosen.count))
        }
        let owners = try profiles.owners(ids: Array(Set(chosen.map(\.ownerId))))
        // The blocks with a candidate on one side: every pair the run evaluates has one (the waiting
        // matches' profiles are added for the digests, `DigestFindings`).
        let blockSet = try blocks.blocks(involving: candidates.columns.ids)
        timings.end(.read, output)
        // Hostile rows (issue 14): odd and unreadable rows are counted and reported, never a failure.
        let readIssues = ReadIssues(
            candidates: candidates.columns, filters: chosen, owners: owners, clock: plan.clock)
        for row in readIssues.quarantined { output.handle(.quarantined(row)) }

        // Every connection units may be written on is opened once, for the probe of recorded pairs and for
        // the writes: both are server work, a core per connection.
        return try matches.withUnitWriters(shortfall: { output.handle(.writersUnavailable($0)) }) { connections in
            try evaluateAndWrite(
                plan, candidates: candidates, chosen: chosen, owners: owners, blockSet: blockSet,
                readIssues: readIssues, connections: connections, timings: &timings)
        }
    }

    /// A stop request (SIGTERM, SIGINT) is honoured between phases too, not only between units: a phase can
    /// take minutes at a million profiles, longer than a service manager waits. Nothing of the pass is
    /// committed before its write phase, so the next run (or the same backfill) does it all again.
    private func stopIfRequested(_ plan: Plan) throws {
        try options.stop.throwIfRequested(runId: plan.run?.id)
    }

    private func evaluateAndWrite(
        _ plan: Plan, candidates: CandidateProfiles, chosen: [SavedFilter], owners: [Int64: FilterOwner],
        blockSet: BlockSet, readIssues: ReadIssues, connections: [any MatchRepository], timings: inout PhaseTimer
    ) throws -> Outcome {
        // Evaluate, then keep only the pairs not recorded yet.
        try stopIfRequested(plan)
        timings.begin(.evaluate, output)
        let prepared = PreparedFilters(chosen, owners: owners, windows: plan.windows)
        // A dry run lists every invalid filter it met; a run, those it newly listed (below).
        if plan.run == nil { for record in prepared.invalid { output.handle(.invalidFilter(record)) } }
        output.handle(
            .filtersLoaded(
                total: chosen.count, invalid: prepared.invalid.count,
                paidIgnored: prepared.paidIgnored, ownerInactive: prepared.ownerInactive))
        // The matches a filter recorded while its `notify` was off wait for its digests from the run that finds
        // it notifying (runs.md: a filter with notify on and unnotified matches gets a digest when due). Listed
        // before the new pairs are chosen: one past the retention then waits, and is recorded, not new (by a
        // backfill without --notify too, which would otherwise record it again, silent: review of session 37).
        // Deferred while another process sweeps: those matches, if expired, are kept as recorded this pass.
        var deferred: Set<MatchPair> = []
        if plan.run != nil {
            let notifying = chosen.filter { $0.notify && prepared[$0.id] != nil }.map(\.id)
            let listed = try WriteConflictRetry.run { try matches.listUnlistedMatches(ofNotifying: notifying) }
            if listed.filters > 0 {
                output.handle(.unlistedMatchesListed(filters: listed.filters, matches: listed.matches))
            }
            deferred = listed.deferred
        }
        let probers: [any RecordedPairLookup] =
            deferred.isEmpty ? connections : connections.map { ExpiredKeptLookup(waiting: deferred, base: $0) }
        let evaluation = WindowedEvaluation(
            engine: engine, candidates: candidates, clock: plan.clock,
            limit: plan.maxPerFilter, blocks: blockSet)
        let selection = try NewPairSelection(
            evaluation: evaluation, probers: probers, forgottenBefore: plan.forgottenBefore
        ).select(prepared)
        let results = selection.results
        timings.end(.evaluate, output)
        let found = results.values.reduce(0) { $0 + $1.count }

        guard let run = plan.run else {
            return Outcome(
                counters: prepared.counted.values.reduce(.zero, +) + readIssues.counters, matchesFound: found)
        }

        // What the digests need: the waiting matches that still qualify, and which pairs are mutual.
        try stopIfRequested(plan)
        timings.begin(.evaluate, output)
        let findings = try DigestFindings.gather(
            prepared: prepared, chosen: chosen, found: results, plan: plan, blocks: blockSet,
            repositories: repositories, engine: engine, candidates: candidates.columns)
        timings.end(.evaluate, output)

        // Write, in units of work: each commits its matches, the digests they make due, its counters and the
        // run's cursor together, so a crash at any instant loses and duplicates nothing.
        try stopIfRequested(plan)
        timings.begin(.write, output)
        // Warned once, when a filter becomes invalid (or for another reason): one invalid for good is counted by
        // every run and listed in matcher_invalid_filters, not warned about every day (review of session 32).
        let newlyInvalid = try filters.recordValidation(
            invalid: prepared.invalid, validIds: prepared.validIds, runId: run.id)
        for record in newlyInvalid { output.handle(.invalidFilter(record)) }
        // The digests' reads (the waiting matches' profiles, the mutual check's filters and profiles) count like the
        // candidates'.
        let allIssues = findings.issues(including: readIssues)
        for row in allIssues.quarantined.dropFirst(readIssues.quarantined.count) { output.handle(.quarantined(row)) }
        try runs.recordReadIssues(allIssues, runId: run.id)
        let writer = UnitWriter(
            output: output, stop: options.stop, run: run,
            plan: plan,
            lastLogins: candidates.lastLogins, readAt: candidates.readAt, filtersTotal: chosen.count,
            findings: findings, expired: selection.expired)
        var units: [UnitWriter.Pending] = []
        var unit = UnitWriter.Pending()
        for filter in chosen {
            unit.add(
                filter: filter.id, counters: prepared.counted[filter.id] ?? .zero,
                prepared: prepared[filter.id], found: results[filter.id] ?? [])
            if unit.filterCount >= options.unitFilterLimit || unit.matchCount >= options.unitMatchLimit {
                units.append(unit)
                unit = UnitWriter.Pending()
            }
        }
        if unit.filterCount > 0 { units.append(unit) }
        try writer.write(units, on: connections)
        timings.end(.write, output)
        return Outcome(counters: writer.written, matchesFound: found)
    }
}

/// A use case that works through a `MatchingPass` (a run, a backfill), with the repositories and output it uses.
protocol MatchingPassUseCase {
    var pass: MatchingPass { get }
}

extension MatchingPassUseCase {
    var profiles: any ProfileRepository { pass.repositories.profiles }
    var runs: any RunRepository { pass.repositories.runs }
    var output: any RunOutputHandler { pass.output }
}

extension MatchingPass {
    /// A dry run: `plan` (with no run) evaluated and summarized, nothing written.
    func dryRun(_ plan: Plan, kind: RunKind, candidates: CandidateProfiles, timer: PhaseTimer) throws -> RunSummary {
        var timer = timer
        let outcome = try execute(plan, candidates: candidates, timings: &timer)
        return summarize(
            runId: nil, kind: kind, shard: plan.shard, clock: plan.clock.now, dryRun: true, resumedId: nil,
            counters: outcome.counters + RunCounters(candidates: candidates.count), found: outcome.matchesFound,
            timer: timer)
    }

    /// Runs `body` for a recorded run, then forgets the pairs past retention: marks the run succeeded when
    /// both return, failed (resumable by the next run) when either throws, and summarizes it with the
    /// counters of all its attempts.
    func finishing(
        _ run: RunRecord, timer: PhaseTimer, resumedId: Int64?, retentionDays: Int, completed: CompletedRun? = nil,
        _ body: (inout PhaseTimer) throws -> Outcome
    ) throws -> RunSummary {
        var timer = timer
        let outcome: Outcome
        var retention: RetentionOutcome?
        do {
            outcome = try body(&timer)
            timer.begin(.forget, output)
            retention = try forgetExpired(
                clock: run.clock, retentionDays: retentionDays, recorded: outcome.counters.matchesWritten)
            timer.end(.forget, output)
            try runs.finish(
                runId: run.id,
                RunCompletion(
                    phaseSeconds: timer.seconds, matchesForgotten: retention?.forgotten ?? 0, owner: run.owner))
        } catch {
            try? runs.fail(runId: run.id, owner: run.owner, error: String(describing: error))
            throw error
        }
        // The run is committed as succeeded: reading its counters back is best effort, and a connection lost now
        // does not turn the success into a failure (review of session 29); this process's counts stand in.
        let counters = ((try? runs.run(id: run.id)) ?? nil)?.counters ?? outcome.counters
        return summarize(
            runId: run.id, kind: run.kind, shard: run.shard, clock: run.clock, dryRun: false,
            resumedId: resumedId, counters: counters, found: counters.matchesWritten, timer: timer,
            retention: retention, completed: completed)
    }

    /// The retention sweep (runs.md): pairs recorded more than `retentionDays` and an hour before the run's clock,
    /// and the waiting-list entries of matches a digest passed over, past `Retention.comebackDays`,
    /// in bounded batches, at least twice as many as the service recorded in the day up to the clock
    /// (`Retention.sweepBatches`: the sweep is service-wide and one shard's run may do it for all); a backlog
    /// beyond that is left to the next runs rather than growing one.
    private func forgetExpired(clock: Timestamp, retentionDays: Int, recorded: Int) throws -> RetentionOutcome? {
        // An hour behind the run's own cutoff: shards started together take their clocks seconds apart, and a
        // sweep must not delete what another shard, by its clock, still counts as recorded. What lies between
        // is forgotten at the clock all the same (the probe's `expired`) and swept by the next run.
        let cutoff = Retention.cutoff(clock: clock, retentionDays: retentionDays)
            .adding(microseconds: -Retention.sweepLagMicroseconds)
        let passedOverCutoff = Retention.comebackCutoff(clock: clock)
            .adding(microseconds: -Retention.sweepLagMicroseconds)
        // The day's count is only a budget: if it cannot be read, this run's own count stands in.
        let day = (try? runs.matchesRecorded(clockAfter: clock.adding(days: -1), through: clock)) ?? 0
        let recorded = max(recorded, day)
        let outcome = try matches.forgetExpired(
            before: cutoff, passedOverBefore: passedOverCutoff, batchSize: options.retentionBatchSize,
            maxBatches: Retention.sweepBatches(
                recorded: recorded, batchSize: options.retentionBatchSize, minimum: options.retentionMinimumBatches),
            stop: options.stop)
        // The sweep lists first, service-wide, the matches notifying filters recorded while notify was off.
        if let outcome, outcome.listedFilters > 0 {
            output.handle(.unlistedMatchesListed(filters: outcome.listedFilters, matches: outcome.listedMatches))
        }
        if let outcome { output.handle(.forgotten(outcome)) }
        return outcome
    }

    func summarize(
        runId: Int64?, kind: RunKind, shard: Shard, clock: Timestamp, dryRun: Bool,
        resumedId: Int64?, counters: RunCounters, found: Int, timer: PhaseTimer, retention: RetentionOutcome? = nil,
        completed: CompletedRun? = nil
    ) -> RunSummary {
        let summary = RunSummary(
            runId: runId, kind: kind, shard: shard, clock: clock, dryRun: dryRun,
            resumedRunId: resumedId, counters: counters, matchesFound: found,
            phaseSeconds: timer.seconds, totalSeconds: timer.total, retention: retention, completedRun: completed)
        output.handle(.finished(summary))
        return summary
    }
}
