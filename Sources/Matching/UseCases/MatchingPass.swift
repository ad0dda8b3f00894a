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
    }

    struct Outcome {
        let counters: RunCounters
        let matchesFound: Int
    }

    func execute(_ plan: Plan, candidates: CandidateProfiles, timings: inout PhaseTimer) throws -> Outcome {
        // Read: the shard's filters, their owners and the blocks.
        timings.begin(.read, output)
        let chosen = try filters.filters(plan.selection, shard: plan.shard, afterId: plan.resumeAfterFilter)
        let owners = try profiles.owners(ids: Array(Set(chosen.map(\.ownerId))))
        // The blocks with a candidate on one side: every pair the run evaluates has one (the waiting
        // matches' profiles are added for the digests, `DigestFindings`).
        let blockSet = try blocks.blocks(involving: candidates.columns.ids)
        timings.end(.read, output)
        // Hostile rows (issue 14): odd and unreadable rows are counted and reported, never a failure.
        let readIssues = ReadIssues(candidates: candidates.columns, filters: chosen, owners: owners)
        for row in readIssues.quarantined { output.handle(.quarantined(row)) }

        // Every connection units may be written on is opened once, for the probe of recorded pairs and for
        // the writes: both are server work, a core per connection.
        return try matches.withUnitWriters(shortfall: { output.handle(.writersUnavailable($0)) }) { connections in
            try evaluateAndWrite(
                plan, candidates: candidates, chosen: chosen, owners: owners, blockSet: blockSet,
                readIssues: readIssues, connections: connections, timings: &timings)
        }
    }

    private func evaluateAndWrite(
        _ plan: Plan, candidates: CandidateProfiles, chosen: [SavedFilter], owners: [Int64: FilterOwner],
        blockSet: BlockSet, readIssues: ReadIssues, connections: [any MatchRepository], timings: inout PhaseTimer
    ) throws -> Outcome {
        // Evaluate, then keep only the pairs not recorded yet.
        timings.begin(.evaluate, output)
        let prepared = PreparedFilters(chosen, owners: owners, windows: plan.windows)
        for record in prepared.invalid { output.handle(.invalidFilter(record)) }
        output.handle(
            .filtersLoaded(
                total: chosen.count, invalid: prepared.invalid.count,
                paidIgnored: prepared.paidIgnored, ownerInactive: prepared.ownerInactive))
        let evaluation = WindowedEvaluation(
            engine: engine, candidates: candidates, clock: plan.clock,
            limit: plan.maxPerFilter, blocks: blockSet)
        let results = try NewPairSelection(evaluation: evaluation, probers: connections).select(prepared)
        timings.end(.evaluate, output)
        let found = results.values.reduce(0) { $0 + $1.count }

        guard let run = plan.run else {
            return Outcome(
                counters: prepared.counted.values.reduce(.zero, +) + readIssues.counters, matchesFound: found)
        }

        // What the digests need: the waiting matches that still qualify, and which pairs are mutual.
        timings.begin(.evaluate, output)
        let findings = try DigestFindings.gather(
            prepared: prepared, chosen: chosen, found: results, plan: plan, blocks: blockSet,
            repositories: repositories, engine: engine, candidates: candidates.columns)
        timings.end(.evaluate, output)

        // Write, in units of work: each commits its matches, the digests they make due, its counters and the
        // run's cursor together, so a crash at any instant loses and duplicates nothing.
        timings.begin(.write, output)
        try filters.recordValidation(invalid: prepared.invalid, validIds: prepared.validIds, runId: run.id)
        try runs.recordReadIssues(readIssues, runId: run.id)
        let writer = UnitWriter(
            output: output, stop: options.stop, run: run, plan: plan,
            lastLogins: candidates.lastLogins, readAt: candidates.readAt, filtersTotal: chosen.count,
            findings: findings)
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

/// The candidates of a run, columnar, with the change windows each is new to.
struct CandidateProfiles {
    let columns: ProfileColumns
    /// Per row, bit `w` set when the profile is new to window `w`; nil when every row is new to every window.
    let windowMasks: [UInt64]?
    /// The snapshot they were read in, when the store can tell which profiles changed since (`ChangedProfiles`).
    let readAt: ChangeMark?

    init(_ columns: ProfileColumns, windowMasks: [UInt64]? = nil, readAt: ChangeMark? = nil) {
        self.columns = columns
        self.windowMasks = windowMasks
        self.readAt = readAt
    }

    var count: Int { columns.count }

    /// `last_login_at` by profile id, to order digests of new matches.
    var lastLogins: [Int64: Timestamp] {
        var logins: [Int64: Timestamp] = [:]
        logins.reserveCapacity(columns.count)
        for (id, at) in zip(columns.ids, columns.lastLoginAt) { logins[id] = Timestamp(microsecondsSinceEpoch: at) }
        return logins
    }

    /// The active candidates new to `window`, in the cap's order.
    func batch(forWindow window: Int) -> CandidateBatch {
        guard let windowMasks else { return CandidateBatch(columns) }
        let bit = UInt64(1) << UInt64(window)
        let rows = windowMasks.indices.filter { windowMasks[$0] & bit != 0 }
        return CandidateBatch(rows.count == columns.count ? columns : columns.selecting(rows: rows))
    }
}

/// Which profiles each filter considers (runs.md "Incremental run", "Shards"): window `w` < `coverage.entries.count`
/// holds the profiles changed after that entry's mark; the last window, when present, every profile (owners
/// that no run ever covered).
struct ChangeWindows {
    let coverage: Coverage
    let includesUncovered: Bool

    /// A read marks each candidate with one bit per window in a 64-bit mask.
    static let maximumCount = 64

    /// A backfill's: one window, every candidate.
    static let all = ChangeWindows(coverage: .none, includesUncovered: true)

    /// The windows of a run of `shard` from `coverage` (already restricted to the shard).
    init(coverage: Coverage, shard: Shard) {
        self.coverage = coverage
        self.includesUncovered = !coverage.coversWholly(shard)
    }

    private init(coverage: Coverage, includesUncovered: Bool) {
        self.coverage = coverage
        self.includesUncovered = includesUncovered
    }

    /// Every filter considers every profile: the service's first run (under any layout), a backfill.
    var everyProfileForEveryFilter: Bool { coverage.entries.isEmpty && includesUncovered }

    /// The marks to read candidates for, window by window (nil: every profile).
    var marks: [ChangeMark?] {
        coverage.entries.map(\.mark) + (includesUncovered ? [nil] : [])
    }

    /// The window of an owner's filters.
    func window(forOwner ownerId: Int64) -> Int {
        coverage.entryIndex(forOwner: ownerId) ?? coverage.entries.count
    }
}

/// The chosen filters made ready: decoded and validated (invalid ones recorded), owners checked, the
/// owner's plan applied, each assigned its change window.
struct PreparedFilters: Sendable {
    private(set) var byWindow: [Int: [PreparedFilter]] = [:]
    /// Where each filter is in `byWindow`: a lookup by id without a second copy of every filter (a
    /// `PreparedFilter` is a few hundred bytes; a daily run at 200k x 20k held 14 MB of them in two copies).
    private var positions: [Int64: (window: Int, index: Int)] = [:]
    private(set) var invalid: [InvalidFilter] = []
    private(set) var validIds: [Int64] = []
    /// What each filter adds to the run's counters.
    private(set) var counted: [Int64: RunCounters] = [:]
    private(set) var paidIgnored = 0
    private(set) var ownerInactive = 0
    private(set) var suspended = 0

    init(_ chosen: [SavedFilter], owners: [Int64: FilterOwner], windows: ChangeWindows) {
        for (filter, decoded) in zip(chosen, Self.decode(chosen)) {
            guard let decoded else { continue }  // unreadable: in readIssues, never evaluated
            let conditions: FilterConditions
            switch decoded {
            case .success(let value):
                conditions = value
            case .failure(let error):
                invalid.append(InvalidFilter(filterId: filter.id, ownerId: filter.ownerId, error: error))
                counted[filter.id] = RunCounters(filtersInvalid: 1)
                continue
            }
            validIds.append(filter.id)
            guard let owner = owners[filter.ownerId], owner.isActive else {
                ownerInactive += 1
                continue
            }
            if conditions.isSuspended(forOwnerPlan: owner.plan) {
                suspended += 1  // matches nothing, sends nothing, until the owner pays again
                counted[filter.id] = RunCounters(filtersSuspended: 1)
                continue
            }
            let effective = conditions.effective(forOwnerPlan: owner.plan)
            let lapsed = effective.ignoredPaidKeys.isEmpty ? 0 : 1
            paidIgnored += lapsed
            counted[filter.id] = RunCounters(filtersEvaluated: 1, filtersPaidIgnored: lapsed)
            let ready = PreparedFilter(filter: filter, owner: owner, conditions: effective.conditions)
            let window = windows.window(forOwner: owner.id)
            positions[filter.id] = (window, byWindow[window]?.count ?? 0)
            byWindow[window, default: []].append(ready)
        }
    }

    /// The prepared filter with this id, if it was prepared.
    subscript(id: Int64) -> PreparedFilter? {
        placed(id)?.filter
    }

    /// The prepared filter with this id and its change window, if it was prepared.
    func placed(_ id: Int64) -> (window: Int, filter: PreparedFilter)? {
        positions[id].flatMap { position in byWindow[position.window].map { (position.window, $0[position.index]) } }
    }

    /// Every prepared filter, window by window.
    var all: FlattenSequence<Dictionary<Int, [PreparedFilter]>.Values> { byWindow.values.joined() }
}

extension PreparedFilters {
    /// Each filter's conditions decoded and validated (nil for a quarantined filter), on all cores: parsing
    /// the JSON of 10k filters takes 0.1 s on one.
    static func decode(_ chosen: [SavedFilter]) -> [Result<FilterConditions, FilterValidationError>?] {
        let chunkSize = 256
        let chunks = (chosen.count + chunkSize - 1) / chunkSize
        guard chunks > 1 else { return chosen.map(decode) }
        let slots = ResultSlots<[Result<FilterConditions, FilterValidationError>?]>(count: chunks)
        DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
            let lower = chunk * chunkSize
            slots.set(chunk, chosen[lower..<min(chosen.count, lower + chunkSize)].map(decode))
        }
        return Array(slots.values().joined())
    }

    private static func decode(_ filter: SavedFilter) -> Result<FilterConditions, FilterValidationError>? {
        guard filter.quarantineReason == nil else { return nil }
        return Result { () throws(FilterValidationError) in try filter.decodedConditions() }
    }
}

