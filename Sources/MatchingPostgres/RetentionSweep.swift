import Chronology
import Foundation
import Matching
import PostgresClient

/// Forgets expired pairs (runs.md "Retention") on several connections at once.
///
/// A run's pairs share its clock as `matched_at`, so the expired pairs are a few runs' worth, each a
/// contiguous stretch of the retention index `(matched_at, filter_id)`. The sweep lists those clocks, cuts
/// the newest into ranges of filter ids, and its connections take clocks and ranges from one queue, each a
/// series of bounded batches deleted in place (`RetentionSQL.spanBound`). One connection
/// deleting leaves the rest of the machine idle (the worker waits; the server works on one core); the ranges
/// are disjoint, so the connections never wait for each other's rows. Pairs recorded in bulk (a first run, a
/// backfill) are not in that index but listed by filter and clock in `matcher_bulk_matches`; when some of them
/// have expired, the same ranges are queued once more for them (`RetentionSQL.forgetBulkBatch`).
package struct RetentionSweep {
    /// The connection holding the service-wide sweeper lock; it lists the work and takes its share.
    let lead: PostgresConnection
    /// Opens the other sweepers' connections (as many as it can; the sweep closes them), only when there is
    /// something to forget: most runs of a young service have nothing expired and pay nothing for them.
    let openHelpers: () -> [PostgresConnection]
    let cutoff: Timestamp
    let batchSize: Int
    /// The sweep forgets at most `maxBatches` x `batchSize` pairs (give or take a batch a connection), then leaves
    /// a backlog.
    let maxBatches: Int
    /// At most this many of the newest expired clocks a run, and as many older ones (`forgetPairs`).
    let clockLimit: Int
    /// How long a batch waits for a row lock another writer holds (`BatchConflicts`).
    let lockTimeoutMilliseconds: Int64
    /// The tests' seam (`StoreFaultPoints`); nil in production.
    var faultPoints: (any StoreFaultPoints)? = nil
    /// Whether a stop was requested (SIGTERM): the sweep ends after the batches in progress, with a backlog.
    var stopRequested: @Sendable () -> Bool = { false }

    /// Ranges of filter ids a clock is cut into, per connection: more than one each, so that a connection
    /// whose ranges held less takes over the others' rest.
    static let rangesPerConnection = 4

    /// What a sweep of pairs did: how many it forgot; whether it left expired pairs for the next runs because
    /// its budget ran out or a batch kept conflicting with another writer (`backlog`); whether every expired
    /// clock has been visited since the round of older clocks began (`complete`: this sweep ended the round,
    /// or no clock is older than the newest ones); the conflicts it met (`BatchConflicts`).
    struct Outcome {
        let forgotten: Int
        let backlog: Bool
        let complete: Bool
        let conflicts: BatchConflicts.Seen
    }

    /// Forgets what it can.
    ///
    /// The expired clocks are listed newest first, at most `clockLimit`: the runs that have just expired are
    /// always among them, however many older clocks still hold matches that wait for their digest (a filter
    /// notified monthly with a week kept, a notification pause, an hourly timer: hundreds of clocks). Older
    /// clocks than those hold only such matches, each checked again in turn: `clockLimit` of them a run, from
    /// where the previous sweep stopped (`matcher_service_state.retention_sweep_after`), so that every clock is
    /// visited every few runs and a match that stops waiting is forgotten, while a run's cost stays bounded.
    func forgetPairs() throws -> Outcome {
        let newest = try lead.query(
            RetentionSQL.newestExpiredClocks, [.timestamptz(cutoff), .int4(Int32(clamping: clockLimit + 1))]
        ).rows.map { try $0.timestamp(0) }
        var listed = Array(newest.prefix(clockLimit).reversed())  // oldest first, the newest last
        var rotation: (next: Timestamp?, visitedAll: Bool) = (nil, true)
        if newest.count > clockLimit, let oldestListed = listed.first {
            let after = try lead.query("SELECT retention_sweep_after FROM matcher_service_state").rows.first
                .flatMap { try $0.optionalTimestamp(0) }
            let older = try lead.query(
                RetentionSQL.expiredClocksBetween,
                [
                    after.map { .timestamptz($0) } ?? .null, .timestamptz(oldestListed),
                    .int4(Int32(clamping: clockLimit + 1)),
                ]
            ).rows.map { try $0.timestamp(0) }
            let window = older.prefix(clockLimit)
            rotation = older.count > clockLimit ? (window.last, false) : (nil, true)
            listed = Array(window) + listed
        }
        let bulkExpired = try lead.query(RetentionSQL.bulkExpired, [.timestamptz(cutoff)]).rows[0].bool(0)
        guard !listed.isEmpty || bulkExpired else {
            return Outcome(forgotten: 0, backlog: false, complete: true, conflicts: .none)
        }
        let helpers = openHelpers()
        defer { helpers.forEach { $0.close() } }
        let connections = [lead] + helpers
        let bounds = try lead.query("SELECT min(id), max(id) FROM saved_filters").rows[0]
        let ranges = Self.filterRanges(
            low: try bounds.optionalInt64(0) ?? 0, high: try bounds.optionalInt64(1) ?? 0,
            count: connections.count * Self.rangesPerConnection)
        // Only the newest expired clock is cut into ranges: in steady state it is the run that has just expired
        // (a day's pairs), and the older ones are what waits for a digest past the cutoff, a statement each.
        // After a pause several full runs expire at once; they are then swept side by side, one a connection.
        let whole = Int64.min...Int64.max
        var tasks: [SweepTask] = []
        if let newestClock = listed.last {
            tasks = listed.dropLast().map { .clock($0, whole) } + ranges.map { .clock(newestClock, $0) }
        }
        if bulkExpired { tasks += ranges.map { .bulk($0) } }
        let work = SweepQueue(
            tasks: tasks,
            budget: maxBatches.multipliedReportingOverflow(by: batchSize).overflow ? .max : maxBatches * batchSize,
            stopRequested: stopRequested)
        let conflicts = BatchConflicts(lockTimeoutMilliseconds: lockTimeoutMilliseconds)
        let forgotten = ResultSlots<Int>(count: connections.count)
        let batchSize = self.batchSize
        let cutoff = self.cutoff
        let faultPoints = self.faultPoints
        try SlotThreads.run(connections.count) { slot in
            var total = 0
            defer { forgotten.set(slot, total) }
            do {
                let connection = connections[slot]
                while let task = work.next() {
                    switch task {
                    case .clock(let clock, let range):
                        total += try Self.sweep(
                            clock: clock, range: range, batchSize: batchSize, on: connection, work: work,
                            conflicts: conflicts, faultPoints: faultPoints)
                    case .bulk(let range):
                        total += try Self.sweepBulk(
                            before: cutoff, range: range, batchSize: batchSize, on: connection, work: work,
                            conflicts: conflicts)
                    }
                }
            } catch {
                work.stop()
                throw error
            }
        }
        if newest.count > clockLimit, !work.backlog {
            // The older clocks' window was swept: the next sweep takes the ones after it (from the first again
            // once every one was visited).
            try lead.query(
                "UPDATE matcher_service_state SET retention_sweep_after = $1",
                [rotation.next.map { .timestamptz($0) } ?? .null])
        }
        return Outcome(
            forgotten: forgotten.values().reduce(0, +), backlog: work.backlog,
            complete: !work.backlog && rotation.visitedAll, conflicts: conflicts.seen)
    }

    /// Forgets one clock's pairs in `range`, a batch a transaction: each batch the filters before the one holding
    /// the range's next `batchSize + 1`-th pair (`RetentionSQL.spanBound`), a filter larger than a batch in
    /// batches of its own (`RetentionSQL.forgetBatch`). Returns how many it forgot; stops early when the
    /// sweep's budget is spent.
    private static func sweep(
        clock: Timestamp, range: ClosedRange<Int64>, batchSize: Int, on connection: PostgresConnection,
        work: SweepQueue, conflicts: BatchConflicts, faultPoints: (any StoreFaultPoints)?
    ) throws -> Int {
        var total = 0
        var low = range.lowerBound
        while true {
            let span = try conflicts.batch(on: connection) { tx in
                let stop = try tx.query(
                    RetentionSQL.spanBound,
                    [.timestamptz(clock), .int8(low), .int8(range.upperBound), .int8(Int64(batchSize))]
                ).rows.first.map { try $0.int64(0) }
                // The filters before `stop`; none when filter `low` alone holds more than a batch (`stop == low`).
                guard stop != low else { return (forgotten: 0, last: nil as Int64?, more: true) }
                let last = stop.map { $0 - 1 } ?? range.upperBound
                let batch: [PostgresValue] = [.timestamptz(clock), .int8(low), .int8(last)]
                let forgotten = try tx.query(RetentionSQL.forgetSpanPairs, batch).affectedRows
                faultPoints?.reach(.sweepBetweenPairsAndEntries)
                try tx.query(RetentionSQL.forgetSpanEntries, batch)
                return (forgotten: forgotten, last: last, more: stop != nil)
            }
            guard let span else {
                work.stopWithBacklog()
                return total
            }
            total += span.forgotten
            guard span.more else {  // nothing left in the range after the batch
                work.spendLast(span.forgotten)
                return total
            }
            if let last = span.last {
                // Budgeted by pairs forgotten, not statements: a span of waiting matches only forgets nothing,
                // and the next sweep must not spend its budget on the same ones again.
                guard work.spend(span.forgotten), last < range.upperBound else { return total }
                low = last + 1
            } else {
                // Filter `low` alone holds more than a batch: its pairs by the bounded batch statement.
                while true {
                    let batch = try conflicts.batch(on: connection) { tx in
                        try tx.query(
                            RetentionSQL.forgetBatch,
                            [.timestamptz(clock), .int8(low), .int4(Int32(clamping: batchSize))]
                        ).rows[0]
                    }
                    guard let batch else {
                        work.stopWithBacklog()
                        return total
                    }
                    let deleted = Int(try batch.int64(0))
                    total += deleted
                    guard deleted >= batchSize else {
                        work.spendLast(deleted)
                        break
                    }
                    guard work.spend(deleted) else { return total }
                }
                guard low < range.upperBound else { return total }
                low += 1
            }
        }
    }

    /// Forgets the expired pairs recorded in bulk of filters in `range`, a batch of list rows a transaction, each
    /// at most `batchSize` pairs or one list row (a list row holds a filter's pairs of one run, at most its cap:
    /// 100 by default), and at most `batchSize / bulkPairsPerRow` rows.
    /// Returns how many it forgot; stops early when the sweep's budget is spent.
    private static func sweepBulk(
        before cutoff: Timestamp, range: ClosedRange<Int64>, batchSize: Int, on connection: PostgresConnection,
        work: SweepQueue, conflicts: BatchConflicts
    ) throws -> Int {
        let rowsPerBatch = Int64(max(1, batchSize / bulkPairsPerRow))
        var total = 0
        var after: (filterId: Int64, clock: PostgresValue) = (range.lowerBound, .null)
        while true {
            let batch = try conflicts.batch(on: connection) { tx in
                // Key probes for the batch's pairs: with a large batch the planner may prefer hashing the table.
                try tx.execute("SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off")
                return try tx.query(
                    RetentionSQL.forgetBulkBatch,
                    [
                        .timestamptz(cutoff), .int8(after.filterId), .int8(range.upperBound), after.clock,
                        .int8(rowsPerBatch), .int8(Int64(batchSize)),
                    ]
                ).rows[0]
            }
            guard let batch else {
                work.stopWithBacklog()
                return total
            }
            let forgotten = Int(try batch.int64(0))
            total += forgotten
            guard try batch.bool(1) else {
                work.spendLast(forgotten)
                return total
            }
            guard work.spend(forgotten) else { return total }
            after = (try batch.int64(2), .timestamptz(try batch.timestamp(3)))
        }
    }

    /// The pairs a list row of `matcher_bulk_matches` holds, roughly: a run's cap a filter.
    static let bulkPairsPerRow = 100

    /// `count` ranges covering every filter id, equal parts of `low...high` (the ids filters have now; pairs of
    /// filters deleted since may lie outside, so the first and last ranges are open-ended).
    /// The ids are the app's: any two bigints, so the span is measured unsigned and no step may overflow.
    package static func filterRanges(low: Int64, high: Int64, count: Int) -> [ClosedRange<Int64>] {
        let parts = max(1, count)
        let span = high > low ? UInt64(bitPattern: high &- low) : 0
        let share = span / UInt64(parts)
        let step = Int64(clamping: share == .max ? share : share + 1)
        var starts: [Int64] = [Int64.min]
        var (next, overflow) = low.addingReportingOverflow(step)
        while starts.count < parts, !overflow, next <= high {
            starts.append(next)
            (next, overflow) = next.addingReportingOverflow(step)
        }
        return starts.indices.map { index in
            starts[index]...(index + 1 < starts.count ? starts[index + 1] - 1 : Int64.max)
        }
    }
}

