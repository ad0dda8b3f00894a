import Foundation
import Testing

@testable import Matching

/// The probe of recorded pairs on several connections at once (`NewPairSelection`): `PairChunks` hands every
/// pair out once, `SlotThreads` runs a slot a thread and reports the lowest slot's error.
@Suite struct ParallelProbeTests {
    struct ProbeFailed: Error, Equatable { let slot: Int }

    private static let results: [Int64: [Int64]] = [
        1: [10, 11, 12, 13, 14],
        2: [],
        3: [20, 21, 22],
        4: [30],
    ]

    /// In filter order, at most `size` pairs a chunk, leaving out pairs probed before; nil once all are out.
    @Test func chunksHandOutEveryPairOnceInFilterOrder() {
        let chunks = PairChunks(
            filterIds: [1, 2, 3, 4], results: Self.results, probed: [1: [11, 13], 3: [22]], size: 2)
        var handedOut: [[MatchPair]] = []
        while let chunk = chunks.next() { handedOut.append(chunk) }
        let pair = { (filterId: Int64, profileId: Int64) in MatchPair(filterId: filterId, profileId: profileId) }
        #expect(
            handedOut == [
                [pair(1, 10), pair(1, 12)], [pair(1, 14), pair(3, 20)], [pair(3, 21), pair(4, 30)],
            ])
        #expect(chunks.next() == nil)
    }

    /// What a filter evaluated again has had probed: ascending, each id once, whatever order the answers came in.
    @Test func probedIdsStayAscendingAndUnique() {
        let first = NewPairSelection.ascendingUnion([], [14, 10, 12, 10])
        #expect(first == [10, 12, 14])
        #expect(NewPairSelection.ascendingUnion(first, [13, 12, 9, 15]) == [9, 10, 12, 13, 14, 15])
        #expect(NewPairSelection.ascendingUnion(first, []) == first)
    }

    /// Four threads draining one chunk source get every pair exactly once between them; a stopped source
    /// hands out nothing more.
    @Test func slotsShareTheChunksWithoutLosingOrRepeatingAPair() throws {
        let results = Dictionary(uniqueKeysWithValues: (1...200).map { id in (Int64(id), (0..<37).map { Int64($0) }) })
        let chunks = PairChunks(filterIds: results.keys.sorted(), results: results, probed: [:], size: 50)
        let handedOut = ResultSlots<[MatchPair]>(count: 4)
        try SlotThreads.run(4) { slot in
            var mine: [MatchPair] = []
            while let chunk = chunks.next() { mine += chunk }
            handedOut.set(slot, mine)
        }
        let all = handedOut.values().joined()
        #expect(Set(all).count == 200 * 37)
        #expect(all.count == 200 * 37)

        let stopped = PairChunks(filterIds: [1, 3], results: Self.results, probed: [:], size: 1)
        let first = stopped.next()
        stopped.stop()
        #expect(first == [MatchPair(filterId: 1, profileId: 10)])
        #expect(stopped.next() == nil)
    }

    /// Every slot runs to its end; the error thrown is the lowest failing slot's.
    @Test func theLowestFailingSlotsErrorIsThrownAfterAllSlotsEnd() {
        let finished = ResultSlots<Bool>(count: 5)
        var thrown: (any Error)?
        do {
            try SlotThreads.run(5) { slot in
                usleep(UInt32(5 - slot) * 2_000)
                finished.set(slot, true)
                if slot == 3 || slot == 1 { throw ProbeFailed(slot: slot) }
            }
        } catch {
            thrown = error
        }
        #expect(thrown as? ProbeFailed == ProbeFailed(slot: 1))
        #expect(finished.values() == [true, true, true, true, true])
    }
}
