import Chronology
import Foundation

/// The evaluation and writes shared by `RunMatching` and `Backfill`: prepare the chosen filters,
/// evaluate them against the candidates, and commit the results in units of work, in filter-id order.
struct MatchingPass {
    let filters: any FilterRepository
    let profiles: any ProfileRepository
    let blocks: any BlockRepository
    let matches: any MatchRepository
    let runs: any RunRepository
    let engine: any MatchEngine
    let output: any RunOutputHandler
    let stop: StopRequest
    let unitFilterLimit: Int
    let unitMatchLimit: Int

    struct Plan {
        let run: RunRecord?           // nil for a dry run
        let clock: EvaluationClock
        let shard: Shard
        let selection: FilterSelection
        let maxPerFilter: Int
        let writesNotifications: Bool
        let resumeAfterFilter: Int64?
    }

    struct Outcome {
        let counters: RunCounters
        let matchesFound: Int
    }

    func execute(_ plan: Plan, candidates: ProfileColumns, timings: inout PhaseTimer) throws -> Outcome {
        // Read: the shard's filters, their owners, blocks and the pairs already recorded.
        timings.begin(.read, output)
        let chosen = try filters.filters(plan.selection, shard: plan.shard, afterId: plan.resumeAfterFilter)
        let owners = try profiles.owners(ids: Array(Set(chosen.map(\.ownerId))))
        let batch = CandidateBatch(candidates)
        let blockSet = try blocks.blocks(involving: nil)
        let existing = try matches.existingPairs(profileIds: batch.count == 0 ? [] : batch.ids)
        timings.end(.read, output)
        // Hostile rows (issue 14): odd and unreadable rows are counted and reported, never a failure.
        let readIssues = ReadIssues(candidates: candidates, filters: chosen, owners: owners)
        for row in readIssues.quarantined { output.handle(.quarantined(row)) }

        // Evaluate.
        timings.begin(.evaluate, output)
        var prepared: [PreparedFilter] = []
        var invalid: [InvalidFilter] = []
        var validIds: [Int64] = []
        var counted: [Int64: RunCounters] = [:]   // what each filter adds to the run's counters
        var paidIgnored = 0
        var ownerInactive = 0
        for filter in chosen {
            if filter.quarantineReason != nil { continue }   // unreadable: in readIssues, never evaluated
            let conditions: FilterConditions
            do {
                conditions = try FilterConditions.decode(json: filter.conditionsJSON)
            } catch {
                let record = InvalidFilter(filterId: filter.id, ownerId: filter.ownerId, error: error)
                invalid.append(record)
                counted[filter.id] = RunCounters(filtersInvalid: 1)
                output.handle(.invalidFilter(record))
                continue
            }
            validIds.append(filter.id)
            guard let owner = owners[filter.ownerId], owner.isActive else {
                ownerInactive += 1
                continue
            }
            let effective = conditions.effective(forOwnerPlan: owner.plan)
            let lapsed = effective.ignoredPaidKeys.isEmpty ? 0 : 1
            paidIgnored += lapsed
            counted[filter.id] = RunCounters(filtersEvaluated: 1, filtersPaidIgnored: lapsed)
            prepared.append(PreparedFilter(filter: filter, owner: owner, conditions: effective.conditions))
        }
        output.handle(.filtersLoaded(total: chosen.count, invalid: invalid.count, paidIgnored: paidIgnored,
                                     ownerInactive: ownerInactive))
        let results = engine.evaluate(prepared, against: batch, limit: plan.maxPerFilter, clock: plan.clock,
                                      exclusions: MatchExclusions(existing: existing, blocks: blockSet))
        timings.end(.evaluate, output)
        let found = results.reduce(0) { $0 + $1.profileIds.count }
        let filterTotals = counted.values.reduce(RunCounters.zero, +)

        guard let run = plan.run else {
            return Outcome(counters: filterTotals + readIssues.counters, matchesFound: found)
        }

        // Write, in units of work: each commits its matches, the notifications they make due, its
        // counters and the run's cursor together, so a crash at any instant loses and duplicates nothing.
        timings.begin(.write, output)
        try filters.recordValidation(invalid: invalid, validIds: validIds, runId: run.id)
        try runs.recordReadIssues(readIssues, runId: run.id)
        var written = RunCounters.zero
        let resultByFilter = Dictionary(uniqueKeysWithValues: results.map { ($0.filterId, $0) })
        let preparedById = Dictionary(uniqueKeysWithValues: prepared.map { ($0.filter.id, $0) })
        let planner = NotificationPlanner()
        // Candidate id -> last_login_at, for ordering digests of new matches (only when notifying).
        let lastLogins: [Int64] = plan.writesNotifications ? batch.columns.lastLoginAt : []
        let rowById: [Int64: Int] = plan.writesNotifications
            ? Dictionary(zip(batch.ids, batch.ids.indices), uniquingKeysWith: { a, _ in a }) : [:]
        var unitMatches: [FilterResult] = []
        var unitNotify: [NotificationCandidateFilter] = []
        var unitCounters = RunCounters.zero
        var unitMatchCount = 0
        var unitFilterCount = 0
        var done = 0

        func commitUnit(lastFilterId: Int64) throws {
            if let reason = stop.requestedReason { throw RunStopped(reason: reason, runId: run.id) }
            var logins: [Int64: Timestamp] = [:]
            if plan.writesNotifications {
                for result in unitMatches {
                    for id in result.profileIds {
                        if let row = rowById[id] { logins[id] = Timestamp(microsecondsSinceEpoch: lastLogins[row]) }
                    }
                }
            }
            let outcome = try matches.commit(
                WorkUnit(runId: run.id, clock: plan.clock, lastFilterId: lastFilterId, matches: unitMatches,
                         notify: plan.writesNotifications ? unitNotify : nil, filterCounters: unitCounters,
                         lastLoginAt: logins),
                planner: planner)
            written = written + unitCounters + RunCounters(matchesWritten: outcome.matchesWritten,
                                                           notificationsWritten: outcome.notificationsWritten)
            done += unitFilterCount
            output.handle(.unitCommitted(filtersDone: done, filtersTotal: chosen.count,
                                         matches: written.matchesWritten,
                                         notifications: written.notificationsWritten))
            unitMatches.removeAll(keepingCapacity: true)
            unitNotify.removeAll(keepingCapacity: true)
            unitCounters = .zero
            unitMatchCount = 0
            unitFilterCount = 0
        }

        for filter in chosen {
            unitFilterCount += 1
            unitCounters = unitCounters + (counted[filter.id] ?? .zero)
            if let prepared = preparedById[filter.id] {
                if let result = resultByFilter[filter.id], !result.profileIds.isEmpty {
                    unitMatches.append(result)
                    unitMatchCount += result.profileIds.count
                }
                unitNotify.append(NotificationCandidateFilter(filter: prepared.filter, owner: prepared.owner))
            }
            if unitFilterCount >= unitFilterLimit || unitMatchCount >= unitMatchLimit {
                try commitUnit(lastFilterId: filter.id)
            }
        }
        if unitFilterCount > 0, let last = chosen.last {
            try commitUnit(lastFilterId: last.id)
        }
        timings.end(.write, output)
        return Outcome(counters: written, matchesFound: found)
    }
}

