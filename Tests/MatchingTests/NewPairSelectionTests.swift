import Chronology
import DeterministicRandom
import Foundation
import MatchingTestSupport
import Testing

@testable import Matching

/// `NewPairSelection.select`: each filter's first `cap` candidates in the cap's order whose pair is not recorded
/// (or recorded but forgotten at the clock), whatever the history holds, in few engine passes.
@Suite struct NewPairSelectionTests {
    /// Counts the engine's passes (calls) and the limits each asked for.
    final class CountingEngine: MatchEngine, @unchecked Sendable {
        let base: any MatchEngine
        private let lock = NSLock()
        private var calls = 0

        init(_ base: any MatchEngine) { self.base = base }

        var passes: Int {
            lock.lock()
            defer { lock.unlock() }
            return calls
        }

        private func count() {
            lock.lock()
            calls += 1
            lock.unlock()
        }

        func evaluate(
            _ filters: [PreparedFilter], against batch: CandidateBatch, limit: Int, clock: EvaluationClock,
            exclusions: MatchExclusions
        ) -> [FilterResult] {
            count()
            return base.evaluate(filters, against: batch, limit: limit, clock: clock, exclusions: exclusions)
        }

        func evaluate(
            _ filters: [PreparedFilter], against batch: CandidateBatch, limits: [Int], clock: EvaluationClock,
            exclusions: MatchExclusions
        ) -> [FilterResult] {
            count()
            return base.evaluate(filters, against: batch, limits: limits, clock: clock, exclusions: exclusions)
        }
    }

    /// A history of fixed recorded pairs (kept, or forgotten at the clock), noting every pair probed.
    final class FixedHistory: RecordedPairLookup, @unchecked Sendable {
        let kept: Set<MatchPair>
        let forgotten: Set<MatchPair>
        private let lock = NSLock()
        private var asked: [MatchPair: Int] = [:]

        init(kept: Set<MatchPair>, forgotten: Set<MatchPair> = []) {
            self.kept = kept
            self.forgotten = forgotten
        }

        /// How many times each pair was probed.
        var probes: [MatchPair: Int] {
            lock.lock()
            defer { lock.unlock() }
            return asked
        }

        func recordedPairs(among pairs: [MatchPair], forgottenBefore: Timestamp?) throws -> RecordedPairs {
            lock.lock()
            for pair in pairs { asked[pair, default: 0] += 1 }
            lock.unlock()
            let recorded = pairs.filter { kept.contains($0) || forgotten.contains($0) }
            return RecordedPairs(
                kept: Set(recorded.filter { forgottenBefore == nil || !forgotten.contains($0) }),
                expired: Set(recorded.filter { forgottenBefore != nil && forgotten.contains($0) }))
        }
    }

    static let owner: Int64 = 1_000_000

    /// 1,300 profiles, ids 1...1,300: the 1,200 women qualify for the filters (gender 2), logins spread over
    /// 500 hours so that many tie (then the smaller id comes first).
    static let profiles: [Profile] = (1...1_300).map { id in
        World.profile(Int64(id), gender: id % 13 == 0 ? 1 : 2, loginHoursAgo: (id * 7_919) % 500 + 1)
    }

    /// The qualifying profiles' ids in the cap's order.
    static let qualifying: [Int64] = profiles.filter { $0.id % 13 != 0 }.sorted(by: CandidateBatch.capOrder).map(\.id)

    /// Runs the selection of `filterIds` (each the default women's filter) over `history` at `cap`.
    static func select(
        _ filterIds: [Int64], history: FixedHistory, cap: Int, engine: CountingEngine
    ) throws -> NewPairSelection.Selection {
        let chosen = filterIds.map { World.filter($0, owner: owner) }
        let prepared = PreparedFilters(
            chosen, owners: [owner: FilterOwner(id: owner, status: 1, plan: 0)], windows: .all)
        let evaluation = WindowedEvaluation(
            engine: engine, candidates: CandidateProfiles(ProfileColumns(profiles)),
            clock: EvaluationClock(now: World.day1), limit: cap, blocks: .none)
        return try NewPairSelection(evaluation: evaluation, probers: [history], forgottenBefore: World.day1)
            .select(prepared)
    }