/// The engine over each change window's candidates.
struct WindowedEvaluation {
    let engine: any MatchEngine
    let candidates: CandidateProfiles
    let clock: EvaluationClock
    let limit: Int
    let blocks: BlockSet

    /// Each filter's first `limit` candidates of its window in the cap's order, leaving out `recorded`.
    func evaluate(_ byWindow: [Int: [PreparedFilter]], recorded: Set<MatchPair> = []) -> [Int64: [Int64]] {
        var found: [Int64: [Int64]] = [:]
        for (window, filters) in byWindow.sorted(by: { $0.key < $1.key }) where !filters.isEmpty {
            let results = engine.evaluate(
                filters, against: candidates.batch(forWindow: window), limit: limit,
                clock: clock, exclusions: MatchExclusions(existing: recorded, blocks: blocks))
            for result in results { found[result.filterId] = result.profileIds }
        }
        return found
    }
}

/// Keeps, for each filter, its first `limit` candidates whose pair is not recorded yet (runs.md: "a pair not
/// already in filter_matches"). Only the pairs the engine chose are probed, so the cost follows the day's
/// work, never the history; a filter that loses chosen pairs to the probe while more candidates qualify is
/// evaluated again without them, until its answer holds only new pairs.
struct NewPairSelection {
    let evaluation: WindowedEvaluation
    /// The connections the probe asks on at once (`MatchRepository.withUnitWriters`).
    let probers: [any MatchRepository]
    /// Pairs per probe: memory stays small however many pairs a run chooses.
    var probeChunk = 50_000

