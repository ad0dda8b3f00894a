import Chronology
import Foundation

/// A backfill, started by hand (runs.md): the same evaluation as a run over a chosen set of profiles
/// and filters. It writes matches like a run; notifications only when asked (`--notify`), so that a
/// backfill never floods users. It does not move the shard's change-capture progress.
///
/// An interrupted backfill with the same selection and shard is resumed after its last committed unit.
public struct Backfill: Sendable, MatchingPassUseCase {
    public struct Input: Sendable {
        public let profiles: ProfileSelection
        public let filters: FilterSelection
        public let writesNotifications: Bool
        public let now: Timestamp?
        public let timeZone: TimeZone
        public let shard: Shard
        public let maxPerFilter: Int
        public let dryRun: Bool
        /// nil: as long as the latest run or backfill kept them (`Retention.days`).
        public let retentionDays: Int?
        /// Accept a zone other than the one the runs of the shard's owners use (`TimeZoneChanged`).
        public let timeZoneChange: Bool

        public init(
            profiles: ProfileSelection = .all, filters: FilterSelection = .all, writesNotifications: Bool = false,
            now: Timestamp? = nil, timeZone: TimeZone = .tokyo, shard: Shard = .all, maxPerFilter: Int = 100,
            dryRun: Bool = false, retentionDays: Int? = nil, timeZoneChange: Bool = false
        ) {
            self.timeZoneChange = timeZoneChange
            self.profiles = profiles
            self.filters = filters
            self.writesNotifications = writesNotifications
            self.now = now
            self.timeZone = timeZone
            self.shard = shard
            self.maxPerFilter = maxPerFilter
            self.dryRun = dryRun
            self.retentionDays = retentionDays
        }

        /// `parameters`, for tests outside the module.
        public var parametersForTesting: String { parameters }

        /// The selection in a stable text form: an interrupted backfill is resumed only by the same one.
        var parameters: String {
            let profilePart: String
            switch profiles {
            case .all: profilePart = "all"
            case .changed(let from, let to):
                profilePart =
                    "changed \(from.map(\.iso8601) ?? "the first")..<\(to.map(\.iso8601) ?? "the backfill's clock")"
            }
            let filterPart: String
            switch filters {
            case .all: filterPart = "all"
            case .ids(let ids): filterPart = "ids " + ids.sorted().map(String.init).joined(separator: ",")
            case .owners(let ids): filterPart = "owners " + ids.sorted().map(String.init).joined(separator: ",")
            }
            return JSONText.encode(
                StoredSelection(profiles: profilePart, filters: filterPart, notify: writesNotifications))
        }

        /// The stored form's keys (`matcher_runs.parameters`, read by operators and by `sameParameters`).
        private struct StoredSelection: Encodable {
            let profiles: String
            let filters: String
            let notify: Bool
        }
    }

    /// Whether two stored selections are the same backfill: compared as JSON values, not as text, since
    /// a store may give them back reformatted (PostgreSQL's jsonb reorders keys and respaces).
    static func sameParameters(_ a: String, _ b: String) -> Bool {
        if a == b { return true }
        guard let left = try? JSONValue.parse(a), let right = try? JSONValue.parse(b) else { return false }
        return left == right
    }

    /// A selection that names what is not there (cli.md: a bad flag value, exit 64): a filter id that no saved
    /// filter has, an owner id that no profile has, a window of changes that starts at or after the backfill's
    /// clock, or a list that leaves this shard nothing to backfill (every filter deleted, every owner without
    /// filters, all of them another shard's). Refused before anything is written: a mistyped id would otherwise
    /// "succeed" with nothing done (and its run row and retention sweep). A deleted filter or another shard's
    /// in a list that still has work here is skipped and said (`RunEvent.selectionSkipped`): users delete
    /// filters every day, and one list given to every shard of a layout is each shard's part.
    public struct SelectionRefused: ClassifiedError, CustomStringConvertible {
        public let problems: [String]
        public var failureKind: FailureKind { .usage }
        public var description: String { "backfill refused, nothing written: " + problems.joined(separator: "; ") }
    }

