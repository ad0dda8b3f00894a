/// A MasterItem, type-erased: its declaration as plain values, and its definition's functions.
/// Two items are equal when their keys are.
public struct AnyMasterItem: Sendable, Hashable, CustomStringConvertible {
    public let key: String
    public let column: String
    public let storage: ColumnStorage
    public let kind: ItemKind
    public let domain: ClosedRange<Int32>?
    public let requiredPlan: Int16
    public let labels: [String]
    /// The item's position in `MasterItem.all` (and in `Profile.values`).
    public let index: Int
    /// The item's definition.
    public let definition: any MasterItemDefinition.Type

    init(_ definition: any MasterItemDefinition.Type, index: Int) {
        self.key = definition.key
        self.column = definition.column
        self.storage = definition.storage
        self.kind = definition.kind
        self.domain = definition.domain
        self.requiredPlan = definition.requiredPlan
        self.labels = definition.labels
        self.index = index
        self.definition = definition
    }

    public func decodeCondition(_ json: JSONValue) throws(FilterValidationError) -> ConditionForm {
        try definition.decodeCondition(json)
    }

    public func evaluate(_ form: ConditionForm, on value: ItemValue, clock: EvaluationClock) -> Bool {
        definition.evaluate(form, on: value, clock: clock)
    }

    public func selection(for form: ConditionForm, clock: EvaluationClock) -> ValueSelection {
        definition.selection(for: form, clock: clock)
    }

    public func orderedKeys(of column: ProfileColumns.Column, clock: EvaluationClock) -> OrderedKeys? {
        definition.orderedKeys(of: column, clock: clock)
    }

    public func describe(value: ItemValue, clock: EvaluationClock) -> String {
        definition.describe(value: value, clock: clock)
    }

    public func describe(condition: ConditionForm, clock: EvaluationClock) -> String {
        definition.describe(condition: condition, clock: clock)
    }

    /// The orientation label of `code`, if the item has one.
    public func label(for code: Int32) -> String? {
        code >= 1 && code <= labels.count ? labels[Int(code) - 1] : nil
    }

    /// Whether a single-choice item's column may hold 0 (unanswered) as an ordinary value; gender never does.
    /// True for every other kind.
    public var acceptsUnanswered: Bool {
        (definition as? any SingleChoiceItemDefinition.Type)?.acceptsUnanswered ?? true
    }

    /// Whether `value`, as a profile row holds it, is one of the odd values a run counts (runs.md,
    /// "Eligibility"): a code outside the item's domain (or 0 where unanswered is not a value), a range value
    /// outside the domain, a set with an element outside it, a timestamp NULL or infinite (`Timestamp.isMissingOrInfinite`). The PostgreSQL read
    /// applies the same rules to the raw columns, where it also sees NULLs and impossible dates that a value
    /// cannot hold.
    public func holdsOddValue(_ value: ItemValue) -> Bool {
        let domain = self.domain ?? Int32.min...Int32.max
        switch value {
        case .code(let code): return code == 0 ? !acceptsUnanswered : !domain.contains(Int32(code))
        case .integer(let integer): return integer.map { !domain.contains($0) } ?? false
        case .codes(let codes): return codes.contains { !domain.contains($0) }
        case .timestamp(let timestamp): return timestamp.isMissingOrInfinite
        case .date, .flag: return false
        }
    }

    public var description: String { key }

    public static func == (lhs: AnyMasterItem, rhs: AnyMasterItem) -> Bool {
        lhs.key == rhs.key
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(key)
    }
}