    func select(_ prepared: PreparedFilters) throws -> [Int64: [Int64]] {
        var results = evaluation.evaluate(prepared.byWindow)
        var recorded = Set<MatchPair>()  // found recorded so far: the day's re-matches, few
        var probed: [Int64: [Int64]] = [:]  // for filters evaluated again: what was probed already, ascending
        var toCheck = results.keys.sorted()
        while !toCheck.isEmpty {
            let found = try probe(toCheck, results, probed)
            guard !found.isEmpty else { break }
            recorded.formUnion(found)
            var again: [Int: [PreparedFilter]] = [:]
            for filterId in Set(found.map(\.filterId)) {
                let ids = results[filterId] ?? []
                if ids.count >= evaluation.limit, let (window, filter) = prepared.placed(filterId) {
                    // More may qualify beyond the cap: evaluate again without the recorded pairs.
                    probed[filterId] = Self.ascendingUnion(probed[filterId] ?? [], ids)
                    again[window, default: []].append(filter)
                } else {
                    results[filterId] = ids.filter { !found.contains(MatchPair(filterId: filterId, profileId: $0)) }
                }
            }
            let refilled = evaluation.evaluate(again, recorded: recorded)
            results.merge(refilled) { _, new in new }
            toCheck = refilled.keys.sorted()
        }
        return results
    }

