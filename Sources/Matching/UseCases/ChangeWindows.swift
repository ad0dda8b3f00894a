/// Which profiles each filter considers (runs.md "Incremental run", "Shards"): window `w` < `coverage.entries.count`
/// holds the profiles changed after that entry's mark; the last window, when present, every profile (owners
/// that no run ever covered).
struct ChangeWindows {
    let coverage: Coverage
    let includesUncovered: Bool

    /// A read marks each candidate with one bit per window in a 64-bit mask.
    static let maximumCount = 64

    /// A backfill's: one window, every candidate.
    static let all = ChangeWindows(coverage: .none, includesUncovered: true)

    /// The windows of a run of `shard` from `coverage` (already restricted to the shard).
    init(coverage: Coverage, shard: Shard) {
        self.coverage = coverage
        self.includesUncovered = !coverage.coversWholly(shard)
    }

    private init(coverage: Coverage, includesUncovered: Bool) {
        self.coverage = coverage
        self.includesUncovered = includesUncovered
    }

    /// Every filter considers every profile: the service's first run (under any layout), a backfill.
    var everyProfileForEveryFilter: Bool { coverage.entries.isEmpty && includesUncovered }

    /// The marks to read candidates for, window by window (nil: every profile).
    var marks: [ChangeMark?] {
        coverage.entries.map(\.mark) + (includesUncovered ? [nil] : [])
    }

    /// The window of an owner's filters.
    func window(forOwner ownerId: Int64) -> Int {
        coverage.entryIndex(forOwner: ownerId) ?? coverage.entries.count
    }
}
