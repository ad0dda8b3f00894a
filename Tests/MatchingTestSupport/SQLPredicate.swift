import Matching

extension FilterConditions {
    /// The conditions as one SQL boolean expression over the `profiles` table's columns: a test oracle for
    /// checking the engines against PostgreSQL (`EvaluatorAgreesWithSQLTests`), so it ships with the tests, not
    /// with the worker. It references two parameters: `$1`, the run's clock
    /// (`timestamptz`), and `$2`, the run's date in its time zone (`date`). It is never NULL: `true`
    /// for no condition, else the conjunction of one expression per condition.
    ///
    /// Each expression derives from the item's column and storage alone, so a new item needs no change
    /// here: a nullable integer compares directly; a nullable date compares its full years to `$2`
    /// (`date_part('year', age(...))`); a `smallint` is tested with `IN`; arrays with `&&` (anyOf) and
    /// `@>` (allOf); a boolean with `=`; a `timestamptz` with `>= $1 - N × 24 hours`.
    public func sqlPredicate() -> String {
        guard !conditions.isEmpty else { return "true" }
        return conditions.map { "(\(Self.sqlPredicate($0)))" }.joined(separator: " AND ")
    }

    static func sqlPredicate(_ condition: FilterCondition) -> String {
        let column = condition.item.column
        let storage = condition.item.storage
        switch condition.form {
        case .range(let min, let max):
            let value =
                storage == .nullableDate
                ? "date_part('year', age($2::date::timestamp, \(column)::timestamp))"
                : column
            let bounds = [min.map { "\(value) >= \($0)" }, max.map { "\(value) <= \($0)" }].compactMap { $0 }
            // A date after the run's date, or more years before it than the domain holds, is impossible and counts
            // as NULL (runs.md, "Eligibility").
            let oldest = condition.item.domain?.upperBound ?? Int32.max
            let answered =
                storage == .nullableDate ? "\(column) <= $2::date AND \(value) <= \(oldest)" : "\(column) IS NOT NULL"
            return ([answered] + bounds).joined(separator: " AND ")
        case .anyOf(let codes) where storage == .smallint:
            return "\(column) IN (\(codes.map(String.init).joined(separator: ", ")))"
        case .anyOf(let codes):
            return "\(column) && \(arrayLiteral(codes, storage: storage))"
        case .allOf(let codes):
            return "\(column) @> \(arrayLiteral(codes, storage: storage))"
        case .flag(let wanted):
            return "\(column) = \(wanted)"
        case .withinDays(let days):
            return "\(column) >= $1::timestamptz - interval '\(Int64(days) * 24) hours'"
        }
    }

    private static func arrayLiteral(_ codes: [Int32], storage: ColumnStorage) -> String {
        let type = storage == .integerArray ? "integer[]" : "smallint[]"
        return "'{\(codes.map(String.init).joined(separator: ","))}'::\(type)"
    }
}