    /// `probed` (ascending) with `ids` added, ascending, each once. A sorted array, not a `Set`: a filter
    /// evaluated again holds its whole answer here (100 ids by default), and at 200k x 20k the sets of a late
    /// soak day's capped filters held 11.6 MB at the run's peak, about four times the ids' own size.
    static func ascendingUnion(_ probed: [Int64], _ ids: [Int64]) -> [Int64] {
        var merged = probed + ids
        merged.sort()
        var unique: [Int64] = []
        unique.reserveCapacity(merged.count)
        for id in merged where unique.last != id { unique.append(id) }
        return unique
    }

    /// The recorded pairs among the answers of `filterIds`, leaving out what was probed before: chunk by chunk,
    /// on every prober at once (the day's millions of primary-key probes are server work, a core per
    /// connection), a chunk per prober in memory.
    private func probe(
        _ filterIds: [Int64], _ results: [Int64: [Int64]], _ probed: [Int64: [Int64]]
    ) throws
        -> Set<MatchPair>
    {
        let chunks = PairChunks(filterIds: filterIds, results: results, probed: probed, size: probeChunk)
        let found = ResultSlots<Set<MatchPair>>(count: probers.count)
        let probers = self.probers
        try SlotThreads.run(probers.count) { slot in
            var recorded = Set<MatchPair>()
            do {
                while let chunk = chunks.next() { recorded.formUnion(try probers[slot].recordedPairs(among: chunk)) }
            } catch {
                chunks.stop()  // the run fails with this error: the other connections stop after their chunk
                throw error
            }
            found.set(slot, recorded)
        }
        return found.values().reduce(into: Set<MatchPair>()) { $0.formUnion($1) }
    }
}

/// The pairs a probe asks about, handed out a chunk at a time to whichever connection asks next.
final class PairChunks: @unchecked Sendable {
    private let lock = NSLock()
    private let filterIds: [Int64]
    private let results: [Int64: [Int64]]
    private let probed: [Int64: [Int64]]  // ascending
    private let size: Int
    private var filterIndex = 0
    private var profileIndex = 0

    init(filterIds: [Int64], results: [Int64: [Int64]], probed: [Int64: [Int64]], size: Int) {
        self.filterIds = filterIds
        self.results = results
        self.probed = probed
        self.size = max(1, size)
    }

    /// Hands out nothing more.
    func stop() {
        lock.lock()
        defer { lock.unlock() }
        filterIndex = filterIds.count
    }

    /// The next chunk (at most `size` pairs, in filter order), or nil when every pair was handed out.
    func next() -> [MatchPair]? {
        lock.lock()
        defer { lock.unlock() }
        var chunk: [MatchPair] = []
        chunk.reserveCapacity(size)
        while filterIndex < filterIds.count {
            let filterId = filterIds[filterIndex]
            let ids = results[filterId] ?? []
            let seen = probed[filterId]
            while profileIndex < ids.count {
                let profileId = ids[profileIndex]
                profileIndex += 1
                if seen?.sortedContains(profileId) ?? false { continue }
                chunk.append(MatchPair(filterId: filterId, profileId: profileId))
                if chunk.count >= size { return chunk }
            }
            filterIndex += 1
            profileIndex = 0
        }
        return chunk.isEmpty ? nil : chunk
    }
}

