/// What the use cases read and write, passed as one value: a store implements the small protocols
/// (`FilterRepository`, `ProfileRepository`, …), the command line builds this bundle once from it, and each
/// use case takes the bundle and uses only the repositories it needs.
public struct MatchingRepositories: Sendable {
    public var filters: any FilterRepository
    public var profiles: any ProfileRepository
    public var blocks: any BlockRepository
    public var matches: any MatchRepository
    public var runs: any RunRepository

    public init(
        filters: any FilterRepository, profiles: any ProfileRepository, blocks: any BlockRepository,
        matches: any MatchRepository, runs: any RunRepository
    ) {
        self.filters = filters
        self.profiles = profiles
        self.blocks = blocks
        self.matches = matches
        self.runs = runs
    }

    /// Every repository from one store (PostgreSQL, or the in-memory twin).
    public init(store: some FilterRepository & ProfileRepository & BlockRepository & MatchRepository & RunRepository) {
        self.init(filters: store, profiles: store, blocks: store, matches: store, runs: store)
    }

    /// The same bundle with `matches` replaced (a test's failing writer, say).
    public func replacing(matches: any MatchRepository) -> MatchingRepositories {
        var copy = self
        copy.matches = matches
        return copy
    }
}

/// How a run or backfill works through its units of work: when to stop, and how large a unit is.
public struct PassOptions: Sendable {
    /// Asked to stop (SIGTERM, SIGINT): the run ends at the next unit-of-work boundary.
    public var stop: StopRequest
    /// A unit of work commits after this many filters…
    public var unitFilterLimit: Int
    /// …or this many new matches, whichever comes first.
    public var unitMatchLimit: Int
    /// Pairs the retention sweep deletes a transaction, and the batches a run's sweep takes at least
    /// (`Retention.sweepBatches`: more when the run recorded more).
    public var retentionBatchSize: Int
    public var retentionMinimumBatches: Int

    public init(
        stop: StopRequest = StopRequest(), unitFilterLimit: Int = 2_000, unitMatchLimit: Int = 50_000,
        retentionBatchSize: Int = Retention.batchSize,
        retentionMinimumBatches: Int = Retention.minimumBatchesPerRun
    ) {
        self.stop = stop
        self.unitFilterLimit = max(1, unitFilterLimit)
        self.unitMatchLimit = max(1, unitMatchLimit)
        self.retentionBatchSize = max(1, retentionBatchSize)
        self.retentionMinimumBatches = max(1, retentionMinimumBatches)
    }
}
