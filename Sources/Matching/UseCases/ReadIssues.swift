/// What one pass read from the app's tables that was odd or unreadable (runs.md, "Eligibility"): the
/// profiles' and filters' read reports, and the filters whose owner has no profile row. Never a reason
/// to fail: the run counts them in its summary, and the store lists quarantined rows for operators.
public struct ReadIssues: Sendable, Hashable {
    /// Rows quarantined (profiles, then filters), in reading order.
    public let quarantined: [QuarantinedRow]
    /// Ids of the profiles read with odd values.
    public let oddProfileIds: [Int64]
    /// Ids of the filters read with odd values, or whose owner has no profile row.
    public let oddFilterIds: [Int64]
    /// Ids of every filter read (so that a store can forget entries of filters that now read fine).
    public let filterIdsRead: [Int64]
    /// Ids of every profile read (likewise).
    public let profileIdsRead: [Int64]

    public init(
        quarantined: [QuarantinedRow] = [], oddProfileIds: [Int64] = [], oddFilterIds: [Int64] = [],
        filterIdsRead: [Int64] = [], profileIdsRead: [Int64] = []
    ) {
        self.quarantined = quarantined
        self.oddProfileIds = oddProfileIds
        self.oddFilterIds = oddFilterIds
        self.filterIdsRead = filterIdsRead
        self.profileIdsRead = profileIdsRead
    }

    /// Collects the issues of one pass's reads, at its clock.
    public init(
        candidates: ProfileColumns, filters: [SavedFilter], owners: [Int64: FilterOwner], clock: EvaluationClock
    ) {
        var quarantined = candidates.readReport.quarantined
        var oddFilters: [Int64] = []
        for filter in filters {
            if let reason = filter.quarantineReason {
                quarantined.append(QuarantinedRow(kind: .filter, rowId: filter.id, reason: reason))
            } else if filter.heldOddValues || owners[filter.ownerId] == nil {
                oddFilters.append(filter.id)
            }
        }
        // The filters' owners are profiles the pass read too: one with an odd status or plan is counted once,
        // whether or not it is also a candidate (the capture does not watch `plan`, so an owner whose plan is
        // odd may never be one).
        var oddProfiles = candidates.readReport.oddIds
        var counted = Set(oddProfiles)
        for id in Self.impossibleDates(in: candidates, clock: clock) where counted.insert(id).inserted {
            oddProfiles.append(id)
        }
        for id in Set(filters.map(\.ownerId)).sorted() where owners[id]?.heldOddValues == true {
            if counted.insert(id).inserted { oddProfiles.append(id) }
        }
        self.init(
            quarantined: quarantined, oddProfileIds: oddProfiles, oddFilterIds: oddFilters,
            filterIdsRead: filters.map(\.id), profileIdsRead: candidates.ids)
    }

    /// The candidates whose date the run's clock makes impossible, which count as NULL (runs.md): a birth after
    /// the run's date, or more years before it than the item's domain holds (`RangeItemDefinition.rangeValue`).
    /// The read cannot tell them (it does not know the run's date); found by review in session 32, when they were
    /// evaluated as NULL but not counted.
    static func impossibleDates(in candidates: ProfileColumns, clock: EvaluationClock) -> [Int64] {
        var ids: [Int64] = []
        for item in MasterItem.all where item.storage == .nullableDate {
            let column = candidates.columns[item.index]
            guard case .dates(let dates) = column, let keys = item.orderedKeys(of: column, clock: clock) else {
                continue
            }
            for row in 0..<dates.count where dates.answered[row] && !keys.defined[row] {
                ids.append(candidates.ids[row])
            }
        }
        return ids
    }

    /// These issues and another read's of profiles (the waiting matches' for the digests): an odd or quarantined
    /// profile counted once, whichever read met it first.
    public func including(_ report: ReadReport, read ids: [Int64]) -> ReadIssues {
        let odd = Set(oddProfileIds)
        let listed = Set(quarantined.compactMap { $0.kind == .profile ? $0.rowId : nil })
        var seen = Set<Int64>()
        let newOdd = report.oddIds.filter { !odd.contains($0) && seen.insert($0).inserted }
        let newQuarantined = report.quarantined.filter { row in
            guard let id = row.rowId else { return true }
            return !listed.contains(id) && seen.insert(id).inserted
        }
        return ReadIssues(
            quarantined: quarantined + newQuarantined, oddProfileIds: oddProfileIds + newOdd,
            oddFilterIds: oddFilterIds, filterIdsRead: filterIdsRead, profileIdsRead: profileIdsRead + ids)
    }

    /// These issues and another read's of filters (the mutual check's: the matched profiles' filters) with
    /// `owners`, the owners it found for every filter this pass had not read: a filter this pass already read is
    /// not counted again; one unreadable is listed, one with odd values or whose owner has no profile row is
    /// counted, and an odd owner is counted once among the profiles.
    public func including(filters: [SavedFilter], owners: [Int64: FilterOwner]) -> ReadIssues {
        var seen = Set(filterIdsRead)
        var quarantined = self.quarantined
        var oddFilters = oddFilterIds
        var newIds: [Int64] = []
        var lookedUp = Set<Int64>()
        for filter in filters where seen.insert(filter.id).inserted {
            newIds.append(filter.id)
            lookedUp.insert(filter.ownerId)
            if let reason = filter.quarantineReason {
                quarantined.append(QuarantinedRow(kind: .filter, rowId: filter.id, reason: reason))
            } else if filter.heldOddValues || owners[filter.ownerId] == nil {
                oddFilters.append(filter.id)
            }
        }
        var oddProfiles = oddProfileIds
        var counted = Set(oddProfiles)
        for id in lookedUp.sorted() where owners[id]?.heldOddValues == true {
            if counted.insert(id).inserted { oddProfiles.append(id) }
        }
        return ReadIssues(
            quarantined: quarantined, oddProfileIds: oddProfiles, oddFilterIds: oddFilters,
            filterIdsRead: filterIdsRead + newIds, profileIdsRead: profileIdsRead)
    }

    /// The counts for `RunCounters`.
    public var counters: RunCounters {
        RunCounters(
            profilesQuarantined: quarantined.count { $0.kind == .profile },
            filtersQuarantined: quarantined.count { $0.kind == .filter },
            oddValues: oddProfileIds.count + oddFilterIds.count)
    }

    public var isEmpty: Bool { quarantined.isEmpty && oddProfileIds.isEmpty && oddFilterIds.isEmpty }
}
