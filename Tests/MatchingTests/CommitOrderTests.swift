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

    /// Review of session 33: with one place to write, a later unit holding it must not keep out the unit whose turn
    /// it is (which then waited with no transaction open, where the database could not see the wait); other
    /// later units still wait for the place.
    @Test func theUnitWhoseTurnItIsIsAlwaysLetWrite() {
        let order = CommitOrder(units: 3, writingLimit: 1)
        for _ in 0..<3 { _ = order.take() }
        order.admit(2)  // unit 2 takes the only place and keeps it
        let headAdmitted = DispatchSemaphore(value: 0)
        let laterAdmitted = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            order.admit(0)
            headAdmitted.signal()
        }
        DispatchQueue.global().async {
            order.admit(1)
            laterAdmitted.signal()
        }
        #expect(headAdmitted.wait(timeout: .now() + 5) == .success)
        // Unit 1 is not the head: it waits while the places are taken (units 2 and 0)...
        #expect(laterAdmitted.wait(timeout: .now() + 0.3) == .timedOut)
        // ... until unit 0 commits, when it becomes the head.
        order.release()
        order.committed(0) {}
        #expect(laterAdmitted.wait(timeout: .now() + 5) == .success)
    }

    /// Session 29: when a unit is written again after a write conflict, the later units already waiting for their
    /// turn roll back (they hold rows of the circle the conflict was) and are written again at their turn; a unit
    /// that began after the retry, or an earlier unit, is not disturbed.
    @Test func unitsWaitingBehindARetriedUnitRollBack() throws {
        let order = CommitOrder(units: 4)
        for _ in 0..<4 { _ = order.take() }
        let before = order.retrySerial
        #expect(before == 0)
        let waiting = DispatchSemaphore(value: 0)
        let outcome = ResultSlot()
        let thread = Thread {
            do {
                waiting.signal()
                try order.waitForTurn(2, rollingBackAfterRetriesSince: before)
                outcome.set("turn")
            } catch is CommitOrder.EarlierUnitRetrying {
                outcome.set("rolled back")
            } catch {
                outcome.set("\(error)")
            }
        }
        thread.start()
        waiting.wait()
        usleep(50_000)
        order.retrying(1)
        while outcome.value == nil { usleep(1_000) }
        #expect(outcome.value == "rolled back")
        // A retry after the unit began does not stop a unit that began later; an earlier unit is not stopped.
        let after = order.retrySerial
        #expect(after == 1)
        order.committed(0) {}
        try order.waitForTurn(1, rollingBackAfterRetriesSince: 0)
        order.committed(1) {}
        try order.waitForTurn(2, rollingBackAfterRetriesSince: after)
    }

    final class ResultSlot: @unchecked Sendable {
        private let lock = NSLock()
        private var stored: String?
        func set(_ value: String) { lock.withLock { stored = value } }
        var value: String? { lock.withLock { stored } }
    }
}
