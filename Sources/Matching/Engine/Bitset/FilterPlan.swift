import Chronology

/// A filter's conditions as the bitset engine evaluates them: a prefix of the candidates (from a
/// `last_login` recency condition, since candidates are in `last_login_at` order) and an AND of
/// OR-groups of needs. Built once per filter and run from each condition's `ValueSelection`, which its
/// item's kind definition gives (`Sources/Matching/MasterItems/Kinds`): no kind rule is written here.
struct FilterPlan: Sendable {
    /// No candidate can satisfy the filter.
    var never = false
    /// Candidates must have `last_login_at >= loginThreshold` (microseconds): a prefix of the batch.
    var loginThreshold: Int64?
    /// Each group is an OR of needs; the filter is the AND of its groups.
    var groups: [[BitsetNeed]] = []

    static let lastLoginIndex = MasterItem.LastLogin.item.index

    init(_ conditions: FilterConditions, clock: EvaluationClock) {
        for condition in conditions.conditions {
            let selection = condition.item.selection(for: condition.form, clock: clock)
            if selection.isNever {
                never = true
                groups = []
                loginThreshold = nil
                return
            }
            let item = condition.item.index
            if item == Self.lastLoginIndex, selection.groups.count == 1, selection.groups[0].count == 1,
                case .atLeast(let bound) = selection.groups[0][0], bound > Int64.min
            {
                // The candidates are in `last_login_at` order: a lower bound on it is a prefix.
                loginThreshold = Swift.max(loginThreshold ?? Int64.min, bound)
                continue
            }
            groups += selection.groups.map { group in group.map { BitsetNeed(item: item, test: $0) } }
        }
    }
}
