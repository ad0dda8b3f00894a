/// Which stored values of an item satisfy a condition, in the terms the bitset engine builds its
/// bitsets and posting lists from: an AND of OR-groups of `ValueTest`s. The engine computes the rows
/// of each distinct test once per batch and shares them among every filter that needs them; it knows
/// nothing of kinds.
///
/// Each kind's definition (`MasterItemDefinition.selection(for:clock:)`) gives it beside its
/// `evaluate`, in the same file, and the two must agree: the bitset engine is held against the
/// reference evaluator by property tests (`Tests/MatchingTests/BitsetEngineTests.swift`).
public struct ValueSelection: Sendable, Hashable {
    /// Every group must hold; a group holds when one of its tests does. None: every value satisfies.
    public let groups: [[ValueTest]]
    /// No value satisfies (for example a form of another kind, or `min > max`).
    public let isNever: Bool

    /// A value satisfies when one test of every group holds; a group without a test never holds.
    public init(allOf groups: [[ValueTest]]) {
        isNever = groups.contains { $0.isEmpty }
        self.groups = isNever ? [] : groups
    }

    /// No value satisfies.
    public static let never = ValueSelection(allOf: [[]])

    /// Every value satisfies.
    public static let every = ValueSelection(allOf: [])

    /// One group: a value satisfies when one of `tests` holds (none: no value).
    public static func anyOf(_ tests: [ValueTest]) -> ValueSelection {
        ValueSelection(allOf: [tests])
    }
}

/// One test of a row's stored value.
public enum ValueTest: Sendable, Hashable {
    /// The row's code is `code` (a `.smallint` column), or its set holds `code` (an array column).
    case holds(code: Int32)
    /// The row's ordered key (`MasterItemDefinition.orderedKeys(of:clock:)`) is defined and `>= bound`.
    case atLeast(Int64)
    /// The row's ordered key is defined and `<= bound`.
    case atMost(Int64)
    /// The row's flag (a `.boolean` column) is `value`.
    case flag(Bool)
}

/// Each row's ordered key, what `ValueTest.atLeast` and `.atMost` compare: a range's value (an age in
/// full years on the run's date for a date column), a recency's microseconds. A row whose key is not
/// `defined` (NULL) satisfies no bound.
public struct OrderedKeys: Sendable {
    /// One per row; meaningless where not `defined`.
    public let keys: [Int64]
    /// One bit per row.
    public let defined: Bitmap

    public init(keys: [Int64], defined: Bitmap) {
        precondition(keys.count == defined.count, "one key and one bit per row")
        self.keys = keys
        self.defined = defined
    }
}
