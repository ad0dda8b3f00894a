/// A multi-choice item: a set of codes in an array column, `'{}'` = unanswered.
/// `{"anyOf": [codes]}` is satisfied when the sets share a code, `{"allOf": [codes]}` when the
/// profile's set holds every listed code. 0 is never a code.
public protocol MultiChoiceItemDefinition: MasterItemDefinition {}

extension MultiChoiceItemDefinition {
    public static var kind: ItemKind { .multi }
    public static var storage: ColumnStorage { .smallintArray }

    public static func decodeCondition(_ json: JSONValue) throws(FilterValidationError) -> ConditionForm {
        let reader = ConditionReader(key: key)
        let members = try reader.members(of: json, allowed: ["anyOf", "allOf"])
        let codeDomain = domain ?? 1...Int32.max
        switch (members["anyOf"], members["allOf"]) {
        case (.some, .some):
            throw reader.problem("anyOf and allOf together")
        case (let list?, nil):
            return .anyOf(try reader.codes(list, named: "anyOf", in: codeDomain, allowingZero: false))
        case (nil, let list?):
            return .allOf(try reader.codes(list, named: "allOf", in: codeDomain, allowingZero: false))
        case (nil, nil):
            throw reader.problem("anyOf or allOf is missing")
        }
    }

    public static func evaluate(_ form: ConditionForm, on value: ItemValue, clock: EvaluationClock) -> Bool {
        guard case .codes(let held) = value else { return false }
        switch form {
        case .anyOf(let listed):
            // `listed` is sorted: O(held × log listed), whatever either holds.
            return held.contains { listed.sortedContains($0) }
        case .allOf(let listed):
            let heldSet = Set(held)
            return listed.allSatisfy { heldSet.contains($0) }
        default:
            return false
        }
    }

    /// anyOf: one group, the set holds one of the codes. allOf: a group per code, the set holds each
    /// (none listed: every set holds them all).
    public static func selection(for form: ConditionForm, clock: EvaluationClock) -> ValueSelection {
        guard storage == .smallintArray || storage == .integerArray else { return .never }
        switch form {
        case .anyOf(let listed):
            return .anyOf(Set(listed).sorted().map { .holds(code: $0) })
        case .allOf(let listed):
            return ValueSelection(allOf: Set(listed).sorted().map { [.holds(code: $0)] })
        default:
            return .never
        }
    }

    public static func describe(value: ItemValue, clock: EvaluationClock) -> String {
        guard case .codes(let held) = value else { return "\(value)" }
        guard !held.isEmpty else { return "none (unanswered)" }
        let codes = held.map(describeCode).joined(separator: ", ")
        // runs.md "Eligibility": an element outside the domain is kept and matches no listed code (odd values).
        let outside = domain.map { domain in held.filter { !domain.contains($0) } } ?? []
        guard let domainText, !outside.isEmpty else { return codes }
        let listed = outside.map(String.init).joined(separator: ", ")
        return codes
            + (outside.count == 1
                ? " (\(listed) outside \(domainText): an odd value, matches no listed code)"
                : " (\(listed) outside \(domainText): odd values, match no listed code)")
    }

    public static func describe(condition: ConditionForm, clock: EvaluationClock) -> String {
        switch condition {
        case .anyOf(let codes): "any of " + codes.map(describeCode).joined(separator: ", ")
        case .allOf(let codes): "all of " + codes.map(describeCode).joined(separator: ", ")
        default: "\(condition)"
        }
    }
}