/// What one sweeper does next: one clock's pairs in a range of filter ids, or the expired pairs recorded in bulk
/// in a range of filter ids.
private enum SweepTask {
    case clock(Timestamp, ClosedRange<Int64>)
    case bulk(ClosedRange<Int64>)
}

/// The sweep's shared queue of tasks and its budget of pairs.
private final class SweepQueue: @unchecked Sendable {
    private let lock = NSLock()
    private let tasks: [SweepTask]
    private var position = 0
    private var pairsLeft: Int
    private var stopped = false
    private var leftWork = false

    private let stopRequested: @Sendable () -> Bool

    /// `budget`: pairs the sweep may forget before it stops with a backlog (the last batch may pass it).
    /// `stopRequested`: asked before each task and batch; when true, the sweep stops with a backlog.
    init(tasks: [SweepTask], budget: Int, stopRequested: @escaping @Sendable () -> Bool = { false }) {
        self.tasks = tasks
        self.pairsLeft = max(1, budget)
        self.stopRequested = stopRequested
    }

    /// The next task; nil when none is left or the sweep stopped (with a backlog when the budget is spent).
    func next() -> SweepTask? {
        lock.withLock {
            guard !stopped, position < tasks.count else { return nil }
            guard pairsLeft > 0, !stopRequested() else {
                stopWithBacklogLocked()
                return nil
            }
            defer { position += 1 }
            return tasks[position]
        }
    }

