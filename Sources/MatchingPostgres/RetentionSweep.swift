import Chronology
import Foundation
import Matching
import PostgresClient

/// Forgets expired pairs (runs.md "Retention") on several connections at once.
///
/// A run's pairs share its clock as `matched_at`, so the expired pairs are a few runs' worth, each a
/// contiguous stretch of the retention index `(matched_at, filter_id)`. The sweep lists those clocks, cuts
/// the newest into ranges of filter ids, and its connections take clocks and ranges from one queue, each a series
/// of bounded batches (`RetentionSQL.forgetBatch`) that resumes where the last one ended. One connection
/// deleting leaves the rest of the machine idle (the worker waits; the server works on one core); the ranges
/// are disjoint, so the connections never wait for each other's rows.
struct RetentionSweep {
    /// The connection holding the service-wide sweeper lock; it lists the work and takes its share.
    let lead: PostgresConnection
    /// Opens the other sweepers' connections (closed by the caller), only when there is something to forget:
    /// most runs of a young service have nothing expired and pay nothing for them.
    let openHelpers: () -> [PostgresConnection]
    let cutoff: Timestamp
    let batchSize: Int
    /// Full batches allowed in all (a batch that forgot fewer than `batchSize` ends its range).
    let maxBatches: Int

    /// At most this many expired clocks a run (more are left to the next runs, as a backlog).
    static let maxClocks = 1_000
    /// Ranges of filter ids a clock is cut into, per connection: more than one each, so that a connection
    /// whose ranges held less takes over the others' rest.
    static let rangesPerConnection = 4

    /// Forgets what it can; `backlog` when expired pairs were left for the next runs.
    func forgetPairs() throws -> (forgotten: Int, backlog: Bool) {
        let clocks = try lead.query(
            RetentionSQL.expiredClocks, [.timestamptz(cutoff), .int4(Int32(Self.maxClocks + 1))]
        ).rows.map { try $0.timestamp(0) }
        guard !clocks.isEmpty else { return (0, false) }
        let connections = [lead] + openHelpers()
        let bounds = try lead.query("SELECT min(id), max(id) FROM saved_filters").rows[0]
        let ranges = Self.filterRanges(
            low: try bounds.optionalInt64(0) ?? 0, high: try bounds.optionalInt64(1) ?? 0,
            count: connections.count * Self.rangesPerConnection)
        // Only the newest expired clock is cut into ranges: in steady state it is the run that has just expired
        // (a day's pairs), and the older ones are what waits for a digest past the cutoff, a statement each.
        // After a pause several full runs expire at once; they are then swept side by side, one a connection.
        let listed = Array(clocks.prefix(Self.maxClocks))
        let whole = Int64.min...Int64.max
        let work = SweepQueue(
            tasks: listed.dropLast().map { ($0, whole) } + ranges.map { (listed[listed.count - 1], $0) },
            maxBatches: maxBatches)
        let forgotten = ResultSlots<Int>(count: connections.count)
        let batchSize = self.batchSize
        try SlotThreads.run(connections.count) { slot in
            var total = 0
            defer { forgotten.set(slot, total) }
            do {
                while let (clock, range) = work.next() {
                    var low = range.lowerBound
                    while true {
                        let row = try connections[slot].transaction { tx in
                            try tx.query(
                                RetentionSQL.forgetBatch,
                                [
                                    .timestamptz(clock), .int4(Int32(clamping: batchSize)), .int8(low),
                                    .int8(range.upperBound),
                                ]
                            ).rows[0]
                        }
                        let deleted = Int(try row.int64(0))
                        total += deleted
                        guard deleted >= batchSize, let last = try row.optionalInt64(1) else { break }
                        guard work.takeFullBatch() else { break }
                        low = last  // the last filter may have more pairs; those forgotten are gone
                    }
                }
            } catch {
                work.stop()
                throw error
            }
        }
        return (forgotten.values().reduce(0, +), work.backlog || clocks.count > Self.maxClocks)
    }

    /// `count` ranges covering every filter id, equal parts of `low...high` (the ids filters have now; pairs of
    /// filters deleted since may lie outside, so the first and last ranges are open-ended).
    static func filterRanges(low: Int64, high: Int64, count: Int) -> [ClosedRange<Int64>] {
        let parts = Int64(max(1, count))
        let span = max(0, high - low)
        let step = max(1, span / parts + 1)
        var starts: [Int64] = [Int64.min]
        var next = low &+ step
        while starts.count < parts, next <= high {
            starts.append(next)
            next = next &+ step
        }
        return starts.indices.map { index in
            starts[index]...(index + 1 < starts.count ? starts[index + 1] - 1 : Int64.max)
        }
    }
}

/// The sweep's shared queue of (clock, filter range) tasks and its budget of full batches.
private final class SweepQueue: @unchecked Sendable {
    private let lock = NSLock()
    private let tasks: [(Timestamp, ClosedRange<Int64>)]
    private var position = 0
    private var fullBatchesLeft: Int
    private var stopped = false
    private var leftWork = false

    init(tasks: [(Timestamp, ClosedRange<Int64>)], maxBatches: Int) {
        self.tasks = tasks
        self.fullBatchesLeft = max(1, maxBatches)
    }

    /// The next task; nil when none is left or the sweep stopped.
    func next() -> (Timestamp, ClosedRange<Int64>)? {
        lock.withLock {
            guard !stopped, position < tasks.count else { return nil }
            defer { position += 1 }
            return tasks[position]
        }
    }

    /// Whether a range that just forgot a full batch may go on; when the budget is spent, the sweep stops
    /// with a backlog.
    func takeFullBatch() -> Bool {
        lock.withLock {
            guard !stopped, fullBatchesLeft > 1 else {
                if !stopped { leftWork = true }
                stopped = true
                return false
            }
            fullBatchesLeft -= 1
            return true
        }
    }

    /// After an error: the other connections stop after their batch.
    func stop() { lock.withLock { stopped = true } }

    /// Whether expired pairs were left because the budget ran out.
    var backlog: Bool { lock.withLock { leftWork } }
}
