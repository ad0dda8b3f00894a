/// A flag item: a `boolean NOT NULL DEFAULT false` column; the condition is JSON `true` or `false`
/// and is satisfied when the column equals it.
public protocol FlagItemDefinition: MasterItemDefinition {}

extension FlagItemDefinition {
    public static var kind: ItemKind { .flag }
    public static var storage: ColumnStorage { .boolean }
    public static var domain: ClosedRange<Int32>? { nil }

    public static func decodeCondition(_ json: JSONValue) throws(FilterValidationError) -> ConditionForm {
        guard case .bool(let wanted) = json else {
            throw ConditionReader(key: key).problem("condition is not true or false (\(json.briefDescription))")
        }
        return .flag(wanted)
    }

    public static func evaluate(_ form: ConditionForm, on value: ItemValue, clock: EvaluationClock) -> Bool {
        guard case .flag(let wanted) = form, case .flag(let actual) = value else { return false }
        return wanted == actual
    }

    public static func selection(for form: ConditionForm, clock: EvaluationClock) -> ValueSelection {
        guard case .flag(let wanted) = form, storage == .boolean else { return .never }
        return .anyOf([.flag(wanted)])
    }

    public static func describe(value: ItemValue, clock: EvaluationClock) -> String {
        guard case .flag(let actual) = value else { return "\(value)" }
        return "\(actual)"
    }

    public static func describe(condition: ConditionForm, clock: EvaluationClock) -> String {
        guard case .flag(let wanted) = condition else { return "\(condition)" }
        return "\(wanted)"
    }
}
