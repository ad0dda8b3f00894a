/// A range item: an ordered integer, `{"min": a, "max": b}` with at least one bound, inclusive.
/// Stored as a nullable `smallint` by default; an item stored as a nullable `date` ranges over the
/// full years from that date to the run's date (age).
public protocol RangeItemDefinition: MasterItemDefinition {}

extension RangeItemDefinition {
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
    public static func rangeValue(of value: ItemValue, clock: EvaluationClock) -> Int32? {
        switch value {
        case .integer(let integer):
            return integer
        case .date(let date):
            return date.map { Int32(clamping: clock.runDate.fullYears(since: $0)) }
        default:
            return nil
        }
    }

    public static func evaluate(_ form: ConditionForm, on value: ItemValue, clock: EvaluationClock) -> Bool {
        guard case .range(let min, let max) = form, let actual = rangeValue(of: value, clock: clock) else {
            return false
        }
        return (min.map { actual >= $0 } ?? true) && (max.map { actual <= $0 } ?? true)
    }

    public static func describe(value: ItemValue, clock: EvaluationClock) -> String {
        switch value {
        case .date(let date?):
            return "\(describeCode(Int32(clamping: clock.runDate.fullYears(since: date)))) (born \(date))"
        case .integer(let integer?):
            return describeCode(integer)
        case .integer(nil), .date(nil):
            return "unanswered"
        default:
            return "\(value)"
        }
    }

    public static func describe(condition: ConditionForm, clock: EvaluationClock) -> String {
        switch condition {
        case .range(let min?, let max?):
            "between \(describeCode(min)) and \(describeCode(max))"
        case .range(let min?, nil):
            "at least \(describeCode(min))"
        case .range(nil, let max?):
            "at most \(describeCode(max))"
        default:
            "\(condition)"
        }
    }
}