/// Runs `body(slot)` for every slot in `0..<count`, each on a thread of its own rather than Dispatch's pool
/// (whose threads are one a core: a slot blocks on its database connection while the others work), and
/// returns when all have. Throws the error of the lowest slot that threw; the other slots run to their end.
package enum SlotThreads {
    package static func run(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) throws {
        guard count > 1 else {
            if count == 1 { try body(0) }
            return
        }
        let errors = ResultSlots<(any Error)?>(count: count)
        let done = DispatchGroup()
        for slot in 0..<count {
            done.enter()
            let thread = Thread {
                defer { done.leave() }
                do {
                    try body(slot)
                    errors.set(slot, nil)
                } catch {
                    errors.set(slot, error)
                }
            }
            thread.stackSize = 8 << 20
            thread.start()
        }
        done.wait()
        if let error = errors.values().lazy.compactMap({ $0 }).first { throw error }
    }
}

/// Commits units of work through `UnitCommitter` and reports progress. Units are written on every writer the
/// store offers at once (`MatchRepository.withUnitWriters`: the server's work on its rows is most of a run's
/// write, and each connection is a core of its own), and committed strictly in filter-id order: a unit
/// whose rows are written waits, inside its open transaction, until every earlier unit has committed, so
/// the run's cursor only ever moves past committed work and a crash at any instant loses and doubles nothing.
final class UnitWriter: @unchecked Sendable {
    /// The filters gathered for one unit.
    struct Pending: Sendable {
        var matches: [FilterResult] = []
        var notify: [NotificationCandidateFilter] = []
        var counters = RunCounters.zero
        var matchCount = 0
        var filterCount = 0
        /// The last filter id the unit covers: the run's cursor once it commits.
        var lastFilterId: Int64 = 0

        mutating func add(filter id: Int64, counters: RunCounters, prepared: PreparedFilter?, found: [Int64]) {
            filterCount += 1
            lastFilterId = id
            self.counters = self.counters + counters
            guard let prepared else { return }
            if !found.isEmpty {
                matches.append(FilterResult(filterId: id, profileIds: found))
                matchCount += found.count
            }
            notify.append(NotificationCandidateFilter(filter: prepared.filter, owner: prepared.owner))
        }
    }

    private let output: any RunOutputHandler
    private let stop: StopRequest
    private let run: RunRecord
    private let plan: MatchingPass.Plan
    private let lastLogins: [Int64: Timestamp]
    private let readAt: ChangeMark?
    private let filtersTotal: Int
    private let findings: DigestFindings
    private let committer = UnitCommitter()
    /// Guarded by the commit order's lock once writing starts.
    private(set) var written = RunCounters.zero
    private var done = 0

    init(
        output: any RunOutputHandler, stop: StopRequest, run: RunRecord,
        plan: MatchingPass.Plan, lastLogins: [Int64: Timestamp], readAt: ChangeMark?, filtersTotal: Int,
        findings: DigestFindings
    ) {
        self.readAt = readAt
        self.findings = findings
        self.output = output
        self.stop = stop
        self.run = run
        self.plan = plan
        self.lastLogins = plan.writesNotifications ? lastLogins : [:]
        self.filtersTotal = filtersTotal
    }

    /// Writes `units` (in filter-id order) on `writers` at once (`MatchRepository.withUnitWriters`); throws the
    /// first failure, after every earlier unit has committed.
    func write(_ units: [Pending], on writers: [any MatchRepository]) throws {
        guard !units.isEmpty else { return }
        let order = CommitOrder(units: units.count)
        let slots = max(1, min(writers.count, units.count))
        let busy = DispatchSemaphore(value: Self.busyLimit(writers: slots))
        try SlotThreads.run(slots) { [self] slot in
            let writer = writers[slot]
            while let index = order.take() {
                do {
                    try commit(units[index], index: index, on: writer, order: order, busy: busy)
                } catch {
                    order.fail(index, error)
                    return
                }
            }
        }
        if let failure = order.failure { throw failure }
    }

    /// How many units write their rows at once: one a core, at most one a connection. A connection beyond
    /// that lets the next unit write while earlier ones wait for their turn and their commit's flush.
    static func busyLimit(writers: Int) -> Int {
        max(1, min(writers, ProcessInfo.processInfo.activeProcessorCount))
    }

    /// How many times a unit is written before a conflict with another writer fails the run.
    static let conflictAttempts = 3

