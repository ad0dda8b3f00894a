import Foundation

/// The chosen filters made ready: decoded and validated (invalid ones recorded), owners checked, the
/// owner's plan applied, each assigned its change window.
struct PreparedFilters: Sendable {
    private(set) var byWindow: [Int: [PreparedFilter]] = [:]
    /// Where each filter is in `byWindow`: a lookup by id without a second copy of every filter (a
    /// `PreparedFilter` is a few hundred bytes; a daily run at 200k x 20k held 14 MB of them in two copies).
    private var positions: [Int64: (window: Int, index: Int)] = [:]
    private(set) var invalid: [InvalidFilter] = []
    private(set) var validIds: [Int64] = []
    /// What each filter adds to the run's counters.
    private(set) var counted: [Int64: RunCounters] = [:]
    private(set) var paidIgnored = 0
    private(set) var ownerInactive = 0
    private(set) var suspended = 0
    /// Valid filters left out because newer runs have covered their owners (`ChangeWindows.leavingOut`): not
    /// evaluated here, but eligible, as the other side of a mutual pair (`MutualFinder`).
    private(set) var coveredSince: Set<Int64> = []

    init(_ chosen: [SavedFilter], owners: [Int64: FilterOwner], windows: ChangeWindows) {
        for (filter, decoded) in zip(chosen, Self.decode(chosen)) {
            guard let decoded else { continue }  // unreadable: in readIssues, never evaluated
            let conditions: FilterConditions
            switch decoded {
            case .success(let value):
                conditions = value
            case .failure(let error):
                invalid.append(InvalidFilter(filterId: filter.id, ownerId: filter.ownerId, error: error))
                counted[filter.id] = RunCounters(filtersInvalid: 1)
                continue
            }
            validIds.append(filter.id)
            // Covered since by newer runs (an interrupted run completed): neither evaluated nor notified here.
            guard let window = windows.window(forOwner: filter.ownerId) else {
                coveredSince.insert(filter.id)
                continue
            }
            guard let owner = owners[filter.ownerId], owner.isActive else {
                ownerInactive += 1
                continue
            }
            if conditions.isSuspended(forOwnerPlan: owner.plan) {
                suspended += 1  // matches nothing, sends nothing, until the owner pays again
                counted[filter.id] = RunCounters(filtersSuspended: 1)
                continue
            }
            let effective = conditions.effective(forOwnerPlan: owner.plan)
            let lapsed = effective.ignoredPaidKeys.isEmpty ? 0 : 1
            paidIgnored += lapsed
            counted[filter.id] = RunCounters(filtersEvaluated: 1, filtersPaidIgnored: lapsed)
            let ready = PreparedFilter(filter: filter, owner: owner, conditions: effective.conditions)
            positions[filter.id] = (window, byWindow[window]?.count ?? 0)
            byWindow[window, default: []].append(ready)
        }
    }

    /// The prepared filter with this id, if it was prepared.
    subscript(id: Int64) -> PreparedFilter? {
        placed(id)?.filter
    }

    /// The prepared filter with this id and its change window, if it was prepared.
    func placed(_ id: Int64) -> (window: Int, filter: PreparedFilter)? {
        positions[id].flatMap { position in byWindow[position.window].map { (position.window, $0[position.index]) } }
    }

    /// Every prepared filter, window by window.
    var all: FlattenSequence<Dictionary<Int, [PreparedFilter]>.Values> { byWindow.values.joined() }
}

extension PreparedFilters {
    /// Each filter's conditions decoded and validated (nil for a quarantined filter), on all cores: parsing
    /// the JSON of 10k filters takes 0.1 s on one.
    static func decode(_ chosen: [SavedFilter]) -> [Result<FilterConditions, FilterValidationError>?] {
        let chunkSize = 256
        let chunks = (chosen.count + chunkSize - 1) / chunkSize
        guard chunks > 1 else { return chosen.map(decode) }
        let slots = ResultSlots<[Result<FilterConditions, FilterValidationError>?]>(count: chunks)
        DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
            let lower = chunk * chunkSize
            slots.set(chunk, chosen[lower..<min(chosen.count, lower + chunkSize)].map(decode))
        }
        return Array(slots.values().joined())
    }

    private static func decode(_ filter: SavedFilter) -> Result<FilterConditions, FilterValidationError>? {
        guard filter.quarantineReason == nil else { return nil }
        return Result { () throws(FilterValidationError) in try filter.decodedConditions() }
    }
}
