import Chronology
import Foundation

/// What an operator asks first (`matcher status`, cli.md): per shard, the last successful run and how far
/// behind now it is, the runs that went wrong since; the digests waiting; invalid and quarantined rows; how
/// much `filter_matches` keeps; the notification pause. Facts as the store holds them at `now`; every age is
/// derived from `now`, so the same facts always read the same.
public struct ServiceStatus: Sendable, Hashable {
    /// The store's clock when the status was read.
    public let now: Timestamp
    /// One per shard layout entry (`matcher_shard_progress`), plus the shards whose latest incremental run is
    /// running or failed with no progress of their own yet; by shard count, then index.
    public let shards: [ShardStatus]
    public let digests: WaitingDigests
    /// Filters skipped as invalid (`matcher_invalid_filters`).
    public let invalidFilters: Int
    /// Rows left out as unreadable (`matcher_quarantine`).
    public let quarantinedProfiles: Int
    public let quarantinedFilters: Int
    public let retention: RetentionState
    /// The pause in force (`matcher notifications pause`), nil when notifications flow.
    public let notificationPause: NotificationPause?
    /// Notifications the push sender has not marked sent.
    public let unsent: UnsentNotifications

    public init(
        now: Timestamp, shards: [ShardStatus], digests: WaitingDigests, invalidFilters: Int,
        quarantinedProfiles: Int, quarantinedFilters: Int, retention: RetentionState,
        notificationPause: NotificationPause?, unsent: UnsentNotifications = .none
    ) {
        self.now = now
        self.shards = shards.sorted { ($0.shard.count, $0.shard.index) < ($1.shard.count, $1.shard.index) }
        self.digests = digests
        self.invalidFilters = invalidFilters
        self.quarantinedProfiles = quarantinedProfiles
        self.quarantinedFilters = quarantinedFilters
        self.retention = retention
        self.notificationPause = notificationPause
        self.unsent = unsent
    }

    /// Quarantined rows of both kinds.
    public var quarantinedRows: Int { quarantinedProfiles + quarantinedFilters }

    /// The status of `shard`'s own entry, if any.
    public func shard(_ shard: Shard) -> ShardStatus? { shards.first { $0.shard == shard } }

    /// Whole seconds from `earlier` to `now` (negative when `earlier` is ahead of the store's clock).
    public func seconds(since earlier: Timestamp) -> Int64 {
        let (difference, overflow) = now.microsecondsSinceEpoch.subtractingReportingOverflow(
            earlier.microsecondsSinceEpoch)
        if overflow { return earlier.microsecondsSinceEpoch < 0 ? .max : .min }
        return difference / 1_000_000
    }

    /// The lag past which a shard is "lagging": the same 26 h as the MatcherLagHigh alert (daily runs).
    public static let lagThresholdSeconds: Int64 = 26 * 3_600

    /// How a shard stands, for people and scripts.
    public func state(of shard: ShardStatus) -> ShardState {
        // First: its runs refuse before they record anything, so nothing below would show it.
        if shard.progressAhead { return .progressAhead }
        // Stopped or interrupted is routine (the next run completes it) only while the shard is not lagging: a run
        // stopped every day (its unit's time limit) said `stopped` while its lag passed the alerts' 26 h (review
        // of session 33), and so did a first run stopped every day, for a shard that never succeeded. Failing
        // stays failing: that names the cause.
        let lagging = shard.lastSuccess.map { seconds(since: $0.clock) > Self.lagThresholdSeconds } ?? false
        let firstRunsLong =
            shard.lastSuccess == nil
            && (shard.runsSince.first.map { seconds(since: $0.clock) > Self.lagThresholdSeconds } ?? false)
        let routine = { (state: ShardState) -> ShardState in
            lagging ? .lagging : firstRunsLong ? .neverSucceeded : state
        }
        if let latest = shard.runsSince.last {
            switch latest.status {
            case .failed where latest.isStopped: return routine(.stopped)
            case .failed: return .failing
            case .running where latest.lockHeld != true: return routine(.interrupted)
            default: break
            }
        }
        if lagging { return .lagging }
        if shard.runsSince.last?.status == .running { return .running }
        if shard.lastSuccess == nil && shard.progress == nil { return .neverSucceeded }
        return .ok
    }

