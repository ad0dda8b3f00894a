import Chronology

/// A recency item: a `timestamptz NOT NULL` column; `{"withinDays": N}` (N in the domain,
/// 1...365 by default) is satisfied when the timestamp is at or after the run's clock minus N × 24 h.
public protocol RecencyItemDefinition: MasterItemDefinition {}

extension RecencyItemDefinition {
    public static var kind: ItemKind { .recency }
    public static var storage: ColumnStorage { .timestamptz }
    public static var domain: ClosedRange<Int32>? { 1...365 }

    public static func decodeCondition(_ json: JSONValue) throws(FilterValidationError) -> ConditionForm {
        let reader = ConditionReader(key: key)
        let members = try reader.members(of: json, allowed: ["withinDays"])
        guard let days = members["withinDays"] else { throw reader.problem("withinDays is missing") }
        return .withinDays(try reader.integer(days, named: "withinDays", in: domain ?? 1...Int32.max))
    }

    /// The earliest timestamp that satisfies `withinDays(days)` at `clock`: now − days × 24 h
    /// (the earliest representable instant should that underflow).
    public static func threshold(days: Int32, clock: EvaluationClock) -> Timestamp {
        let (span, spanOverflow) = Int64(days).multipliedReportingOverflow(by: Timestamp.microsecondsPerDay)
        let (start, overflow) = clock.now.microsecondsSinceEpoch.subtractingReportingOverflow(span)
        if spanOverflow || overflow {
            return Timestamp(microsecondsSinceEpoch: days >= 0 ? .min : .max)
        }
        return Timestamp(microsecondsSinceEpoch: start)
    }

    public static func evaluate(_ form: ConditionForm, on value: ItemValue, clock: EvaluationClock) -> Bool {
        guard case .withinDays(let days) = form, case .timestamp(let actual) = value,
            !actual.isMissingOrInfinite  // NULL and infinite (runs.md: counts as NULL) never satisfy withinDays
        else { return false }
        return actual >= threshold(days: days, clock: clock)
    }

    /// One group: the timestamp is at or after `threshold` (in microseconds).
    public static func selection(for form: ConditionForm, clock: EvaluationClock) -> ValueSelection {
        guard case .withinDays(let days) = form, storage == .timestamptz else { return .never }
        return .anyOf([.atLeast(threshold(days: days, clock: clock).microsecondsSinceEpoch)])
    }

    /// The microseconds of every row; undefined where `missing` or infinite (runs.md: counts as NULL; the
    /// PostgreSQL read makes both `missing`, a profile built in memory may hold `Int64.max`).
    public static func orderedKeys(of column: ProfileColumns.Column, clock: EvaluationClock) -> OrderedKeys? {
        guard case .timestamps(let stamps) = column else { return nil }
        var defined = Bitmap(count: stamps.count)
        for (row, stamp) in stamps.enumerated() where !Timestamp(microsecondsSinceEpoch: stamp).isMissingOrInfinite {
            defined.set(row)
        }
        return OrderedKeys(keys: stamps, defined: defined)
    }

    public static func describe(value: ItemValue, clock: EvaluationClock) -> String {
        guard case .timestamp(let actual) = value else { return "\(value)" }
        return actual == .missing ? "NULL (none, or infinite)" : actual.iso8601
    }

    public static func describe(condition: ConditionForm, clock: EvaluationClock) -> String {
        guard case .withinDays(let days) = condition else { return "\(condition)" }
        let unit = days == 1 ? "day" : "days"
        return "within \(days) \(unit) (at or after \(threshold(days: days, clock: clock).iso8601))"
    }
}