extension MatchingPass {
    /// Runs `body` for a recorded run: marks it succeeded when `body` returns, failed (resumable by the
    /// next run) when it throws, and summarizes it with the counters of all its attempts.
    func finishing(_ run: RunRecord, timer: PhaseTimer, resumedId: Int64?,
                   _ body: (inout PhaseTimer) throws -> Outcome) throws -> RunSummary {
        var timer = timer
        let outcome: Outcome
        do {
            outcome = try body(&timer)
            try runs.finish(runId: run.id, RunCompletion(phaseSeconds: timer.seconds))
        } catch {
            try? runs.fail(runId: run.id, error: String(describing: error))
            throw error
        }
        let counters = try runs.run(id: run.id)?.counters ?? outcome.counters
        return summarize(runId: run.id, kind: run.kind, shard: run.shard, clock: run.clock, dryRun: false,
                         resumedId: resumedId, counters: counters, found: counters.matchesWritten, timer: timer)
    }

    func summarize(runId: Int64?, kind: RunKind, shard: Shard, clock: Timestamp, dryRun: Bool,
                   resumedId: Int64?, counters: RunCounters, found: Int, timer: PhaseTimer) -> RunSummary {
        let summary = RunSummary(runId: runId, kind: kind, shard: shard, clock: clock, dryRun: dryRun,
                                 resumedRunId: resumedId, counters: counters, matchesFound: found,
                                 phaseSeconds: timer.seconds, totalSeconds: timer.total)
        output.handle(.finished(summary))
        return summary
    }
}

/// Wall-clock seconds per phase, accumulated.
struct PhaseTimer {
    private(set) var seconds: [RunPhase: Double] = [:]
    private var started: [RunPhase: ContinuousClock.Instant] = [:]
    private let origin = ContinuousClock.now

    mutating func begin(_ phase: RunPhase, _ output: any RunOutputHandler) {
        started[phase] = .now
        output.handle(.phaseStarted(phase))
    }

    mutating func end(_ phase: RunPhase, _ output: any RunOutputHandler) {
        guard let start = started.removeValue(forKey: phase) else { return }
        let elapsed = (ContinuousClock.now - start).seconds
        seconds[phase, default: 0] += elapsed
        output.handle(.phaseFinished(phase, seconds: elapsed))
    }

    var total: Double { (ContinuousClock.now - origin).seconds }
}

extension Duration {
    var seconds: Double {
        let (s, attos) = components
        return Double(s) + Double(attos) / 1e18
    }
}
