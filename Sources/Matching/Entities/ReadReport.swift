import Chronology

/// A row of the app's tables that could not be read at all, set aside so that it never stops a run
/// and never changes another row's result (runs.md, "Eligibility"). Operators see it in
/// `matcher_quarantine`.
public struct QuarantinedRow: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, Codable {
        case profile
        case filter
    }

    public let kind: Kind
    /// The row's id; nil when even the id could not be read.
    public let rowId: Int64?
    /// What is wrong and what to do, for the operator.
    public let reason: String

    public init(kind: Kind, rowId: Int64?, reason: String) {
        self.kind = kind
        self.rowId = rowId
        self.reason = reason
    }
}

/// What reading rows of the app's tables met besides ordinary values: the rows read that held odd
/// values (NULL array elements, infinite or impossible dates and timestamps, codes outside their item's
/// domain, a status other than 1...4, NULL where the spec says NOT NULL), which were read with those
/// values made total, and the rows quarantined.
public struct ReadReport: Sendable, Hashable {
    /// Ids of the rows read with odd values, each once, in reading order.
    public private(set) var oddIds: [Int64] = []
    public private(set) var quarantined: [QuarantinedRow] = []

    public init(oddIds: [Int64] = [], quarantined: [QuarantinedRow] = []) {
        self.oddIds = oddIds
        self.quarantined = quarantined
    }

    public static let empty = ReadReport()

    public var isEmpty: Bool { oddIds.isEmpty && quarantined.isEmpty }

    public mutating func noteOdd(_ id: Int64) { oddIds.append(id) }

    public mutating func quarantine(_ row: QuarantinedRow) { quarantined.append(row) }
}

extension Timestamp {
    /// A timestamp column's NULL, and what an infinite or impossible value counts as (runs.md): earlier
    /// than every real instant, so it never satisfies `withinDays` and sorts last in the cap's order
    /// (latest `last_login_at` first).
    public static let missing = Timestamp(microsecondsSinceEpoch: .min)

    /// Whether this is `missing`, or an infinity sentinel (Int64.max) that a driver may hand over.
    public var isMissingOrInfinite: Bool {
        microsecondsSinceEpoch == .min || microsecondsSinceEpoch == .max
    }
}
