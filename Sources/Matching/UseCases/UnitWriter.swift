import Chronology
import Foundation

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
    /// The run's new pairs found recorded but forgotten at its clock (`NewPairSelection.Selection.expired`).
    private let expired: Set<MatchPair>
    private let committer = UnitCommitter()
    /// Guarded by the commit order's lock once writing starts.
    private(set) var written = RunCounters.zero
    private var done = 0

    init(
        output: any RunOutputHandler, stop: StopRequest, run: RunRecord,
        plan: MatchingPass.Plan, lastLogins: [Int64: Timestamp], readAt: ChangeMark?, filtersTotal: Int,
        findings: DigestFindings, expired: Set<MatchPair> = []
    ) {
        self.expired = expired
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
        let slots = max(1, min(writers.count, units.count))
        let order = CommitOrder(units: units.count, writingLimit: Self.writingLimit(writers: slots))
        try SlotThreads.run(slots) { [self] slot in
            let writer = writers[slot]
            while let index = order.take() {
                do {
                    try commit(units[index], index: index, on: writer, order: order)
                } catch {
                    order.fail(index, error)
                    return
                }
            }
        }
        if let failure = order.failure { throw failure }
    }

    /// The key unit `index` of run `runId` holds while its transaction is open (`UnitTransaction.holdUnit`), and
    /// that later units waiting for their turn wait on while it is the lowest not committed (`awaitUnit`): the
    /// run's id and the unit's index in one bigint. Only units open at the same time meet (at most one a writer),
    /// so an index past 2^24 may share a key with one 16M units earlier.
    static func unitKey(runId: Int64, index: Int) -> Int64 {
        (runId << 24) | Int64(index & 0xFF_FFFF)
    }

    /// How many units write their rows at once: one a core, at most one a connection. A connection beyond
    /// that lets the next unit write while earlier ones wait for their turn and their commit's flush.
    static func writingLimit(writers: Int) -> Int {
        max(1, min(writers, ProcessInfo.processInfo.activeProcessorCount))
    }

    /// Commits `unit`; a transaction the database gave up for a conflict with another writer (a deadlock
    /// between this run and a `backfill --notify`, which write the same filters' rows in different orders) rolled
    /// back whole, so the unit is written again (`WriteConflictRetry`); after the last attempt the run fails.
    /// The unit's turn in the commit order is still its own: no later unit commits before it.
    ///
    /// The later units already written and waiting for their turn roll back too when a unit is written again
    /// (`CommitOrder.EarlierUnitRetrying`), and are written again at their turn: they hold rows of the circle the
    /// conflict was (unit i waits for a pair another writer holds, which waits for a pair unit i + 1 holds, which
    /// waits for unit i's turn), and the database may have ended unit i rather than unit i + 1; kept open, they
    /// closed the same circle again at once, until unit i's last attempt failed the run (session 29).
    private func commit(
        _ unit: Pending, index: Int, on writer: any MatchRepository, order: CommitOrder
    ) throws {
        var attempt = 1
        var atItsTurn = false
        while true {
            do {
                if atItsTurn { try order.waitForTurn(index) }
                try commitOnce(unit, index: index, on: writer, order: order, since: order.retrySerial)
                return
            } catch is CommitOrder.EarlierUnitRetrying {
                atItsTurn = true  // rolled back; not an attempt of its own
            } catch let error as any ClassifiedError
                where error.isWriteConflict && attempt < WriteConflictRetry.attempts
            {
                order.retrying(index)
                // Written again at its turn: a unit the database ended while it waited for its turn would otherwise
                // take its rows back at once, before the other writer is done with them, and close the circle again.
                atItsTurn = true
                attempt += 1
                order.serialized {
                    output.handle(
                        .unitRetried(
                            lastFilterId: unit.lastFilterId, attempt: attempt, attempts: WriteConflictRetry.attempts,
                            reason: String(describing: error)))
                }
                WriteConflictRetry.pause(beforeAttempt: attempt)
            }
        }
    }

    private func commitOnce(
        _ unit: Pending, index: Int, on writer: any MatchRepository, order: CommitOrder,
        since serial: Int
    ) throws {
        order.admit(index)
        var holding = true
        defer { if holding { order.release() } }
        try stop.throwIfRequested(runId: run.id)
        let outcome = try committer.commit(
            WorkUnit(
                runId: run.id, clock: plan.clock, lastFilterId: unit.lastFilterId, matches: unit.matches,
                notify: plan.writesNotifications ? unit.notify : nil, filterCounters: unit.counters,
                lastLoginAt: lastLogins, silent: !plan.writesNotifications,
                qualifyingWaiting: findings.qualifyingWaiting, unqualifiedWaiting: findings.unqualifiedWaiting,
                mutual: findings.mutual, readAt: readAt,
                bulk: plan.windows.everyProfileForEveryFilter, forgottenBefore: plan.forgottenBefore,
                passedOverBefore: plan.passedOverCutoffs.passedOverBefore, expired: expired, runOwner: run.owner),
            to: writer,
            atBegin: { tx in try tx.holdUnit(Self.unitKey(runId: run.id, index: index)) },
            beforeAdvance: { tx in
                holding = false
                order.release()
                try order.waitForTurn(
                    index,
                    visibly: { head in try tx.awaitUnit(Self.unitKey(runId: run.id, index: head)) },
                    rollingBackAfterRetriesSince: serial)
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

    /// How many units may write their rows at once (`UnitWriter.writingLimit`), the unit whose turn it is aside.
    private let writingLimit: Int
    private var writing = 0

    init(units: Int, writingLimit: Int = .max) {
        count = units
        self.writingLimit = max(1, writingLimit)
    }

    /// Returns when unit `index` may write its rows: fewer than `writingLimit` units are writing, or it is the unit
    /// whose turn it is (the lowest not committed), which is always let through. A semaphore let later units take
    /// every place while the unit whose turn it was waited for one with no transaction open, where the database
    /// could not see the wait: a later unit held up by another writer (a `backfill --notify`) that waited for a
    /// unit waiting for that turn closed a circle PostgreSQL could not find, and the run stalled until a lock
    /// timeout, 45-75 s (review of session 33; it needs more writers than places: one core, or
    /// `--write-connections` above the cores plus one). After a failure it lets every unit through to find out.
    func admit(_ index: Int) {
        condition.lock()
        defer { condition.unlock() }
        while writing >= writingLimit && index != committedCount && (earliestFailure?.index ?? Int.max) > index {
            _ = condition.wait(until: Date(timeIntervalSinceNow: 0.02))
        }
        writing += 1
    }

    /// A unit admitted by `admit` has written its rows (or given up).
    func release() {
        condition.lock()
        defer { condition.unlock() }
        writing -= 1
        condition.broadcast()
    }

    /// The next unit to write, or nil when none is left or a unit failed.
    func take() -> Int? {
        condition.lock()
        defer { condition.unlock() }
        guard earliestFailure == nil, handedOut < count else { return nil }
        handedOut += 1
        return handedOut - 1
    }

    /// Returns when every unit before `index` has committed; throws when one of them failed.
    /// `visibly` (outside the lock) waits while the unit whose turn it is (the lowest not committed, given) is open,
    /// where the store sees the wait: not the unit just before, which may be waiting with no transaction open (rolled
    /// back behind a retry) and so hide the chain (review of session 29)
    /// (`UnitTransaction.awaitUnit`: a deadlock through another writer's locks and this turn is then found in a
    /// second, not after a lock timeout); the order here decides all the same.
    ///
    /// With `rollingBackAfterRetriesSince`, it throws `EarlierUnitRetrying` once an earlier unit is written again
    /// after `retrySerial` was that value (the caller's transaction then rolls back, and is written again at its
    /// turn: `UnitWriter.commit`).
    func waitForTurn(
        _ index: Int,
        visibly: (_ head: Int) throws -> Void = { _ in }, rollingBackAfterRetriesSince serial: Int? = nil
    ) throws {
        condition.lock()
        defer { condition.unlock() }
        func earlierRetried() -> Bool {
            guard let serial else { return false }
            return retries.contains { $0.serial > serial && $0.index < index }
        }
        // Not yet this unit's turn, and no earlier unit has failed.
        func waiting() -> Bool { committedCount < index && (earliestFailure?.index ?? Int.max) > index }
        while waiting() {
            if earlierRetried() { throw EarlierUnitRetrying() }
            let head = committedCount
            do {
                condition.unlock()
                defer { condition.lock() }
                try visibly(head)
            }
            // Still waiting, the unit whose turn it is (`head`) is not open (not begun, between its attempts, or
            // just committed): a short wait. (The loop's head ends the wait or throws for a retried earlier unit.)
            if waiting() && !earlierRetried() { _ = condition.wait(until: Date(timeIntervalSinceNow: 0.02)) }
        }
        guard committedCount == index else { throw EarlierUnitFailed() }
    }

    /// Units written again after a write conflict, each with its serial (`retrying`).
    private var retries: [(index: Int, serial: Int)] = []

    /// The serial of the latest retry (0: none yet); a unit notes it when it begins an attempt.
    var retrySerial: Int {
        condition.lock()
        defer { condition.unlock() }
        return retries.last?.serial ?? 0
    }

    /// Unit `index` is written again after a write conflict: the later units waiting for their turn roll back
    /// (`waitForTurn`, `EarlierUnitRetrying`).
    func retrying(_ index: Int) {
        condition.lock()
        defer { condition.unlock() }
        retries.append((index, (retries.last?.serial ?? 0) + 1))
        condition.broadcast()
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

    /// A unit waiting for its turn while an earlier one is written again: rolled back, and written again at its
    /// turn (`UnitWriter.commit`); never reported.
    struct EarlierUnitRetrying: Error {}
}
