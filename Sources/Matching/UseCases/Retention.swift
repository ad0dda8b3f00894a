/// Retention's defaults and bounds (runs.md, cli.md `--retention-days`).
public enum Retention {
    /// A new service's retention. Later, a run or backfill without `--retention-days` keeps the retention of the
    /// service's latest incremental run (`days(_:runs:)`): one started by hand never shortens it.
    public static let defaultDays = 180
    public static let maximumDays = 36_500
    /// Pairs deleted per transaction: short row locks, no table lock.
    public static let batchSize = 50_000
    /// At most this many batches a run (5M pairs); a larger backlog is worked off by the next runs.
    public static let maxBatchesPerRun = 100

    /// The retention a run or backfill applies: `given` (the operator's `--retention-days`), or the latest
    /// incremental run's, or `defaultDays` for a new service. The sweep forgets every filter's pairs, whichever
    /// shard or filters the run covers: a backfill of one filter without the flag, or a shard's run by hand,
    /// must not forget a year's pairs because its default says 180.
    static func days(_ given: Int?, runs: any RunRepository) throws -> Int {
        if let given { return given }
        return try runs.latestRetentionDays() ?? defaultDays
    }
}
