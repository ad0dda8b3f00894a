import Foundation
import Testing

@testable import Matching

/// Units written in parallel commit in filter-id order (`CommitOrder`, used by `UnitWriter`): the run's cursor
/// only ever moves past committed work.
@Suite struct CommitOrderTests {
    /// Records what the simulated writers did, in the order they did it.
    final class Journal: @unchecked Sendable {
        private let lock = NSLock()
        private(set) var committed: [Int] = []
        private(set) var gaveUp: [Int] = []

        func commit(_ index: Int) { lock.withLock { committed.append(index) } }
        func giveUp(_ index: Int) { lock.withLock { gaveUp.append(index) } }
    }

    struct WriteFailed: Error, Equatable { let index: Int }

    /// Three writers take 40 units; a unit's "write" takes longer the earlier it is, so later units are
    /// ready first and must wait for their turn.
    private func simulate(units: Int, writers: Int, failing: Set<Int> = []) -> (Journal, (any Error)?) {
        let order = CommitOrder(units: units)
        let journal = Journal()
        DispatchQueue.concurrentPerform(iterations: writers) { _ in
            while let index = order.take() {
                do {
                    usleep(UInt32((units - index) % 7) * 300)  // the write
                    if failing.contains(index) { throw WriteFailed(index: index) }
                    try order.waitForTurn(index)
                    order.committed(index) { journal.commit(index) }
                } catch {
                    if error is CommitOrder.EarlierUnitFailed { journal.giveUp(index) }
                    order.fail(index, error)
                    return
                }
            }
        }
        return (journal, order.failure)
    }

    @Test func parallelWritersCommitEveryUnitInOrder() {
        let (journal, failure) = simulate(units: 40, writers: 3)
        #expect(failure == nil)
        #expect(journal.committed == Array(0..<40))
        #expect(journal.gaveUp.isEmpty)
    }

    @Test func aFailedUnitLetsEarlierUnitsCommitAndNoLaterOne() throws {
        let (journal, failure) = simulate(units: 40, writers: 3, failing: [17])
        #expect(journal.committed == Array(0..<17))
        let reported = try #require(failure as? WriteFailed)
        #expect(reported == WriteFailed(index: 17))
        // Units handed out after 17 before the failure was known give up at their turn; none commits.
        #expect(journal.gaveUp.allSatisfy { $0 > 17 })
    }

    @Test func theEarliestFailureIsTheOneReported() throws {
        let (journal, failure) = simulate(units: 40, writers: 3, failing: [9, 10, 11])
        #expect(journal.committed == Array(0..<9))
        let reported = try #require(failure as? WriteFailed)
        #expect(reported == WriteFailed(index: 9))
    }

    @Test func oneWriterIsTheSequentialCase() {
        let (journal, failure) = simulate(units: 12, writers: 1, failing: [5])
        #expect(journal.committed == Array(0..<5))
        #expect((failure as? WriteFailed) == WriteFailed(index: 5))
    }
}