    /// Counts `pairs` just forgotten by a range with more to go; whether it may go on. When the budget is
    /// spent, or a stop was requested, the sweep stops with a backlog.
    func spend(_ pairs: Int) -> Bool {
        lock.withLock {
            guard !stopped else { return false }
            pairsLeft -= pairs
            guard pairsLeft > 0, !stopRequested() else {
                stopWithBacklogLocked()
                return false
            }
            return true
        }
    }

    /// Counts `pairs` forgotten by a task's last batch (a clock of fewer pairs than a batch, the end of a range):
    /// the task is done, but the pairs count, so that no further task starts once they spend the budget.
    /// Uncounted, a sweep of a thousand small clocks (an hourly timer after an outage, a retention cut) forgot
    /// them all, whatever its budget (review of session 29).
    func spendLast(_ pairs: Int) {
        lock.withLock { pairsLeft -= pairs }
    }

    /// After an error: the other connections stop after their batch.
    func stop() { lock.withLock { stopped = true } }

    /// After a batch kept conflicting with another writer: the other connections stop after their batch, and
    /// the expired pairs left are the next runs' backlog.
    func stopWithBacklog() { lock.withLock { stopWithBacklogLocked() } }

    /// `stopWithBacklog` for a caller that holds the lock.
    private func stopWithBacklogLocked() {
        stopped = true
        leftWork = true
    }