    /// Commits `unit`; a transaction the database gave up for a conflict with another writer (a deadlock
    /// between this run and a `backfill --notify`, which write the same filters' rows in different orders) rolled
    /// back whole, so the unit is written again after a short pause, up to `conflictAttempts` times. The
    /// unit's turn in the commit order is still its own: no later unit commits before it.
    private func commit(
        _ unit: Pending, index: Int, on writer: any MatchRepository, order: CommitOrder, busy: DispatchSemaphore
    ) throws {
        var attempt = 1
        while true {
            do {
                try commitOnce(unit, index: index, on: writer, order: order, busy: busy)
                return
            } catch let error as any ClassifiedError where error.isWriteConflict && attempt < Self.conflictAttempts {
                attempt += 1
                order.serialized {
                    output.handle(
                        .unitRetried(
                            lastFilterId: unit.lastFilterId, attempt: attempt, attempts: Self.conflictAttempts,
                            reason: String(describing: error)))
                }
                // The other writer goes on once this transaction is gone; a pause that grows lets it finish.
                Thread.sleep(forTimeInterval: 0.05 * Double(attempt - 1) * Double.random(in: 1...2))
            }
        }
    }

    private func commitOnce(
        _ unit: Pending, index: Int, on writer: any MatchRepository, order: CommitOrder, busy: DispatchSemaphore
    ) throws {
        busy.wait()
        var holding = true
        defer { if holding { busy.signal() } }
        if let reason = stop.requestedReason { throw RunStopped(reason: reason, runId: run.id) }
        let outcome = try committer.commit(
            WorkUnit(
                runId: run.id, clock: plan.clock, lastFilterId: unit.lastFilterId, matches: unit.matches,
                notify: plan.writesNotifications ? unit.notify : nil, filterCounters: unit.counters,
                lastLoginAt: lastLogins, silent: !plan.writesNotifications,
                qualifyingWaiting: findings.qualifyingWaiting, unqualifiedWaiting: findings.unqualifiedWaiting,
                mutual: findings.mutual, readAt: readAt,
                bulk: plan.windows.everyProfileForEveryFilter),
            to: writer,
            beforeAdvance: {
                holding = false
                busy.signal()
                try order.waitForTurn(index)
            })
        order.committed(index) {
            written =
                written + unit.counters
                + RunCounters(
                    matchesWritten: outcome.matchesWritten,
                    notificationsWritten: outcome.notificationsWritten,
                    digestsHeldBack: outcome.digestsHeldBack,
                    matchesMutual: outcome.mutualWritten)
            done += unit.filterCount
            output.handle(
                .unitCommitted(
                    filtersDone: done, filtersTotal: filtersTotal, matches: written.matchesWritten,
                    notifications: written.notificationsWritten))
        }
    }
}

/// The order units commit in, shared by the writers: unit `i` is handed out once, and commits only after units
/// `0..<i` have. After a unit fails no unit is handed out; the units before it still commit (their work is
/// valid and earlier), and the units after it give up at their turn, so their transactions roll back.
final class CommitOrder: @unchecked Sendable {
    private let condition = NSCondition()
    private let count: Int
    private var handedOut = 0
    private var committedCount = 0
    /// The earliest failed unit and its error.
    private var earliestFailure: (index: Int, error: any Error)?

    init(units: Int) { count = units }

    /// The next unit to write, or nil when none is left or a unit failed.
    func take() -> Int? {
        condition.lock()
        defer { condition.unlock() }
        guard earliestFailure == nil, handedOut < count else { return nil }
        handedOut += 1
        return handedOut - 1
    }

    /// Returns when every unit before `index` has committed; throws when one of them failed.
    func waitForTurn(_ index: Int) throws {
        condition.lock()
        defer { condition.unlock() }
        while committedCount < index, (earliestFailure?.index ?? Int.max) > index { condition.wait() }
        guard committedCount == index else { throw EarlierUnitFailed() }
    }

    /// Records unit `index` committed, running `account` (the writer's bookkeeping) under the lock, in order.
    func committed(_ index: Int, account: () -> Void) {
        condition.lock()
        defer { condition.unlock() }
        committedCount = index + 1
        account()
        condition.broadcast()
    }

    /// Runs `body` under the order's lock: what writers report between commits stays in order with them.
    func serialized(_ body: () -> Void) {
        condition.lock()
        defer { condition.unlock() }
        body()
    }

