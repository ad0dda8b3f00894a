/// A condition's form (filter-language.md). Plain data: engines compile it as they see fit.
public enum ConditionForm: Sendable, Hashable {
    /// range: inclusive bounds, at least one present, `min <= max`.
    case range(min: Int32?, max: Int32?)
    /// single or multi: the codes, sorted ascending and deduplicated, never empty.
    /// For a single item, 0 accepts unanswered.
    case anyOf([Int32])
    /// multi only: the codes, sorted ascending and deduplicated, never empty.
    case allOf([Int32])
    /// flag: the value the column must equal.
    case flag(Bool)
    /// recency: days, in the item's domain (1...365).
    case withinDays(Int32)
}

/// One valid condition: an item and its form.
public struct FilterCondition: Sendable, Hashable {
    public let item: AnyMasterItem
    public let form: ConditionForm
}

/// A saved filter's valid conditions, one per constrained item, in catalogue order.
public struct FilterConditions: Sendable, Hashable {
    /// In catalogue order (`item.index` ascending), at most one per item.
    public let conditions: [FilterCondition]

    init(conditions: [FilterCondition]) {
        self.conditions = conditions
    }

    /// No condition: every profile satisfies it.
    public static let none = FilterConditions(conditions: [])

    public var isEmpty: Bool { conditions.isEmpty }

    /// The condition on `item`, if the filter has one.
    public subscript(item: AnyMasterItem) -> ConditionForm? {
        conditions.first { $0.item == item }?.form
    }

    /// The largest conditions document accepted, in bytes of JSON text (64 KiB). A larger one is an
    /// invalid filter, refused before it is parsed, so that no row can make a worker parse or hold an
    /// unbounded document. With nesting at most `JSONValue.maximumDepth` and code lists sorted and
    /// deduplicated (so never longer than the item's domain), this bounds the cost of one filter.
    public static let maximumJSONBytes = 65_536

    /// Parses and validates per filter-language.md. Never crashes, whatever the text.
    public static func decode(json: String) throws(FilterValidationError) -> FilterConditions {
        try checkSize(json.utf8.count)
        return try decode(jsonUTF8: Array(json.utf8))
    }

    /// Parses and validates UTF-8 bytes (invalid UTF-8 is an error). Never crashes, whatever the bytes.
    public static func decode(jsonUTF8 bytes: [UInt8]) throws(FilterValidationError) -> FilterConditions {
        try checkSize(bytes.count)
        return try decodeIgnoringSizeLimit(jsonUTF8: bytes)
    }

    /// `decode(jsonUTF8:)` without the size limit: for tests of the parser on huge inputs.
    static func decodeIgnoringSizeLimit(jsonUTF8 bytes: [UInt8]) throws(FilterValidationError) -> FilterConditions {
        let document: JSONValue
        do {
            document = try JSONValue.parse(utf8: bytes)
        } catch {
            throw FilterValidationError(itemKey: nil, problem: error.description)
        }
        return try decode(document)
    }

    private static func checkSize(_ byteCount: Int) throws(FilterValidationError) {
        guard byteCount <= maximumJSONBytes else {
            throw FilterValidationError(
                itemKey: nil,
                problem: "too large: \(byteCount) bytes of JSON, the limit is \(maximumJSONBytes); "
                    + "shorten the code lists or remove conditions")
        }
    }

    /// Validates a parsed document.
    ///
    /// When several problems exist, the one reported is, deterministically and whatever the order of
    /// the members: an unknown key first (the first in byte order), else the first invalid condition in
    /// catalogue order (and within it, per its kind's fixed order of checks).
    ///
    /// `catalogue` is `MasterItem.all`; a test may pass another list of items (indexed as their columns).
    public static func decode(
        _ document: JSONValue, catalogue: [AnyMasterItem] = MasterItem.all
    ) throws(FilterValidationError) -> FilterConditions {
        guard case .object(let members) = document else {
            throw FilterValidationError(itemKey: nil, problem: "not a JSON object")
        }
        let present = catalogue.compactMap { item in members[item.key].map { (item, $0) } }
        if present.count < members.count {  // a key outside the catalogue
            let unknown = members.keys.filter { key in !catalogue.contains { $0.key == key } }
            if let first = unknown.min(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
                throw FilterValidationError(itemKey: MessageText.key(first), problem: "unknown item")
            }
        }
        var conditions: [FilterCondition] = []
        for (item, value) in present {
            conditions.append(FilterCondition(item: item, form: try item.decodeCondition(value)))
        }
        return FilterConditions(conditions: conditions)
    }

    /// The conditions that count for an owner with `plan`, and the keys (in catalogue order) ignored
    /// because the plan lacks what their item requires. Plans are ordered: a plan includes every lower one;
    /// a plan below 0 (an odd row) is free.
    public func effective(forOwnerPlan plan: Int16) -> (conditions: FilterConditions, ignoredPaidKeys: [String]) {
        let plan = Self.ordered(plan)
        let kept = conditions.filter { $0.item.requiredPlan <= plan }
        if kept.count == conditions.count { return (self, []) }
        let ignored = conditions.filter { $0.item.requiredPlan > plan }.map(\.item.key)
        return (FilterConditions(conditions: kept), ignored)
    }

    /// Whether the filter is suspended for an owner with `plan` (filter-language.md): it has conditions and
    /// every one of them needs a plan the owner lacks. It then matches nothing and sends nothing (rather
    /// than becoming an empty filter that matches everyone) until the owner pays again.
    public func isSuspended(forOwnerPlan plan: Int16) -> Bool {
        let plan = Self.ordered(plan)
        return !conditions.isEmpty && conditions.allSatisfy { $0.item.requiredPlan > plan }
    }

    /// The owner's plan as the paid items compare it: below 0 is free (0), so that an odd row never needs
    /// a plan for the free items.
    static func ordered(_ plan: Int16) -> Int16 { max(plan, 0) }

    /// The conditions as canonical JSON: catalogue order, no spaces, codes sorted, such that
    /// `decode(json: canonicalJSON)` gives back these conditions.
    public var canonicalJSON: String {
        let members = conditions.map { condition -> String in
            let value =
                switch condition.form {
                case .range(let min, let max):
                    "{"
                        + [min.map { "\"min\":\($0)" }, max.map { "\"max\":\($0)" }].compactMap { $0 }
                        .joined(separator: ",") + "}"
                case .anyOf(let codes): "{\"anyOf\":[\(codes.map(String.init).joined(separator: ","))]}"
                case .allOf(let codes): "{\"allOf\":[\(codes.map(String.init).joined(separator: ","))]}"
                case .flag(let wanted): "\(wanted)"
                case .withinDays(let days): "{\"withinDays\":\(days)}"
                }
            return "\"\(condition.item.key)\":\(value)"
        }
        return "{" + members.joined(separator: ",") + "}"
    }
}