    /// Whether expired pairs were left because the budget ran out.
    var backlog: Bool { lock.withLock { leftWork } }
}

/// The retention sweep's batches against other writers. A batch's transaction that the database gave up for a
/// conflict with another writer (a deadlock with a concurrent run's or backfill's unit, or a row lock held past
/// the batch's `lock_timeout`) rolled back whole; it is tried again as a run's unit is (`WriteConflictRetry`).
/// One that keeps conflicting stops the sweep with a backlog for the next runs: forgetting is
/// never urgent, and the run's units have committed by then, so a conflict here does not fail the run.
final class BatchConflicts: @unchecked Sendable {
    /// What a sweep met: batches rolled back by a conflict (each tried again, or the last one the sweep stopped
    /// at), and the database's reason when the sweep stopped for one.
    struct Seen {
        static let none = Seen(rolledBack: 0, stoppedBy: nil)
        let rolledBack: Int
        let stoppedBy: String?
    }

    /// The batch's `lock_timeout`, in milliseconds: set per transaction (`SET LOCAL`), so that the sweep's other
    /// statements (listing the expired clocks, the filter ids' bounds) wait for a table lock as the run's do.
    let lockTimeoutMilliseconds: Int64
    private let lock = NSLock()
    private var rolledBack = 0
    private var stoppedBy: String?

    init(lockTimeoutMilliseconds: Int64) {
        self.lockTimeoutMilliseconds = max(1, lockTimeoutMilliseconds)
    }

    /// Runs `body` in a transaction on `connection`; nil when it conflicted `WriteConflictRetry.attempts` times.
    func batch<T>(on connection: PostgresConnection, _ body: (PostgresConnection) throws -> T) throws -> T? {
        var attempt = 1
        while true {
            do {
                return try connection.transaction { tx in
                    try tx.execute("SET LOCAL lock_timeout = \(lockTimeoutMilliseconds)")
                    return try body(tx)
                }
            } catch let error as PostgresError where error.isWriteConflict {
                lock.withLock { rolledBack += 1 }
                guard attempt < WriteConflictRetry.attempts else {
                    lock.withLock { if stoppedBy == nil { stoppedBy = String(describing: error) } }
                    return nil
                }
                attempt += 1
                WriteConflictRetry.pause(beforeAttempt: attempt)
            }
        }
    }

    var seen: Seen { lock.withLock { Seen(rolledBack: rolledBack, stoppedBy: stoppedBy) } }
}
