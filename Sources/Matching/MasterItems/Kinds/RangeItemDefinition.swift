import Chronology

/// A range item: an ordered integer, `{"min": a, "max": b}` with at least one bound, inclusive.
/// Stored as a nullable `smallint` by default; an item stored as a nullable `date` ranges over the
/// full years from that date to the run's date (age).
public protocol RangeItemDefinition: MasterItemDefinition {
    /// The unit of the item's values in an explanation (`cm`, `years`); nil when it has none (a band's labels).
    static var unit: String? { get }
}

extension RangeItemDefinition {
    public static var unit: String? { nil }
    public static var kind: ItemKind { .range }
    public static var storage: ColumnStorage { .nullableSmallint }

    public static func decodeCondition(_ json: JSONValue) throws(FilterValidationError) -> ConditionForm {
        let reader = ConditionReader(key: key)
        let members = try reader.members(of: json, allowed: ["min", "max"])
        let bounds = domain ?? Int32.min...Int32.max
        let min = try members["min"].map { value throws(FilterValidationError) in
            try reader.integer(value, named: "min", in: bounds)
        }
        let max = try members["max"].map { value throws(FilterValidationError) in
            try reader.integer(value, named: "max", in: bounds)
        }
        guard min != nil || max != nil else { throw reader.problem("no bound (min or max)") }
        if let min, let max, min > max {
            throw reader.problem("min \(min) is greater than max \(max)")
        }
        return .range(min: min, max: max)
    }

    /// The ordered value a range condition compares: the integer, or the full years from the date
    /// to the run's date (PostgreSQL's `date_part('year', age(run_date, date))`); nil when unanswered.
    /// A date after the run's date (a birth not yet happened), or more full years before it than the
    /// item's domain holds (a birth 2,000 years ago), is impossible and counts as unanswered (runs.md,
    /// "Eligibility"; found by review in session 32: such an age passed every minimum-only condition).
    public static func rangeValue(of value: ItemValue, clock: EvaluationClock) -> Int32? {
        switch value {
        case .integer(let integer):
            return integer
        case .date(let date?) where date <= clock.runDate:
            let years = Int32(clamping: clock.runDate.fullYears(since: date))
            return years <= oldestPossible ? years : nil
        default:
            return nil
        }
    }

    /// The most full years a date of this item can be before the run's date: the domain's top (age 120).
    static var oldestPossible: Int32 { domain?.upperBound ?? Int32.max }

    public static func evaluate(_ form: ConditionForm, on value: ItemValue, clock: EvaluationClock) -> Bool {
        guard case .range(let min, let max) = form, let actual = rangeValue(of: value, clock: clock) else {
            return false
        }
        return (min.map { actual >= $0 } ?? true) && (max.map { actual <= $0 } ?? true)
    }

    /// A group per bound, inclusive, over the ordered key (`rangeValue`); no bound: the row is answered.
    public static func selection(for form: ConditionForm, clock: EvaluationClock) -> ValueSelection {
        guard case .range(let min, let max) = form, storage == .nullableSmallint || storage == .nullableDate else {
            return .never
        }
        if let min, let max, min > max { return .never }
        var groups: [[ValueTest]] = []
        if min == nil && max == nil { groups.append([.atLeast(Int64.min)]) }  // answered
        if let min { groups.append([.atLeast(Int64(min))]) }
        if let max { groups.append([.atMost(Int64(max))]) }
        return ValueSelection(allOf: groups)
    }

    /// `rangeValue` of every row: the integer, or the full years from the date to the run's date;
    /// undefined where unanswered (NULL, or an impossible date: after the run's date, or older than the domain).
    public static func orderedKeys(of column: ProfileColumns.Column, clock: EvaluationClock) -> OrderedKeys? {
        switch column {
        case .integers(let column):
            return OrderedKeys(keys: column.values.map { Int64($0) }, defined: column.answered)
        case .dates(let column):
            return ages(column, clock: clock)
        default:
            return nil
        }
    }

    /// Each row's full years on the run's date, as `rangeValue` counts them; 0 and undefined where unanswered.
    private static func ages(_ column: NullableInt32Column, clock: EvaluationClock) -> OrderedKeys {
        var ages = [Int64](repeating: 0, count: column.count)
        var defined = column.answered
        let runDate = clock.runDate
        let runDay = runDate.daysSinceEpoch
        // Memoized by birth day: most candidates share a few thousand days.
        var memo = CodeTable(capacity: 1 << 12)
        let oldest = oldestPossible
        for row in 0..<column.count where column.answered[row] {
            let days = column.values[row]
            guard days <= runDay else {
                defined.clear(row)
                continue
            }
            let age: Int32
            if let cached = memo.lookupValue(days) {
                age = cached
            } else {
                age = Int32(clamping: runDate.fullYears(since: CalendarDate(daysSinceEpoch: days)))
                if memo.count < 1 << 16 { memo.insert(days, age) }
            }
            if age <= oldest { ages[row] = Int64(age) } else { defined.clear(row) }
        }
        return OrderedKeys(keys: ages, defined: defined)
    }

    /// A value or bound with its label or unit: `5 (800-1000万)`, `160 cm`.
    static func describeMeasure(_ value: Int32) -> String {
        unit.map { "\(value) \($0)" } ?? describeCode(value)
    }

    /// Said of a value outside the domain (runs.md "Eligibility"), nil inside it: compared as it is, as `evaluate`
    /// does. A stored one is an odd value, which a run counts; an age is computed from a possible birth date.
    static func outsideDomain(_ value: Int32, stored: Bool) -> String? {
        guard let domain, let domainText, !domain.contains(value) else { return nil }
        return stored
            ? "outside \(domainText): an odd value, compared as stored"
            : "outside \(domainText): compared as computed"
    }

    public static func describe(value: ItemValue, clock: EvaluationClock) -> String {
        switch value {
        case .date(let date?) where date > clock.runDate:
            return "unanswered (born \(date), after the run's date: impossible, counts as NULL)"
        case .date(let date?) where rangeValue(of: value, clock: clock) == nil:
            return "unanswered (born \(date), more than \(oldestPossible) years before the run's date: impossible, "
                + "counts as NULL)"
        case .date(let date?):
            let years = Int32(clamping: clock.runDate.fullYears(since: date))
            return
                "\(describeMeasure(years)) (born \(date)\(outsideDomain(years, stored: false).map { "; \($0)" } ?? ""))"
        case .integer(let integer?):
            return describeMeasure(integer) + (outsideDomain(integer, stored: true).map { " (\($0))" } ?? "")
        case .integer(nil):
            return "unanswered"
        case .date(nil):
            // The read gives ±infinity as NULL (runs.md: an infinite date counts as NULL): the two look alike here.
            return "unanswered (\(column) NULL, or ±infinity, which counts as NULL)"
        default:
            return "\(value)"
        }
    }

    public static func describe(condition: ConditionForm, clock: EvaluationClock) -> String {
        // The unit once, after the last bound: `between 25 and 32 years`.
        let after = unit.map { " \($0)" } ?? ""
        switch condition {
        case .range(let min?, let max?):
            return "between \(describeCode(min)) and \(describeCode(max))" + after
        case .range(let min?, nil):
            return "at least \(describeCode(min))" + after
        case .range(nil, let max?):
            return "at most \(describeCode(max))" + after
        default:
            return "\(condition)"
        }
    }
}