    /// Records that unit `index` failed; the earliest failure is the run's.
    func fail(_ index: Int, _ error: any Error) {
        condition.lock()
        defer { condition.unlock() }
        if !(error is EarlierUnitFailed), index < (earliestFailure?.index ?? Int.max) {
            earliestFailure = (index, error)
        }
        condition.broadcast()
    }

    var failure: (any Error)? {
        condition.lock()
        defer { condition.unlock() }
        return earliestFailure?.error
    }

    /// A unit that would commit after a failed one: rolled back, never reported (the failure is).
    struct EarlierUnitFailed: Error {}
}

extension MatchingPass {
    /// Runs `body` for a recorded run, then forgets the pairs past retention: marks the run succeeded when
    /// both return, failed (resumable by the next run) when either throws, and summarizes it with the
    /// counters of all its attempts.
    func finishing(
        _ run: RunRecord, timer: PhaseTimer, resumedId: Int64?, retentionDays: Int,
        _ body: (inout PhaseTimer) throws -> Outcome
    ) throws -> RunSummary {
        var timer = timer
        let outcome: Outcome
        var forgotten = 0
        do {
            outcome = try body(&timer)
            timer.begin(.forget, output)
            forgotten = try forgetExpired(clock: run.clock, retentionDays: retentionDays)
            timer.end(.forget, output)
            try runs.finish(runId: run.id, RunCompletion(phaseSeconds: timer.seconds, matchesForgotten: forgotten))
        } catch {
            try? runs.fail(runId: run.id, error: String(describing: error))
            throw error
        }
        let counters = (try runs.run(id: run.id)?.counters ?? outcome.counters)
        return summarize(
            runId: run.id, kind: run.kind, shard: run.shard, clock: run.clock, dryRun: false,
            resumedId: resumedId, counters: counters, found: counters.matchesWritten, timer: timer)
    }

    /// The retention sweep (runs.md): pairs recorded more than `retentionDays` before the run's clock,
    /// in bounded batches; a service-wide backlog is left to the next runs rather than growing one.
    private func forgetExpired(clock: Timestamp, retentionDays: Int) throws -> Int {
        let cutoff = clock.adding(microseconds: -Int64(clamping: retentionDays) &* Timestamp.microsecondsPerDay)
        let outcome = try matches.forgetExpired(
            before: cutoff, batchSize: Retention.batchSize,
            maxBatches: Retention.maxBatchesPerRun)
        if let outcome { output.handle(.forgotten(outcome)) }
        return outcome?.forgotten ?? 0
    }

    func summarize(
        runId: Int64?, kind: RunKind, shard: Shard, clock: Timestamp, dryRun: Bool,
        resumedId: Int64?, counters: RunCounters, found: Int, timer: PhaseTimer
    ) -> RunSummary {
        let summary = RunSummary(
            runId: runId, kind: kind, shard: shard, clock: clock, dryRun: dryRun,
            resumedRunId: resumedId, counters: counters, matchesFound: found,
            phaseSeconds: timer.seconds, totalSeconds: timer.total)
        output.handle(.finished(summary))
        return summary
    }
}

/// Retention's defaults and bounds (runs.md, cli.md `--retention-days`).
public enum Retention {
    /// A new service's retention. Later, a run or backfill without `--retention-days` keeps the retention of the
    /// service's latest incremental run (`days(_:runs:)`): one started by hand never shortens it.
    public static let defaultDays = 180
    public static let maximumDays = 36_500
    /// Pairs deleted per transaction: short row locks, no table lock.
    public static let batchSize = 50_000
    /// At most this many batches a run (5M pairs); a larger backlog is worked off by the next runs.
    public static let maxBatchesPerRun = 100

    /// The retention a run or backfill applies: `given` (the operator's `--retention-days`), or the latest
    /// incremental run's, or `defaultDays` for a new service. The sweep forgets every filter's pairs, whichever
    /// shard or filters the run covers: a backfill of one filter without the flag, or a shard's run by hand,
    /// must not forget a year's pairs because its default says 180.
    static func days(_ given: Int?, runs: any RunRepository) throws -> Int {
        if let given { return given }
        return try runs.latestRetentionDays() ?? defaultDays
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
    /// The duration in seconds, as a `Double` (phase timings, reports).
    public var seconds: Double {
        let (s, attos) = components
        return Double(s) + Double(attos) / 1e18
    }
}