    /// Refuses a selection by `--filter` or `--owner` that names what does not exist, or that leaves this shard
    /// nothing to backfill; says which listed filters or owners it skips. Returns the owners of the filters it
    /// chose (nil for all filters).
    private func checkSelection(_ input: Input) throws -> Set<Int64>? {
        let filterRepository = pass.repositories.filters
        let shard = input.shard
        /// Owner `owner`'s shard in the layout of `shard`.
        func shardOf(_ owner: Int64) -> String {
            let n = Int64(shard.count)
            return "\(((owner % n) + n) % n)/\(n)"
        }
        // Per listed id or owner not chosen, in order: what is wrong, and whether it exists at all.
        var found: [(problem: String, exists: Bool)] = []
        let chosen = try filterRepository.filters(input.filters, shard: shard, afterId: nil)
        switch input.filters {
        case .all:
            return nil
        case .ids(let ids):
            let chosenIds = Set(chosen.map(\.id))
            for id in Set(ids).sorted() where !chosenIds.contains(id) {
                guard let filter = try filterRepository.filter(id: id) else {
                    found.append(("--filter \(id): no saved filter has this id", false))
                    continue
                }
                if filter.isDeleted {
                    found.append(("--filter \(id): the filter is deleted", true))
                } else if filter.quarantineReason != nil {
                    found.append(
                        ("--filter \(id): its row cannot be read (quarantined; shard 0/\(shard.count) lists it)", true))
                } else {
                    found.append(
                        (
                            "--filter \(id): its owner \(filter.ownerId) is in shard \(shardOf(filter.ownerId)), not \(shard)",
                            true
                        ))
                }
            }
        case .owners(let owners):
            let missing = Set(owners).subtracting(chosen.map(\.ownerId)).sorted()
            let withFilters = Set(try filterRepository.filters(ownedBy: missing).map(\.ownerId))
            for owner in missing {
                if withFilters.contains(owner) {
                    found.append(("--owner \(owner): is in shard \(shardOf(owner)), not \(shard)", true))
                    continue
                }
                let hasProfile: Bool
                do {
                    hasProfile = try pass.repositories.profiles.profile(id: owner) != nil
                } catch is UnreadableProfile {
                    hasProfile = true
                }
                found.append(
                    hasProfile
                        ? ("--owner \(owner): owns no saved filter (not deleted)", true)
                        : ("--owner \(owner): no profile has this id", false))
            }
        }
        // What exists is skipped while this shard has something else of the list to do.
        let problems = found.filter { !$0.exists || chosen.isEmpty }.map(\.problem)
        if !problems.isEmpty { throw SelectionRefused(problems: problems) }
        if !found.isEmpty { output.handle(.selectionSkipped(found.map(\.problem))) }
        // A quarantined filter is not evaluated, and its owner id may be a stand-in: not an owner to hold to a zone.
        return Set(chosen.filter { $0.quarantineReason == nil }.map(\.ownerId))
    }

    let pass: MatchingPass

    public init(
        _ repositories: MatchingRepositories, engine: any MatchEngine = BitsetMatchEngine(),
        output: any RunOutputHandler = SilentRunOutput(), options: PassOptions = PassOptions()
    ) {
        pass = MatchingPass(repositories: repositories, engine: engine, output: output, options: options)
    }

    /// The settings of `input` (given or by default: a default cannot be told from a value given) that differ
    /// from those `interrupted` keeps when it is resumed, each as what it keeps and what `input` has.
    static func settingsNotUsed(_ input: Input, resuming interrupted: RunRecord) -> [String] {
        var notUsed: [String] = []
        if let now = input.now, now != interrupted.clock {
            notUsed.append("--now: it keeps \(interrupted.clock.iso8601), not this backfill's \(now.iso8601)")
        }
        if input.maxPerFilter != interrupted.maxPerFilter {
            notUsed.append(
                "--max-per-filter: it keeps \(interrupted.maxPerFilter), not this backfill's \(input.maxPerFilter)")
        }
        if let days = input.retentionDays, let kept = interrupted.retentionDays, days != kept {
            notUsed.append("--retention-days: it keeps \(kept), not this backfill's \(days)")
        }
        if let kept = interrupted.timeZone, kept != input.timeZone.identifier {
            notUsed.append("--time-zone: it keeps \(kept), not this backfill's \(input.timeZone.identifier)")
        }
        return notUsed
    }