    /// Seconds from the shard's last success's clock to now (nil: no success recorded).
    public func lagSeconds(of shard: ShardStatus) -> Int64? { shard.lastSuccess.map { seconds(since: $0.clock) } }

    /// The shard furthest behind among those whose progress still covers owners (every layout with an entry in
    /// `matcher_shard_progress`; one folded into a newer layout's has none): the clock of its last successful
    /// run, or, without one, when its mark was taken. Nil when no shard has progress. Every shard's run exports
    /// it, so a shard that no timer starts (one forgotten after a reshard) is seen by the others, which run.
    public var stalestShardSince: Timestamp? {
        shards.filter { $0.progress != nil }.compactMap { $0.lastSuccess?.clock ?? $0.progress?.takenAt }.min()
    }

    /// Seconds from `stalestShardSince` to now.
    public var stalestLagSeconds: Int64? { stalestShardSince.map { seconds(since: $0) } }

    /// Seconds from when the shard's progress mark was taken (or reset) to now.
    public func progressAgeSeconds(of shard: ShardStatus) -> Int64? {
        shard.progress.map { seconds(since: $0.takenAt) }
    }
}

public enum ShardState: String, Sendable, Hashable, CaseIterable {
    /// The last run succeeded within the lag threshold.
    case ok
    /// A run of the shard holds its lock now.
    case running
    /// The latest run is `running` but no process holds the shard's lock: it died; the next run completes it
    /// (or an operator abandons it).
    case interrupted
    /// The latest run failed; the next run retries it.
    case failing
    /// The latest run was stopped on request (SIGTERM, SIGINT: a shutdown, `systemctl stop`); what it committed
    /// stays, and the next run completes it. Not a failure.
    case stopped
    /// The last success is older than the lag threshold.
    case lagging
    /// No run of the shard has succeeded yet.
    case neverSucceeded = "never_succeeded"
    /// Its progress is ahead of the database (a restore, a failover): every run refuses (exit 78) until
    /// `matcher progress reset` (docs/runbook.md).
    case progressAhead = "progress_ahead"
}

/// One shard's part of the status.
public struct ShardStatus: Sendable, Hashable {
    public let shard: Shard
    /// Its coverage entry (nil when it never succeeded, or its entry was folded into a newer layout's).
    public let progress: CoverageEntry?
    /// Its latest successful incremental run.
    public let lastSuccess: RunBrief?
    /// Its incremental runs after the last success that are running, failed or abandoned, oldest first.
    public let runsSince: [RunBrief]
    /// Its progress is a snapshot ahead of the database's transactions (a restore, a failover to a server
    /// behind): its runs refuse before they start (exit 78) and write no run row, until `matcher progress reset`.
    public let progressAhead: Bool

    public init(
        shard: Shard, progress: CoverageEntry?, lastSuccess: RunBrief?, runsSince: [RunBrief],
        progressAhead: Bool = false
    ) {
        self.progressAhead = progressAhead
        self.shard = shard
        self.progress = progress
        self.lastSuccess = lastSuccess
        self.runsSince = runsSince.sorted { $0.id < $1.id }
    }

    /// The shards an operator asks about, in both stores: those with progress, those whose latest run is
    /// unfinished (a new layout's shard that has not succeeded yet), and those whose latest run was abandoned
    /// while some of their owners have had no success since (runbook: abandoned runs show until the next success;
    /// a shard with no progress of its own vanished with its abandoned run, review of session 36); each with its
    /// progress, its last success and the runs after it that did not succeed. `runs`: incremental runs in id
    /// order, at least each shard's last success and every run after it. `progressAhead`: whether an entry's
    /// snapshot is ahead of the database.
    public static func statuses(
        runs: [RunBrief], coverage: Coverage, progressAhead: (CoverageEntry) -> Bool
    ) -> [ShardStatus] {
        var shards = Set(coverage.entries.map(\.shard))
        for (shard, ofShard) in Dictionary(grouping: runs, by: \.shard) {
            guard let latest = ofShard.last else { continue }
            if latest.status.isUnfinished {
                shards.insert(shard)
            } else if latest.status == .abandoned {
                let since = latest.startedAt ?? latest.clock
                let coveredSince = coverage.entries.filter { $0.takenAt > since }.map(\.shard)
                if !Coverage.covers(coveredSince, wholly: shard) { shards.insert(shard) }
            }
        }
        return shards.map { shard in
            let ofShard = runs.filter { $0.shard == shard }
            let success = ofShard.last { $0.status == .succeeded }
            let progress = coverage.entries.first { $0.shard == shard }
            return ShardStatus(
                shard: shard, progress: progress, lastSuccess: success,
                runsSince: ofShard.filter { $0.id > (success?.id ?? 0) && $0.status != .succeeded },
                progressAhead: progress.map(progressAhead) ?? false)
        }
    }
}

