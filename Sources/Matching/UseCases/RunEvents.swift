import Chronology
import Foundation

/// What a run or backfill reports while it works; the CLI, the logs and the tests observe the same events.
public enum RunEvent: Sendable {
    case started(kind: RunKind, shard: Shard, clock: Timestamp, runId: Int64?, resumed: Bool, dryRun: Bool)
    case phaseStarted(RunPhase)
    case phaseFinished(RunPhase, seconds: Double)
    case candidatesLoaded(Int)
    case filtersLoaded(total: Int, invalid: Int, paidIgnored: Int, ownerInactive: Int)
    case invalidFilter(InvalidFilter)
    /// A profile or filter row that could not be read: left out, listed in `matcher_quarantine`.
    case quarantined(QuarantinedRow)
    case unitCommitted(filtersDone: Int, filtersTotal: Int, matches: Int, notifications: Int)
    /// A unit's transaction conflicted with another writer's (a deadlock with a backfill, say) and was rolled
    /// back; the unit is written again, from the start, as attempt `attempt` of `attempts`.
    case unitRetried(lastFilterId: Int64, attempt: Int, attempts: Int, reason: String)
    /// Units are written on fewer connections than configured (the others could not be opened).
    case writersUnavailable(UnitWriterShortfall)
    /// The retention sweep ran (another process may have been sweeping instead: then no event).
    case forgotten(RetentionOutcome)
    /// An interrupted run of another shard layout was abandoned: this run covers its owners.
    case superseded(runId: Int64, shard: Shard)
    /// The shard's interrupted backfill had other parameters and was abandoned: a backfill resumes only the
    /// latest of its shard, so once this one starts no backfill could complete it (it stayed `running` for ever).
    case interruptedBackfillAbandoned(runId: Int64)
    /// Listed filters or owners a backfill skips (a deleted filter, another shard's, an owner without filters),
    /// each with why (`Backfill.SelectionRefused`).
    case selectionSkipped([String])
    /// Filters found notifying that had recorded matches while their `notify` was off: those matches (still
    /// recorded, not notified, not silent) were listed as waiting for the filters' digests.
    case unlistedMatchesListed(filters: Int, matches: Int)
    /// `--retention-days` was given and differs from the service's latest run's or backfill's (`Retention.days`).
    case retentionChanged(from: Int, to: Int)
    /// Completing an interrupted run, filters the app created after it started were left to the new run
    /// (`MatchingPass.Plan.filtersCreatedBy`).
    case filtersCreatedSinceLeftOut(runId: Int64, count: Int)
    /// An interrupted backfill resumed with its own clock, cap, retention and zone: this backfill's settings (given
    /// or by default) that differ from them, each with what the backfill keeps, are not used (review of session
    /// 37: only "resuming" was logged).
    case resumedWithItsOwnSettings(runId: Int64, notUsed: [String])
    case finished(RunSummary)
}

/// Receives a run's events. Called from the run's own thread, in order.
public protocol RunOutputHandler: Sendable {
    func handle(_ event: RunEvent)
}

/// Drops every event.
public struct SilentRunOutput: RunOutputHandler {
    public init() {}
    public func handle(_ event: RunEvent) {}
}

/// Keeps every event, for tests.
public final class RecordingRunOutput: RunOutputHandler, @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [RunEvent] = []

    public init() {}

    public func handle(_ event: RunEvent) {
        lock.lock()
        recorded.append(event)
        lock.unlock()
    }

    public var events: [RunEvent] {
        lock.lock()
        defer { lock.unlock() }
        return recorded
    }
}

/// Asked at every unit-of-work boundary whether to stop (SIGTERM, SIGINT, a deadline).
public final class StopRequest: @unchecked Sendable {
    private let lock = NSLock()
    private var reason: String?

    public init() {}

    public func request(_ reason: String) {
        lock.lock()
        if self.reason == nil { self.reason = reason }
        lock.unlock()
    }

    public var requestedReason: String? {
        lock.lock()
        defer { lock.unlock() }
        return reason
    }

    /// Throws `RunStopped` (for `runId`, when a run is recorded) once a stop has been requested.
    public func throwIfRequested(runId: Int64?) throws {
        if let reason = requestedReason { throw RunStopped(reason: reason, runId: runId) }
    }
}

/// The run stopped at a unit boundary because a stop was requested; everything committed stays, and
/// the next run resumes after it.
public struct RunStopped: Error, Sendable, CustomStringConvertible {
    public let reason: String
    public let runId: Int64?
    /// Whether a run's recorded error is this one's description.
    public static func isStopped(_ error: String) -> Bool { error.hasPrefix(prefix) }
    static let prefix = "stopped at a unit-of-work boundary ("

    public var description: String {
        Self.prefix + "\(reason)); committed work is kept, and "
            + (runId.map { "run \($0)" } ?? "the rest")
            + " is resumed by the next run (a backfill: by the same backfill command)"
    }
}

/// Another process took over the run this process was writing: this process lost its run lock (its session was
/// ended from outside) and the next process to take the lock claimed the run. Its open unit rolled back; what it
/// committed before stays, and the other process completes the run (exit status 1).
public struct RunTakenOver: ClassifiedError, Sendable, CustomStringConvertible {
    public let runId: Int64
    public var failureKind: FailureKind { .other }
    public init(runId: Int64) { self.runId = runId }
    public var description: String {
        "run \(runId) was taken over by another process (this one's run lock was lost: its session ended); "
            + "this process stops, the other completes the run"
    }
}

/// Another process holds the run lock of this shard, or of a shard of another layout that overlaps it: nothing
/// was written (exit status 75).
public struct RunLocked: Error, Sendable, CustomStringConvertible {
    public let kind: RunKind
    public let shard: Shard
    /// The running shards of other layouts whose owners overlap `shard`; empty when it is this shard's own lock.
    public let overlapping: [Shard]

    public init(kind: RunKind, shard: Shard, overlapping: [Shard] = []) {
        self.kind = kind
        self.shard = shard
        self.overlapping = overlapping
    }

    public var description: String {
        guard !overlapping.isEmpty else {
            return "another \(kind.rawValue) of shard \(shard) holds the lock; nothing written"
        }
        return "a \(kind.rawValue) of shard \(overlapping.map(\.description).joined(separator: ", ")) holds its lock, "
            + "and its filters overlap shard \(shard)'s (shard layouts that overlap run one at a time); nothing written"
    }
}

/// What a run did: the summary line, the runs table row and the report are built from it.
public struct RunSummary: Sendable, Hashable {
    public let runId: Int64?
    public let kind: RunKind
    public let shard: Shard
    public let clock: Timestamp
    public let dryRun: Bool
    /// The run this one finished, when an earlier process died before completing it.
    public let resumedRunId: Int64?
    public let counters: RunCounters
    /// Matches that qualified in a dry run (nothing is written then).
    public let matchesFound: Int
    public let phaseSeconds: [RunPhase: Double]
    public let totalSeconds: Double
    /// What the run's retention sweep did; nil when none ran (a dry run, an attempt that failed).
    public let retention: RetentionOutcome?
    /// The interrupted run this process completed before its own (`resumedRunId`): its counts over all its
    /// attempts, and the time its completion took. `counters` are the new run's only.
    public let completedRun: CompletedRun?
}

/// What completing an interrupted run wrote, beside the new run's summary.
public struct CompletedRun: Sendable, Hashable {
    public let runId: Int64
    public let counters: RunCounters
    public let totalSeconds: Double

    public init(runId: Int64, counters: RunCounters, totalSeconds: Double) {
        self.runId = runId
        self.counters = counters
        self.totalSeconds = totalSeconds
    }
}
