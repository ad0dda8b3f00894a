/// How a MasterItem's `profiles` column is stored (master-items.md).
public enum ColumnStorage: Sendable, Hashable {
    /// `smallint NOT NULL DEFAULT 0` (single choice; 0 = unanswered).
    case smallint
    /// `smallint`, NULL = unanswered (range).
    case nullableSmallint
    /// `date`, NULL = unanswered (a range over the full years since the date, such as age).
    case nullableDate
    /// `smallint[] NOT NULL DEFAULT '{}'` (multi choice).
    case smallintArray
    /// `integer[] NOT NULL DEFAULT '{}'` (multi choice).
    case integerArray
    /// `boolean NOT NULL DEFAULT false`.
    case boolean
    /// `timestamptz NOT NULL` (recency).
    case timestamptz

    /// The value of an unanswered profile; nil for `timestamptz`, which is never unanswered.
    public var unansweredValue: ItemValue? {
        switch self {
        case .smallint: .code(0)
        case .nullableSmallint: .integer(nil)
        case .nullableDate: .date(nil)
        case .smallintArray, .integerArray: .codes([])
        case .boolean: .flag(false)
        case .timestamptz: nil
        }
    }
}

/// The kinds of MasterItem, each with its condition forms (filter-language.md).
public enum ItemKind: Sendable, Hashable {
    /// `{"min": a, "max": b}` over an ordered integer (age is a range derived from a date).
    case range
    /// `{"anyOf": [...]}` over one code.
    case single
    /// `{"anyOf": [...]}` or `{"allOf": [...]}` over a set of codes.
    case multi
    /// `true` or `false`.
    case flag
    /// `{"withinDays": N}` over a timestamp.
    case recency
}

/// One MasterItem: a profile item a saved filter can constrain.
///
/// Conform through the kind protocols (`RangeItemDefinition`, `SingleChoiceItemDefinition`,
/// `MultiChoiceItemDefinition`, `FlagItemDefinition`, `RecencyItemDefinition`), which supply the
/// kind's decoding, evaluation (`evaluate` of one value for the reference evaluator and explain;
/// `selection` and `orderedKeys` of whole columns for the bitset engine) and descriptions, so that an
/// item declares only its key, column, domain, and optionally its storage, labels and required plan.
/// Then list it in `MasterItem.all`. A kind's rule is written once, in its file in `Kinds/`.
public protocol MasterItemDefinition: SendableMetatype {
    /// The key in a filter's JSON and in code; stable.
    static var key: String { get }
    /// The `profiles` column the item reads.
    static var column: String { get }
    static var storage: ColumnStorage { get }
    static var kind: ItemKind { get }
    /// Valid codes (single, multi), bounds (range), `withinDays` (recency); nil for flags.
    static var domain: ClosedRange<Int32>? { get }
    /// The owner's plan a condition on this item needs to count (0 free, 1 paid).
    static var requiredPlan: Int16 { get }
    /// Orientation labels for codes `1...labels.count`, used in explanations only.
    static var labels: [String] { get }

    /// Decodes and validates the item's condition from the value of its key in a filter's JSON.
    /// Errors name this item's key.
    static func decodeCondition(_ json: JSONValue) throws(FilterValidationError) -> ConditionForm
    /// Whether a profile's `value` of this item satisfies `form` at `clock`.
    /// A form or value of another kind's shape never satisfies.
    static func evaluate(_ form: ConditionForm, on value: ItemValue, clock: EvaluationClock) -> Bool
    /// The same rule as `evaluate`, as the bitset engine applies it to a whole column: which stored
    /// values satisfy `form` at `clock`, as tests of a row's code, flag or ordered key.
    static func selection(for form: ConditionForm, clock: EvaluationClock) -> ValueSelection
    /// Each row's ordered key in this item's `column` (what `.atLeast` and `.atMost` tests compare), or
    /// nil when the kind has none or the column is not of its shape. Called once per batch, not per row.
    static func orderedKeys(of column: ProfileColumns.Column, clock: EvaluationClock) -> OrderedKeys?
    /// A profile's value for an explanation, such as `34 (born 1991-05-02)` or `13 (東京都)`.
    static func describe(value: ItemValue, clock: EvaluationClock) -> String
    /// A condition for an explanation, such as `between 25 and 32` or `any of 1, 5`.
    static func describe(condition: ConditionForm, clock: EvaluationClock) -> String
}

extension MasterItemDefinition {
    public static var requiredPlan: Int16 { Profile.Plan.free }
    public static var labels: [String] { [] }
    /// No ordered key: the kinds that compare one (range, recency) say what it is.
    public static func orderedKeys(of column: ProfileColumns.Column, clock: EvaluationClock) -> OrderedKeys? {
        nil
    }

    /// This item's entry in `MasterItem.all`.
    public static var item: AnyMasterItem {
        guard let item = MasterItem.item(forKey: key) else {
            preconditionFailure("MasterItem \(key) is missing from MasterItem.all")
        }
        return item
    }

    /// A profile's value of this item.
    public static func value(in profile: Profile) -> ItemValue {
        profile.value(of: item)
    }

    /// The domain as the spec writes it, `120..230` (not Swift's `120...230`), for explanations; nil for none.
    static var domainText: String? {
        domain.map { "\($0.lowerBound)..\($0.upperBound)" }
    }

    /// `13 (東京都)` when the code has a label, else `13`.
    static func describeCode(_ code: Int32) -> String {
        if code >= 1, code <= labels.count {
            return "\(code) (\(labels[Int(code) - 1]))"
        }
        return "\(code)"
    }
}
