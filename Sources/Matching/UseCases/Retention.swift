import Chronology
import Foundation

/// Retention's defaults and bounds (runs.md, cli.md `--retention-days`).
public enum Retention {
    /// A new service's retention. Later, a run or backfill without `--retention-days` keeps the retention of the
    /// service's latest run or backfill (`days(_:runs:)`): one started by hand without the flag never shortens it.
    public static let defaultDays = 180
    public static let maximumDays = 36_500
    /// Pairs deleted per transaction: short row locks, no table lock.
    public static let batchSize = 50_000
    /// At least this many batches a run (5M pairs); a larger backlog is worked off by the next runs.
    public static let minimumBatchesPerRun = 100
    /// At most this many (50M pairs, a few minutes of deletes), however much the day recorded: a day with a large
    /// backfill or a first run beside a backlog must not make one run's sweep outlast its schedule's limit.
    public static let batchesCeiling = 1_000

    /// The batches a run's sweep may delete: `minimum`, or enough for twice `recorded` (the caller's: the more of
    /// the pairs the run recorded and those the whole service recorded in the day before its clock), whichever
    /// is more, and not more than `ceiling` (unless `minimum` is). A day's expiring pairs are about what a day
    /// records (the pairs of the day `--retention-days` ago, like today's), so a fixed budget would fall behind
    /// a service that records more than it a day (at 1M x 100k a day records about 6.7M pairs, more than 5M),
    /// and the backlog would grow by the difference every day. Twice gives room to work off a backlog (a month
    /// with the timer off) in a few runs.
    public static func sweepBatches(
        recorded: Int, batchSize: Int, minimum: Int, ceiling: Int = batchesCeiling
    ) -> Int {
        let size = max(1, batchSize)
        let (twice, overflow) = max(0, recorded).multipliedReportingOverflow(by: 2)
        let needed = overflow ? Int.max / size : twice / size + (twice % size == 0 ? 0 : 1)
        return max(max(1, minimum), min(needed, ceiling))
    }

    /// How far a sweep's cutoff stays behind its run's (`MatchingPass.forgetExpired`): more than the seconds
    /// between the clocks of shards started together, so that no shard's sweep deletes a pair another, by its
    /// own clock, still counts as recorded. A pair in between is forgotten at each run's clock all the same
    /// (`RecordedPairs.expired`); the table holds it until the next day's sweep.
    public static let sweepLagMicroseconds: Int64 = 3_600_000_000

    /// How long a match a digest passed over (it no longer qualified) may still come back in a later digest
    /// when it qualifies again (runs.md): 30 days from the decision that passed it over (from the filter's next
    /// digest, if that is later: `comebackStart`), and never past its
    /// pair's retention. Every digest of its filter reads it again until then; kept until the retention
    /// instead, a filter's passed-over matches would pile up for 180 days by default and each digest day would
    /// read them all, a cost that follows the service's age. After it the pair stays recorded until the
    /// retention (it does not match again), but no digest shows it.
    public static let comebackDays = 30

    /// When the comeback of a match that a decision at `decidedAt` passed over starts counting (the entry's
    /// `passed_over_at`): at the decision, or at the filter's next digest if that comes later, `every` after
    /// the decision (on the calendar of `timeZone`, as the due rule adds it). A match a daily or weekly
    /// filter's digest passed over may come back for 30 days; one a monthly (or rarer) filter's digest passed
    /// over would otherwise be gone before that filter's next digest could show it (found by review in
    /// session 29). Never more than `comebackStartLimitDays` ahead: a filter notified once a century keeps such
    /// matches until their pair's retention, which ends the comeback anyway.
    public static func comebackStart(decidedAt: Timestamp, every: NotifyInterval, in timeZone: TimeZone) -> Timestamp {
        let next = every.added(to: decidedAt, in: timeZone)
        let limit = decidedAt.adding(microseconds: Int64(comebackStartLimitDays) * Timestamp.microsecondsPerDay)
        return min(max(decidedAt, next), limit)
    }

    /// How far ahead of its decision a comeback may start (`comebackStart`): ten years, beyond any retention a
    /// service keeps, and within the calendar both stores write.
    public static let comebackStartLimitDays = 3_660

    /// A match a digest passed over before this instant is no longer read at `clock` (its comeback is over).
    public static func comebackCutoff(clock: Timestamp) -> Timestamp {
        cutoff(clock: clock, retentionDays: comebackDays)
    }

    /// The instant before which a recorded pair is forgotten at `clock`: `retentionDays` days earlier.
    public static func cutoff(clock: Timestamp, retentionDays: Int) -> Timestamp {
        clock.adding(microseconds: -Int64(clamping: retentionDays) &* Timestamp.microsecondsPerDay)
    }

    /// The retention a run or backfill applies: `given` (the operator's `--retention-days`), or the latest
    /// run's or backfill's, or `defaultDays` for a new service. The sweep forgets every filter's pairs, whichever
    /// shard or filters the run covers: a backfill of one filter without the flag, or a shard's run by hand,
    /// must not forget a year's pairs because its default says 180.
    ///
    /// A given value other than the latest run's or backfill's is reported (`RunEvent.retentionChanged`): the
    /// sweep of any shard forgets every filter's pairs at its own retention, so two hosts given two values (a
    /// staged rollout, one host's environment file forgotten) forget each other's pairs early and record them
    /// again as new, shown again in digests (review of session 33). A deliberate change reports it once.
    static func days(_ given: Int?, runs: any RunRepository, output: any RunOutputHandler) throws -> Int {
        let latest = try runs.latestRetentionDays()
        guard let given else { return latest ?? defaultDays }
        if let latest, latest != given { output.handle(.retentionChanged(from: latest, to: given)) }
        return given
    }
}
