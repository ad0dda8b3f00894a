import Dispatch

/// A filter ready to evaluate: valid, owner active, conditions effective for the owner's plan.
public struct PreparedFilter: Sendable {
    public let filter: SavedFilter
    public let owner: FilterOwner
    public let conditions: FilterConditions

    public init(filter: SavedFilter, owner: FilterOwner, conditions: FilterConditions) {
        self.filter = filter
        self.owner = owner
        self.conditions = conditions
    }
}

/// The active candidate profiles of a run, in the cap's order: latest `last_login_at`, then smallest id.
/// A filter's first matches in this order are its answer. Backed by columns (`ProfileColumns`) whose
/// rows are the candidates in that order.
public struct CandidateBatch: Sendable {
    /// The active candidates, row `i` being the `i`-th in the cap's order.
    public let columns: ProfileColumns

    /// The active profiles of `columns`, in the cap's order. No copy when `columns` already holds only
    /// active profiles in that order (for example read with `WHERE status = 1 ORDER BY last_login_at DESC, id`).
    public init(_ columns: ProfileColumns) {
        if columns.isActiveInCapOrder {
            self.columns = columns
        } else {
            self.columns = columns.selecting(rows: columns.activeRowsInCapOrder())
        }
    }

    /// The active profiles among `profiles`, in the cap's order.
    public init(_ profiles: [Profile]) {
        self.init(ProfileColumns(profiles))
    }

    public var count: Int { columns.count }
    public var ids: [Int64] { columns.ids }

    /// The candidate at `row` (0 is the first in the cap's order), rebuilt from the columns.
    public func profile(at row: Int) -> Profile { columns.profile(at: row) }

    /// Every candidate rebuilt as a `Profile`, in the cap's order (for tests and the reference engine).
    public var profiles: [Profile] { (0..<count).map(columns.profile(at:)) }

    public static func capOrder(_ a: Profile, _ b: Profile) -> Bool {
        CapOrder.precedes(
            login: a.lastLoginAt.microsecondsSinceEpoch, id: a.id, login: b.lastLoginAt.microsecondsSinceEpoch, id: b.id
        )
    }
}

/// Pairs a run must not write: the owner itself, blocks either way, and pairs recorded before.
public struct MatchExclusions: Sendable {
    public let existing: Set<MatchPair>
    public let blocks: BlockSet

    public init(existing: Set<MatchPair>, blocks: BlockSet) {
        self.existing = existing
        self.blocks = blocks
    }

    public func excludes(_ filter: PreparedFilter, profileId: Int64) -> Bool {
        PairEligibility.excludes(profileId: profileId, ownerId: filter.owner.id, blocks: blocks)
            || existing.contains(MatchPair(filterId: filter.filter.id, profileId: profileId))
    }
}

/// Finds, for each filter, its first `limit` new candidates in the cap's order.
public protocol MatchEngine: Sendable {
    func evaluate(
        _ filters: [PreparedFilter], against batch: CandidateBatch, limit: Int,
        clock: EvaluationClock, exclusions: MatchExclusions
    ) -> [FilterResult]

    /// Each filter's own limit: `filters[i]`'s first `limits[i]` new candidates (`limits` as long as
    /// `filters`), exactly what `evaluate(limit:)` answers for that filter at that limit. A filter evaluated
    /// again past recorded pairs asks for as many more as it lost (`NewPairSelection`).
    func evaluate(
        _ filters: [PreparedFilter], against batch: CandidateBatch, limits: [Int],
        clock: EvaluationClock, exclusions: MatchExclusions
    ) -> [FilterResult]
}

extension MatchEngine {
    /// One `evaluate(limit:)` per distinct limit, the answers put back in the filters' order: correct for any
    /// engine; the engines here answer every limit in one pass.
    public func evaluate(
        _ filters: [PreparedFilter], against batch: CandidateBatch, limits: [Int],
        clock: EvaluationClock, exclusions: MatchExclusions
    ) -> [FilterResult] {
        precondition(limits.count == filters.count, "one limit per filter")
        var byLimit: [Int: [Int]] = [:]
        for (index, limit) in limits.enumerated() { byLimit[limit, default: []].append(index) }
        var results = [FilterResult?](repeating: nil, count: filters.count)
        for (limit, indices) in byLimit {
            let answers = evaluate(
                indices.map { filters[$0] }, against: batch, limit: limit, clock: clock, exclusions: exclusions)
            for (index, answer) in zip(indices, answers) { results[index] = answer }
        }
        return results.map { $0! }
    }
}

/// The plainly correct engine: the reference evaluator over every (filter, candidate) pair, filters
/// spread across cores. Every faster engine is held against it.
public struct ReferenceMatchEngine: MatchEngine {
    public init() {}

    public func evaluate(
        _ filters: [PreparedFilter], against batch: CandidateBatch, limit: Int,
        clock: EvaluationClock, exclusions: MatchExclusions
    ) -> [FilterResult] {
        evaluate(filters, against: batch, limitOf: { _ in limit }, clock: clock, exclusions: exclusions)
    }

    public func evaluate(
        _ filters: [PreparedFilter], against batch: CandidateBatch, limits: [Int],
        clock: EvaluationClock, exclusions: MatchExclusions
    ) -> [FilterResult] {
        precondition(limits.count == filters.count, "one limit per filter")
        return evaluate(filters, against: batch, limitOf: { limits[$0] }, clock: clock, exclusions: exclusions)
    }

    private func evaluate(
        _ filters: [PreparedFilter], against batch: CandidateBatch, limitOf: @Sendable (Int) -> Int,
        clock: EvaluationClock, exclusions: MatchExclusions
    ) -> [FilterResult] {
        let results = ResultSlots<FilterResult>(count: filters.count)
        // Each candidate rebuilt once from the columns, shared by every filter.
        let profiles = filters.indices.contains(where: { limitOf($0) > 0 }) ? batch.profiles : []
        DispatchQueue.concurrentPerform(iterations: filters.count) { index in
            let prepared = filters[index]
            let limit = limitOf(index)
            var found: [Int64] = []
            if limit > 0 {
                for profile in profiles
                where ReferenceEvaluator.satisfies(profile, prepared.conditions, clock: clock)
                    && !exclusions.excludes(prepared, profileId: profile.id)
                {
                    found.append(profile.id)
                    if found.count == limit { break }
                }
            }
            results.set(index, FilterResult(filterId: prepared.filter.id, profileIds: found))
        }
        return results.values()
    }
}

/// Fixed slots that concurrent workers fill, one distinct index each. The buffer is allocated once,
/// so no worker ever touches another's slot or the container itself (no exclusivity conflict).
package final class ResultSlots<Value: Sendable>: @unchecked Sendable {
    private let buffer: UnsafeMutableBufferPointer<Value?>

    package init(count: Int) {
        buffer = .allocate(capacity: count)
        buffer.initialize(repeating: nil)
    }

    deinit {
        buffer.deinitialize()
        buffer.deallocate()
    }

    /// Safe because every index is written by exactly one worker and read only after all finish.
    package func set(_ index: Int, _ value: Value) { buffer[index] = value }

    /// Every slot must have been set.
    package func values() -> [Value] { buffer.map { $0! } }
}