    public func execute(_ input: Input) throws -> RunSummary {
        let lock = try runs.lock(.backfill, input.shard, dryRun: input.dryRun)
        defer { lock?.release() }
        var timer = PhaseTimer()
        let zone = input.timeZone.identifier
        let retentionDays = try Retention.days(input.retentionDays, runs: runs, output: output)
        // The same selection, interrupted: resumed at its own clock (which also closes an open-ended window of
        // changed profiles where it did) and in its own zone.
        let latestInterrupted = input.dryRun ? nil : try runs.interruptedRun(kind: .backfill, shard: input.shard)
        // Claimed before it resumes (`RunMatching`): a process still writing it stops at its next unit.
        let interrupted = try latestInterrupted.flatMap {
            Self.sameParameters($0.parameters, input.parameters) ? try runs.claim(runId: $0.id) : nil
        }
        if interrupted == nil {  // a resumed one keeps its own zone and selection; a new one, before it reads anything
            let owners = try checkSelection(input)
            // Held to the zones of the owners it evaluates for: a backfill of one filter is not refused because
            // another shard of its layout runs in another zone (review of session 34).
            let coverage = try runs.coverage()
            try TimeZoneChanged.check(
                owners.map { coverage.inUse(byOwners: $0) } ?? coverage.inUse(by: input.shard), shard: input.shard,
                kind: .backfill, zone: input.timeZone, accepting: input.timeZoneChange)
        }
        let now = try interrupted?.clock ?? input.now ?? profiles.currentTime()
        if interrupted == nil, case .changed(let from?, _) = input.profiles, from >= now {
            throw SelectionRefused(
                problems: [
                    "--changed-since \(from.iso8601) is not before the backfill's clock \(now.iso8601):"
                        + " the window holds no change"
                ])
        }
        timer.begin(.read, output)
        let candidates = try runs.failingClaimed(interrupted) {
            CandidateProfiles(try profiles.profiles(input.profiles.upTo(now)))
        }
        timer.end(.read, output)
        output.handle(.candidatesLoaded(candidates.count))

        if let interrupted {
            let notUsed = Self.settingsNotUsed(input, resuming: interrupted)
            if !notUsed.isEmpty { output.handle(.resumedWithItsOwnSettings(runId: interrupted.id, notUsed: notUsed)) }
            output.handle(
                .started(
                    kind: .backfill, shard: input.shard, clock: interrupted.clock, runId: interrupted.id,
                    resumed: true, dryRun: false))
            let plan = MatchingPass.Plan.resuming(
                interrupted, zone: input.timeZone, shard: input.shard, selection: input.filters, windows: .all,
                retentionDays: retentionDays)
            return try pass.finishing(
                interrupted, timer: timer, resumedId: interrupted.id, retentionDays: plan.retentionDays
            ) { timer in
                try pass.execute(plan, candidates: candidates, timings: &timer)
            }
        }

        let clock = EvaluationClock(now: now, timeZone: input.timeZone)
        let plan = { (run: RunRecord?) in
            MatchingPass.Plan(
                run: run, clock: clock, shard: input.shard, selection: input.filters,
                maxPerFilter: input.maxPerFilter, writesNotifications: input.writesNotifications,
                resumeAfterFilter: nil, windows: .all, retentionDays: retentionDays)
        }
        if input.dryRun {
            output.handle(
                .started(kind: .backfill, shard: input.shard, clock: now, runId: nil, resumed: false, dryRun: true))
            return try pass.dryRun(plan(nil), kind: .backfill, candidates: candidates, timer: timer)
        }

        // Another selection's backfill, killed (`running`, and this process holds the shard's backfill lock): once
        // this one starts, none resumes it. What it committed stays; a failed one keeps its status.
        if let stale = latestInterrupted, interrupted == nil, stale.status == .running,
            !Self.sameParameters(stale.parameters, input.parameters)
        {
            try runs.abandon(runId: stale.id)
            output.handle(.interruptedBackfillAbandoned(runId: stale.id))
        }
        let run = try runs.start(
            NewRun(
                kind: .backfill, shard: input.shard, clock: now, maxPerFilter: input.maxPerFilter,
                writesNotifications: input.writesNotifications, coverage: nil, upTo: nil, upToTakenAt: nil,
                timeZone: zone,
                retentionDays: retentionDays, parameters: input.parameters, candidates: candidates.count))
        output.handle(
            .started(kind: .backfill, shard: input.shard, clock: now, runId: run.id, resumed: false, dryRun: false))
        return try pass.finishing(run, timer: timer, resumedId: nil, retentionDays: retentionDays) { timer in
            try pass.execute(plan(run), candidates: candidates, timings: &timer)
        }
    }
}
