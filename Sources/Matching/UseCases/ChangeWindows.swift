/// Which profiles each filter considers (runs.md "Incremental run", "Shards"): window `w` < `coverage.entries.count`
/// holds the profiles changed after that entry's mark; the last window, when present, every profile (owners
/// that no run ever covered).
struct ChangeWindows {
    let coverage: Coverage
    let includesUncovered: Bool
    /// Shards whose owners' filters take no window: an interrupted run being completed leaves alone the owners
    /// that runs reading after it have covered since (`leavingOut(ownersOf:)`).
    let coveredSince: [Shard]

    /// A read marks each candidate with one bit per window in a 64-bit mask.
    static let maximumCount = 64

    /// A backfill's: one window, every candidate.
    static let all = ChangeWindows(coverage: .none, includesUncovered: true)

    /// The windows of a run of `shard` from `coverage` (already restricted to the shard).
    init(coverage: Coverage, shard: Shard) {
        self.init(coverage: coverage, includesUncovered: !coverage.coversWholly(shard))
    }

    private init(coverage: Coverage, includesUncovered: Bool, coveredSince: [Shard] = []) {
        self.coverage = coverage
        self.includesUncovered = includesUncovered
        self.coveredSince = coveredSince
    }

    /// These windows without the filters of owners in `shards`. A run that read its changes at S1 and was
    /// interrupted, while runs of another layout read at S2 (which sees S1's transactions) and succeeded, is
    /// completed later with its own windows; the owners those runs covered have been shown every change up to S2
    /// already, so their remaining filters take no window (runs.md: each filter sees each change once).
    func leavingOut(ownersOf shards: [Shard]) -> ChangeWindows {
        ChangeWindows(coverage: coverage, includesUncovered: includesUncovered, coveredSince: coveredSince + shards)
    }

    /// Every filter considers every profile: the service's first run (under any layout), a backfill.
    var everyProfileForEveryFilter: Bool { coverage.entries.isEmpty && includesUncovered }

    /// The marks to read candidates for, window by window (nil: every profile).
    var marks: [ChangeMark?] {
        coverage.entries.map(\.mark) + (includesUncovered ? [nil] : [])
    }

    /// The window of an owner's filters; nil when they take none (`leavingOut(ownersOf:)`).
    func window(forOwner ownerId: Int64) -> Int? {
        guard !coveredSince.contains(where: { $0.owns(ownerId: ownerId) }) else { return nil }
        return coverage.entryIndex(forOwner: ownerId) ?? coverage.entries.count
    }
}
