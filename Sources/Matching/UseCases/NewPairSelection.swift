import Chronology
import Foundation

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
/// evaluated again without them, until its answer holds only new pairs. A pair recorded before the retention's
/// cutoff (`forgottenBefore`) and not waiting for a digest is forgotten at the run's clock, whether a sweep has
/// deleted it yet or not: it is new, and listed in `Selection.expired` for the units to forget first.
struct NewPairSelection {
    let evaluation: WindowedEvaluation
    /// The connections the probe asks on at once (`MatchRepository.withUnitWriters`).
    let probers: [any MatchRepository]
    /// The run's clock minus its retention (nil: nothing recorded is forgotten).
    let forgottenBefore: Timestamp?
    /// Pairs per probe: memory stays small however many pairs a run chooses.
    var probeChunk = 50_000

    struct Selection {
        /// Each filter's new pairs' profile ids, in the cap's order.
        let results: [Int64: [Int64]]
        /// Among them, the pairs recorded but forgotten at the clock.
        let expired: Set<MatchPair>
    }

    func select(_ prepared: PreparedFilters) throws -> Selection {
        var results = evaluation.evaluate(prepared.byWindow)
        var recorded = Set<MatchPair>()  // found recorded so far: the day's re-matches, few
        var expired = Set<MatchPair>()  // found recorded but forgotten at the clock: new, fewer still
        var probed: [Int64: [Int64]] = [:]  // for filters evaluated again: what was probed already, ascending
        var toCheck = results.keys.sorted()
        while !toCheck.isEmpty {
            let answer = try probe(toCheck, results, probed)
            expired.formUnion(answer.expired)
            let found = answer.kept
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
        return Selection(results: results, expired: expired)
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
        -> RecordedPairs
    {
        let chunks = PairChunks(filterIds: filterIds, results: results, probed: probed, size: probeChunk)
        let found = ResultSlots<[RecordedPairs]>(count: probers.count)
        let probers = self.probers
        let cutoff = forgottenBefore
        try SlotThreads.run(probers.count) { slot in
            var answers: [RecordedPairs] = []
            do {
                while let chunk = chunks.next() {
                    answers.append(try probers[slot].recordedPairs(among: chunk, forgottenBefore: cutoff))
                }
            } catch {
                chunks.stop()  // the run fails with this error: the other connections stop after their chunk
                throw error
            }
            found.set(slot, answers)
        }
        return RecordedPairs.merging(found.values().joined())
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