/// A row of `matcher_runs`, as the status shows it.
public struct RunBrief: Sendable, Hashable {
    public let id: Int64
    public let kind: RunKind
    public let shard: Shard
    public let status: RunStatus
    public let clock: Timestamp
    public let startedAt: Timestamp?
    public let finishedAt: Timestamp?
    /// The failure line of a failed run.
    public let error: String?
    /// For a `running` run: whether a process holds its shard's run lock now (false: it died). nil otherwise.
    public let lockHeld: Bool?

    public init(
        id: Int64, kind: RunKind, shard: Shard, status: RunStatus, clock: Timestamp, startedAt: Timestamp?,
        finishedAt: Timestamp?, error: String?, lockHeld: Bool?
    ) {
        self.id = id
        self.kind = kind
        self.shard = shard
        self.status = status
        self.clock = clock
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.error = error
        self.lockHeld = lockHeld
    }

    /// Whether it was stopped on request (SIGTERM, SIGINT): stored as failed, with the stop as its error.
    public var isStopped: Bool { status == .failed && error.map(RunStopped.isStopped) == true }
}

/// Matches recorded and waiting for a digest (`matcher_waiting_matches`). A listed match waits for a digest
/// while its filter exists, is not deleted, has `notify` on, its owner is active, and no digest decision (written
/// or held back) has read it and passed it over (the retention sweep's rule, `RetentionSQL.stillWaits`,
/// which also keeps the matches of a hidden or suspended owner, who may come back). Of those, the ones whose
/// filter a run prepares (not invalid, quarantined, or suspended for its owner's plan) are the digests that can
/// come now; the others stay listed until a digest counts them or retention forgets them, and are counted apart
/// so that they never make a digest look late.
public struct WaitingDigests: Sendable, Hashable {
    public let matches: Int
    /// Filters with matches waiting: the digests that are waiting.
    public let filters: Int
    public let oldestMatchedAt: Timestamp?
    /// Since when the most overdue waiting digest has been due: the latest of its oldest waiting match and the
    /// time its filter became due again (`notify_every` after its last digest, less the tolerance). A weekly
    /// filter's matches wait up to a week by design; its digest is overdue only once that week is up.
    public let oldestDueSince: Timestamp?
    /// Listed rows that no digest counts now (notify off, filter deleted, gone, invalid, quarantined or suspended,
    /// owner inactive, passed over).
    public let notNotifiable: Int

    public init(
        matches: Int, filters: Int, oldestMatchedAt: Timestamp?, oldestDueSince: Timestamp? = nil,
        notNotifiable: Int = 0
    ) {
        self.matches = matches
        self.filters = filters
        self.oldestMatchedAt = oldestMatchedAt
        self.oldestDueSince = oldestDueSince
        self.notNotifiable = notNotifiable
    }

    /// When a filter's waiting digest became due: at its oldest waiting match (`firstWaiting`) if it has had no
    /// digest, else not before `notify_every` after its last one, less the due rule's tolerance
    /// (`NotificationPlanner.isDue`).
    public static func dueSince(
        firstWaiting: Timestamp, lastNotifiedAt: Timestamp?, every: NotifyInterval, timeZone: TimeZone
    ) -> Timestamp {
        guard let last = lastNotifiedAt else { return firstWaiting }
        let due = every.added(to: last, in: timeZone).adding(microseconds: -every.dueTolerance)
        return max(firstWaiting, due)
    }
}

