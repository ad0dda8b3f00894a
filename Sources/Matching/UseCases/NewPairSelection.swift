import Chronology
import Foundation

/// The engine over each change window's candidates.
struct WindowedEvaluation {
    let engine: any MatchEngine
    let candidates: CandidateProfiles
    let clock: EvaluationClock
    let limit: Int
    let blocks: BlockSet

    /// Each filter's first `limit` candidates of its window in the cap's order (`limits[filterId]` for those it
    /// names), leaving out `recorded`.
    func evaluate(
        _ byWindow: [Int: [PreparedFilter]], recorded: Set<MatchPair> = [], limits: [Int64: Int] = [:]
    ) -> [Int64: [Int64]] {
        var found: [Int64: [Int64]] = [:]
        let exclusions = MatchExclusions(existing: recorded, blocks: blocks)
        for (window, filters) in byWindow.sorted(by: { $0.key < $1.key }) where !filters.isEmpty {
            let batch = candidates.batch(forWindow: window)
            let results =
                limits.isEmpty
                ? engine.evaluate(filters, against: batch, limit: limit, clock: clock, exclusions: exclusions)
                : engine.evaluate(
                    filters, against: batch, limits: filters.map { limits[$0.filter.id] ?? limit }, clock: clock,
                    exclusions: exclusions)
            for result in results { found[result.filterId] = result.profileIds }
        }
        return found
    }
}

/// Keeps, for each filter, its first `limit` candidates whose pair is not recorded yet (runs.md: "a pair not
/// already in filter_matches"). Only the pairs the engine chose are probed, so the cost follows the day's
/// work, never the history; a filter that loses chosen pairs to the probe while more candidates qualify is
/// evaluated again without them, until its answer holds `limit` new pairs (or every candidate). Evaluated again,
/// a filter asks for `limit` plus as many as it has lost so far: one that lost a few asks for a few more, one
/// whose answers were all recorded doubles its reach each pass (a few passes for thousands of recorded pairs,
/// where asking for `limit` each time took one pass per `limit` of them). A pair recorded before the retention's
/// cutoff (`forgottenBefore`) and not waiting for a digest is forgotten at the run's clock, whether a sweep has
/// deleted it yet or not: it is new, and listed in `Selection.expired` for the units to forget first.
struct NewPairSelection {
    let evaluation: WindowedEvaluation
    /// The connections the probe asks on at once (`MatchRepository.withUnitWriters`).
    let probers: [any RecordedPairLookup]
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
        let cap = evaluation.limit
        var results = evaluation.evaluate(prepared.byWindow)
        var recorded = Set<MatchPair>()  // found recorded so far: the day's re-matches, few
        var expired = Set<MatchPair>()  // found recorded but forgotten at the clock: new, fewer still
        var probed: [Int64: [Int64]] = [:]  // for filters evaluated again: what was probed already, ascending
        var lost: [Int64: Int] = [:]  // per filter evaluated again: its pairs found recorded so far
        var asked: [Int64: Int] = [:]  // per filter evaluated again: the limit its last answer was asked at
        var toCheck = results.keys.sorted()
        while !toCheck.isEmpty {
            let answer = try probe(toCheck, results, probed)
            expired.formUnion(answer.expired)
            let found = answer.kept
            guard !found.isEmpty else { break }
            recorded.formUnion(found)
            var again: [Int: [PreparedFilter]] = [:]
            var foundBy: [Int64: Int] = [:]
            for pair in found { foundBy[pair.filterId, default: 0] += 1 }
            for (filterId, count) in foundBy {
                let ids = results[filterId] ?? []
                // Every pair of the answer is probed now, and the recorded ones before it are left out: its pairs
                // not found recorded are the filter's first new ones.
                let new = ids.filter { !found.contains(MatchPair(filterId: filterId, profileId: $0)) }
                let filled = ids.count < asked[filterId, default: cap] || new.count >= cap
                if !filled, let (window, filter) = prepared.placed(filterId) {
                    // More may qualify beyond the answer: evaluate again without the recorded pairs, asking for
                    // as many more than the cap as the filter has lost so far.
                    probed[filterId] = Self.ascendingUnion(probed[filterId] ?? [], ids)
                    lost[filterId, default: 0] += count
                    asked[filterId] = cap + lost[filterId, default: 0]
                    again[window, default: []].append(filter)
                } else {
                    results[filterId] = Array(new.prefix(cap))
                }
            }
            let refilled = evaluation.evaluate(again, recorded: recorded, limits: asked)
            results.merge(refilled) { _, new in new }
            toCheck = refilled.keys.sorted()
        }
        // An answer asked past the cap keeps its first `cap` (all new: the last probe found none recorded).
        for (filterId, _) in asked where (results[filterId]?.count ?? 0) > cap {
            results[filterId] = Array(results[filterId]!.prefix(cap))
        }
        // The forgotten pairs that stay in the answers (one probed past the cap may have been trimmed).
        let kept = expired.filter { pair in results[pair.filterId]?.contains(pair.profileId) ?? false }
        return Selection(results: results, expired: kept)
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
