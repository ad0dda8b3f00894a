/// A single-choice item: one code in a `smallint NOT NULL DEFAULT 0` column, 0 = unanswered.
/// `{"anyOf": [codes]}` is satisfied when the code is listed; listing 0 accepts unanswered.
public protocol SingleChoiceItemDefinition: MasterItemDefinition {
    /// Whether 0 (unanswered) may be listed. True by default.
    static var acceptsUnanswered: Bool { get }
}

extension SingleChoiceItemDefinition {
    public static var kind: ItemKind { .single }
    public static var storage: ColumnStorage { .smallint }
    public static var acceptsUnanswered: Bool { true }

    public static func decodeCondition(_ json: JSONValue) throws(FilterValidationError) -> ConditionForm {
        let reader = ConditionReader(key: key)
        let members = try reader.members(of: json, allowed: ["anyOf", "allOf"])
        if members["allOf"] != nil { throw reader.problem("allOf is only for multi-choice items") }
        guard let list = members["anyOf"] else { throw reader.problem("anyOf is missing") }
        let codes = try reader.codes(
            list, named: "anyOf", in: domain ?? Int32.min...Int32.max, allowingZero: acceptsUnanswered)
        return .anyOf(codes)
    }

    public static func evaluate(_ form: ConditionForm, on value: ItemValue, clock: EvaluationClock) -> Bool {
        guard case .anyOf(let codes) = form, case .code(let code) = value else { return false }
        return codes.sortedContains(Int32(code))
    }

    /// One group: the row's code is one of the listed codes (0 included: unanswered rows hold 0).
    public static func selection(for form: ConditionForm, clock: EvaluationClock) -> ValueSelection {
        guard case .anyOf(let codes) = form, storage == .smallint else { return .never }
        return .anyOf(Set(codes).sorted().map { .holds(code: $0) })
    }

    public static func describe(value: ItemValue, clock: EvaluationClock) -> String {
        guard case .code(let code) = value else { return "\(value)" }
        if code == 0 && acceptsUnanswered { return "0 (unanswered)" }
        // runs.md "Eligibility": a code outside the domain (0 where the item is never 0) is kept and matches no
        // listed code; a run counts it as an odd value.
        if let domain, let domainText, !domain.contains(Int32(code)) {
            let never = acceptsUnanswered ? "" : ", never 0"
            return "\(code) (outside \(domainText)\(never): an odd value, matches no listed code)"
        }
        return describeCode(Int32(code))
    }

    public static func describe(condition: ConditionForm, clock: EvaluationClock) -> String {
        guard case .anyOf(let codes) = condition else { return "\(condition)" }
        return "any of " + codes.map { $0 == 0 ? "0 (unanswered)" : describeCode($0) }.joined(separator: ", ")
    }
}