/// What `filter_matches` keeps (runs.md retention).
public struct RetentionState: Sendable, Hashable {
    /// Rows of `filter_matches`: counted when the table is small, else the planner's estimate.
    public let rows: Int
    public let rowsEstimated: Bool
    /// The oldest `matched_at` in the table; nil when the table is empty (or it was not read). Older than the
    /// retention by design while a match waits for a digest that cannot come yet (a hidden owner's, a weekly
    /// filter's beyond a short retention): the sweep keeps those.
    public let oldestMatchedAt: Timestamp?
    /// The oldest `matched_at` of a pair the sweep may forget (not waiting for a digest): past the retention by
    /// more than a day, the sweep has a backlog; it moves forward as the sweep catches up. Nil when there is
    /// none (or it was not read).
    public let oldestForgettableAt: Timestamp?
    /// `--retention-days` of the latest run or backfill.
    public let retentionDays: Int?
    /// The primary key's size against its packed size (nil where there are no indexes: in memory). Past about
    /// twice, `matcher reindex` rebuilds it (docs/runbook.md).
    public let primaryKey: PrimaryKeySize?
    /// Invalid indexes an interrupted rebuild left on `filter_matches` (every insert still pays for them
    /// until the next `matcher reindex` drops them).
    public let abandonedRebuilds: [String]
    /// Where the marks of waiting matches landed (nil where there are no pages: in memory).
    public let marks: MarkPlacement?

    public init(
        rows: Int, rowsEstimated: Bool, oldestMatchedAt: Timestamp?, oldestForgettableAt: Timestamp? = nil,
        retentionDays: Int?, primaryKey: PrimaryKeySize? = nil, abandonedRebuilds: [String] = [],
        marks: MarkPlacement? = nil
    ) {
        self.rows = rows
        self.rowsEstimated = rowsEstimated
        self.oldestMatchedAt = oldestMatchedAt
        self.oldestForgettableAt = oldestForgettableAt
        self.retentionDays = retentionDays
        self.primaryKey = primaryKey
        self.abandonedRebuilds = abandonedRebuilds
        self.marks = marks
    }

    /// From how many times its packed size `matcher reindex` rebuilds the primary key (its `--min-ratio`).
    public static let rebuildRatio = 2.0

    public var primaryKeyBytes: Int64? { primaryKey?.bytes }
    public var primaryKeyPackedBytes: Int64? { primaryKey?.packedBytes }
    /// How many times its packed size the primary key is.
    public var primaryKeyRatio: Double? { primaryKey?.ratio }
}

/// Notifications whose `sent_at` is NULL: written by the runs for the push sender, which sends and marks them. Only
/// sent ones are ever forgotten (runs.md retention), so a push sender that stops, or skips rows it cannot deliver,
/// leaves them growing: the operator's to see (`matcher status`, `MatcherNotificationsUnsent`).
public struct UnsentNotifications: Sendable, Hashable {
    public let count: Int
    /// The oldest one's `created_at`: the clock of the run that wrote it. Nil when there is none.
    public let oldestCreatedAt: Timestamp?

    public init(count: Int, oldestCreatedAt: Timestamp?) {
        self.count = count
        self.oldestCreatedAt = oldestCreatedAt
    }

    public static let none = UnsentNotifications(count: 0, oldestCreatedAt: nil)
}

/// How the marks of waiting matches (the only updates of `filter_matches`) landed since the server's statistics
/// were last reset: in place (HOT: the new version on the row's page, no new index entry) or moved to another
/// page. With the daily timer nearly all stay in place; with runs more often than the digests, most move unless
/// the table's fillfactor leaves them room (deploy/README.md, "Daily, not hourly").
public struct MarkPlacement: Sendable, Hashable {
    public let marks: Int64
    public let inPlace: Int64
    /// `filter_matches`' fillfactor (the migrations set 90).
    public let fillfactor: Int

    public init(marks: Int64, inPlace: Int64, fillfactor: Int) {
        self.marks = marks
        self.inPlace = inPlace
        self.fillfactor = fillfactor
    }

    /// The share of marks made in place; nil before the first mark.
    public var inPlaceShare: Double? { marks > 0 ? Double(inPlace) / Double(marks) : nil }

    /// Enough marks to judge, and most of them moved their row: the pages lack room for their marks.
    public var mostMove: Bool { marks >= Self.judgedFrom && (inPlaceShare ?? 1) < 0.5 }

    /// Marks counted before `mostMove` judges (a first week's few digests say little).
    public static let judgedFrom: Int64 = 100_000
}