    /// The answer computed directly: the first `cap` qualifying candidates whose pair is not kept recorded.
    static func reference(_ filterId: Int64, _ history: FixedHistory, cap: Int) -> [Int64] {
        Array(qualifying.filter { !history.kept.contains(MatchPair(filterId: filterId, profileId: $0)) }.prefix(cap))
    }

    /// The passes selecting `cap` new pairs behind `recorded` ones should take when each pass asks for the cap
    /// plus what the filter lost so far: its reach doubles, about log2(recorded / cap + 1) passes, and one more.
    static func logarithmicPasses(recorded: Int, cap: Int) -> Int {
        Int(log2(Double(recorded) / Double(cap) + 1).rounded(.up)) + 1
    }

    /// A filter whose 1,000 first (or 1,000 scattered) of 1,200 qualifying candidates are recorded (with
    /// `forgetting`, 20 of them forgotten at the clock) gets exactly its first `cap` new ones, in a logarithmic
    /// number of engine passes, and no pair is probed twice. Beside it, a filter with nothing recorded keeps its
    /// first answer. Asking for the cap each pass took one pass per cap of recorded pairs ahead of the cap-th new
    /// one: 11 and 335 passes for the first 1,000 recorded, 13 and 77 with some forgotten, 33 at cap 100 scattered.
    @Test(arguments: [
        (3, true, false), (100, true, false), (3, true, true), (100, true, true), (3, false, true), (100, false, true),
    ])
    func aFilterWithManyRecordedPairsTakesLogarithmicallyManyPasses(cap: Int, front: Bool, forgetting: Bool) throws {
        var random = SplitMix64(seed: 36)
        let recordedIds =
            front ? Array(Self.qualifying.prefix(1_000)) : Array(Self.qualifying.shuffled(using: &random).prefix(1_000))
        let pairs = recordedIds.map { MatchPair(filterId: 1, profileId: $0) }
        let forgotten = forgetting ? Set(pairs.enumerated().filter { $0.offset % 50 == 7 }.map(\.element)) : []
        let history = FixedHistory(kept: Set(pairs).subtracting(forgotten), forgotten: forgotten)
        let engine = CountingEngine(BitsetMatchEngine())

        let selection = try Self.select([1, 2], history: history, cap: cap, engine: engine)

        let expected = Self.reference(1, history, cap: cap)
        #expect(expected.count == cap)
        #expect(selection.results[1] == expected)
        #expect(selection.results[2] == Array(Self.qualifying.prefix(cap)))
        #expect(engine.passes <= Self.logarithmicPasses(recorded: 1_000, cap: cap), "\(engine.passes) passes")
        #expect(history.probes.values.allSatisfy { $0 == 1 })
        // The forgotten pairs listed are exactly those in the answers.
        let inAnswer = Set(expected.map { MatchPair(filterId: 1, profileId: $0) })
        #expect(selection.expired == forgotten.intersection(inAnswer))
    }

    /// A filter whose answer holds a few recorded pairs gets exactly its first `cap` new ones in a second pass,
    /// asking for as many more as it lost; one whose candidates run out keeps what is left; nothing is probed twice.
    @Test(arguments: [1, 5, 100])
    func aFilterThatLostAFewPairsGetsExactlyTheReference(cap: Int) throws {
        let top = Array(Self.qualifying.prefix(cap))
        // Filter 1: its 1st, 3rd... of the first answer recorded, and a few just beyond it.
        var kept = Set(
            top.enumerated().filter { $0.offset % 2 == 0 }.map { MatchPair(filterId: 1, profileId: $0.element) })
        kept.formUnion(Self.qualifying[cap..<cap + 3].map { MatchPair(filterId: 1, profileId: $0) })
        // Filter 3: every candidate but the last two recorded.
        kept.formUnion(Self.qualifying.dropLast(2).map { MatchPair(filterId: 3, profileId: $0) })
        let history = FixedHistory(kept: kept)
        let engine = CountingEngine(BitsetMatchEngine())

        let selection = try Self.select([1, 2, 3], history: history, cap: cap, engine: engine)

        #expect(selection.results[1] == Self.reference(1, history, cap: cap))
        #expect(selection.results[1]?.count == cap)
        #expect(selection.results[2] == top)
        #expect(selection.results[3] == Array(Self.qualifying.suffix(2).prefix(cap)))
        #expect(history.probes.values.allSatisfy { $0 == 1 })
        #expect(selection.expired.isEmpty)
    }
}
