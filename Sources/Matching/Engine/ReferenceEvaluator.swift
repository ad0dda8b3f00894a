/// The plainly correct evaluation of saved filters against profiles, condition by condition, through
/// each MasterItem's own definition. Every faster engine is held against it.
public enum ReferenceEvaluator {
    /// Whether the profile satisfies every condition (already effective for the owner's plan) at the clock.
    public static func satisfies(_ profile: Profile, _ conditions: FilterConditions, clock: EvaluationClock) -> Bool {
        conditions.conditions.allSatisfy { condition in
            condition.item.evaluate(condition.form, on: profile.value(of: condition.item), clock: clock)
        }
    }

    /// `satisfies` for row `row` of `columns`, reading only the items the conditions name.
    public static func satisfies(
        _ columns: ProfileColumns, row: Int, _ conditions: FilterConditions,
        clock: EvaluationClock
    ) -> Bool {
        conditions.conditions.allSatisfy { condition in
            condition.item.evaluate(condition.form, on: columns.value(of: condition.item, at: row), clock: clock)
        }
    }

    /// The whole eligibility rule of runs.md: P active; owner active; filter not deleted, readable and valid;
    /// P is not the owner; neither blocked the other; P satisfies the conditions effective for the
    /// owner's plan at the clock. `owner` must be `filter.ownerId`'s record (nil when there is none).
    public static func matches(
        _ profile: Profile, _ filter: SavedFilter, owner: FilterOwner?, blocks: some BlockLookup,
        clock: EvaluationClock
    ) -> Bool {
        matches(profile, filter, conditions: decode(filter), owner: owner, blocks: blocks, clock: clock)
    }

    /// `matches` with the filter's conditions already decoded (`filter.decodedConditions()`), so that a
    /// caller evaluating one filter against many profiles decodes it once.
    public static func matches(
        _ profile: Profile, _ filter: SavedFilter, conditions: Result<FilterConditions, FilterValidationError>,
        owner: FilterOwner?, blocks: some BlockLookup, clock: EvaluationClock
    ) -> Bool {
        let facts = EligibilityFacts(
            profile: profile, filter: filter, owner: owner, conditions: conditions, blocks: blocks)
        guard facts.eligible, let effective = facts.effectiveConditions else { return false }
        return satisfies(profile, effective.conditions, clock: clock)
    }

    /// For an operator: each eligibility check with its detail, and each condition of the filter with
    /// the profile's value and the outcome. `explain(...).matches == matches(...)` always.
    /// A missing profile (nil) fails the checks about it, and every condition that counts; a missing
    /// owner fails its check, and paid conditions show as not on the plan (as for a free owner).
    /// `profileUnreadable`: why the profile's row could not be read (runs quarantine it), when it could not.
    public static func explain(
        _ profile: Profile?, _ filter: SavedFilter, owner: FilterOwner?, blocks: some BlockLookup,
        clock: EvaluationClock, profileUnreadable: UnreadableProfile? = nil
    ) -> Explanation {
        let facts = EligibilityFacts(
            profile: profile, filter: filter, owner: owner, conditions: decode(filter), blocks: blocks,
            profileUnreadable: profileUnreadable)
        let checks = EligibilityRule.allCases.map { rule in
            Explanation.Check(
                name: rule.rawValue, passed: facts.passes(rule), detail: facts.detail(rule),
                checked: facts.checked(rule))
        }
        // A quarantined filter is never evaluated by a run: no condition of it is either (its conditions may be
        // a stand-in for a column that could not be read).
        var lines: [Explanation.ConditionLine] = []
        var evaluated = false
        if filter.quarantineReason == nil, let effective = facts.effectiveConditions,
            case .success(let all) = facts.conditions
        {
            lines = conditionLines(
                all, ignoredPaidKeys: Set(effective.ignoredPaidKeys), value: profile.map { $0.value(of:) },
                clock: clock)
            evaluated = true
        }
        let eligible = EligibilityRule.allCases.allSatisfy(facts.passes)
        let matches = eligible && evaluated && lines.allSatisfy { $0.outcome != .fail }
        return Explanation(eligibility: checks, conditions: lines, matches: matches, conditionsEvaluated: evaluated)
    }

    /// Each condition with the profile's value (`value`; nil: no profile) and its outcome, for `explain`.
    static func conditionLines(
        _ conditions: FilterConditions, ignoredPaidKeys: Set<String>, value: ((AnyMasterItem) -> ItemValue)?,
        clock: EvaluationClock
    ) -> [Explanation.ConditionLine] {
        conditions.conditions.map { condition in
            let item = condition.item
            let outcome: Explanation.Outcome
            if ignoredPaidKeys.contains(item.key) {
                outcome = .ignoredNotOnPlan
            } else if let value, item.evaluate(condition.form, on: value(item), clock: clock) {
                outcome = .pass
            } else {
                outcome = .fail
            }
            return Explanation.ConditionLine(
                itemKey: item.key,
                profileValue: value.map { item.describe(value: $0(item), clock: clock) } ?? "no profile",
                condition: item.describe(condition: condition.form, clock: clock), outcome: outcome)
        }
    }

    private static func decode(_ filter: SavedFilter) -> Result<FilterConditions, FilterValidationError> {
        Result { () throws(FilterValidationError) in try filter.decodedConditions() }
    }
}
