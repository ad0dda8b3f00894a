/// Why a profile does or does not match a saved filter (`matcher explain`); `Report.explanation` renders it.
public struct Explanation: Sendable, Hashable {
    /// One eligibility check (`EligibilityRule`).
    public struct Check: Sendable, Hashable {
        public let name: String
        /// Whether the check rules nothing out: it holds, or it was not checked (`checked`).
        public let passed: Bool
        public let detail: String
        /// False when the check does not apply (a quarantined filter's validity): shown as "not checked".
        public let checked: Bool

        public init(name: String, passed: Bool, detail: String, checked: Bool = true) {
            self.name = name
            self.passed = passed || !checked
            self.detail = detail
            self.checked = checked
        }
    }

    public enum Outcome: Sendable, Hashable {
        case pass
        case fail
        /// A condition on a paid item while the owner lacks the plan: not applied.
        case ignoredNotOnPlan
    }

    /// One condition of the filter, with the profile's value.
    public struct ConditionLine: Sendable, Hashable {
        public let itemKey: String
        public let profileValue: String
        public let condition: String
        public let outcome: Outcome

        public init(itemKey: String, profileValue: String, condition: String, outcome: Outcome) {
            self.itemKey = itemKey
            self.profileValue = profileValue
            self.condition = condition
            self.outcome = outcome
        }
    }

    /// Profile active, owner active, filter not deleted, filter readable, filter valid (with the validation error),
    /// not the owner, no block either way.
    public let eligibility: [Check]
    /// One per condition present in the filter, in catalogue order; empty when the filter is invalid or
    /// quarantined (`conditionsEvaluated`).
    public let conditions: [ConditionLine]
    public let matches: Bool
    /// Whether the conditions were evaluated: not for an invalid filter, nor a quarantined one (a run evaluates
    /// neither), so that an empty `conditions` does not read as a `{}` filter's, which matches everyone.
    public let conditionsEvaluated: Bool

    public init(eligibility: [Check], conditions: [ConditionLine], matches: Bool, conditionsEvaluated: Bool = true) {
        self.eligibility = eligibility
        self.conditions = conditions
        self.matches = matches
        self.conditionsEvaluated = conditionsEvaluated
    }
}
