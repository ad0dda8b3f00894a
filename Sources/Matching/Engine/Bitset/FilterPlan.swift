import Chronology

/// A filter's conditions as the bitset engine evaluates them: a prefix of the candidates (from a
/// `last_login` recency condition, since candidates are in `last_login_at` order) and an AND of
/// OR-groups of needs. Built once per filter and run, from the kind semantics of each MasterItem
/// (the same as the reference evaluator's).
struct FilterPlan: Sendable {
    /// No candidate can satisfy the filter.
    var never = false
    /// Candidates must have `last_login_at >= loginThreshold` (microseconds): a prefix of the batch.
    var loginThreshold: Int64?
    /// Each group is an OR of needs (ascending, distinct); the filter is the AND of its groups.
    var groups: [[BitsetNeed]] = []

    static let lastLoginIndex = MasterItem.LastLogin.item.index

    init(_ conditions: FilterConditions, clock: EvaluationClock) {
        for condition in conditions.conditions {
            add(condition, clock: clock)
            if never { groups = []; loginThreshold = nil; return }
        }
    }

    private mutating func add(_ condition: FilterCondition, clock: EvaluationClock) {
        let item = condition.item
        let index = item.index
        switch (item.kind, condition.form) {
        case (.range, .range(let min, let max)):
            guard item.storage == .nullableSmallint || item.storage == .nullableDate else { never = true; return }
            if min == nil && max == nil {
                groups.append([.atLeast(item: index, bound: Int64.min)])  // answered
            }
            if let min { groups.append([.atLeast(item: index, bound: Int64(min))]) }
            if let max { groups.append([.atMost(item: index, bound: Int64(max))]) }
            if let min, let max, min > max { never = true }
        case (.single, .anyOf(let codes)):
            guard item.storage == .smallint, !codes.isEmpty else { never = true; return }
            groups.append(Self.codeGroup(index, codes))
        case (.multi, .anyOf(let codes)):
            guard item.storage == .smallintArray || item.storage == .integerArray, !codes.isEmpty else {
                never = true
                return
            }
            groups.append(Self.codeGroup(index, codes))
        case (.multi, .allOf(let codes)):
            guard item.storage == .smallintArray || item.storage == .integerArray else { never = true; return }
            for code in Set(codes).sorted() {  // none listed: every set holds them all
                groups.append([.code(item: index, code: code)])
            }
        case (.flag, .flag(let wanted)):
            guard item.storage == .boolean else { never = true; return }
            groups.append([.flag(item: index, value: wanted)])
        case (.recency, .withinDays(let days)):
            guard item.storage == .timestamptz else { never = true; return }
            let threshold = Self.threshold(days: days, clock: clock)
            if index == Self.lastLoginIndex {
                loginThreshold = Swift.max(loginThreshold ?? Int64.min, threshold)
            } else {
                groups.append([.atLeast(item: index, bound: threshold)])
            }
        default:
            never = true  // a form of another kind never satisfies
        }
    }

    private static func codeGroup(_ item: Int, _ codes: [Int32]) -> [BitsetNeed] {
        Set(codes).sorted().map { .code(item: item, code: $0) }
    }

    /// The earliest timestamp that satisfies `withinDays(days)` at `clock`, in microseconds: now − days × 24 h,
    /// or the earliest representable instant should that underflow. That is the recency kind's one rule,
    /// `RecencyItemDefinition.threshold`, which the kind's `evaluate` (and so the reference evaluator) applies
    /// to every recency item: it is an extension function, not a requirement, so no item can replace it. It is
    /// called through `LastLogin` here and is the same for `registered` and any other recency item.
    private static func threshold(days: Int32, clock: EvaluationClock) -> Int64 {
        MasterItem.LastLogin.threshold(days: days, clock: clock).microsecondsSinceEpoch
    }
}
