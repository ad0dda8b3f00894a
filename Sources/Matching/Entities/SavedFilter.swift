import Chronology

/// PostgreSQL's `interval` as stored: months, days and microseconds, kept apart because a month and a
/// day have no fixed length.
public struct NotifyInterval: Sendable, Hashable {
    public let months: Int32
    public let days: Int32
    public let microseconds: Int64

    public init(months: Int32 = 0, days: Int32 = 0, microseconds: Int64 = 0) {
        self.months = months
        self.days = days
        self.microseconds = microseconds
    }

    /// `'1 day'`, the column's default.
    public static let oneDay = NotifyInterval(days: 1)
}

/// A row of `saved_filters`.
public struct SavedFilter: Sendable, Hashable {
    public let id: Int64
    public let ownerId: Int64
    public let name: String?
    /// `saved_filters.conditions` as JSON text; decoded and validated by `FilterConditions.decode(json:)`.
    public let conditionsJSON: String
    public let notify: Bool
    public let notifyEvery: NotifyInterval
    public let createdAt: Timestamp
    public let updatedAt: Timestamp
    public let deletedAt: Timestamp?
    /// Set when the row could not be read (a value of a type the worker cannot read, a NULL id or
    /// owner): the filter is quarantined, never evaluated, and listed in `matcher_quarantine`.
    public let quarantineReason: String?
    /// Whether the row held odd values that were read as defaults (NULL where the spec says NOT NULL,
    /// an infinite timestamp); counted in the run's summary.
    public let heldOddValues: Bool

    public init(
        id: Int64, ownerId: Int64, name: String? = nil, conditionsJSON: String, notify: Bool = true,
        notifyEvery: NotifyInterval = .oneDay, createdAt: Timestamp, updatedAt: Timestamp,
        deletedAt: Timestamp? = nil, quarantineReason: String? = nil, heldOddValues: Bool = false
    ) {
        self.quarantineReason = quarantineReason
        self.heldOddValues = heldOddValues
        self.id = id
        self.ownerId = ownerId
        self.name = name
        self.conditionsJSON = conditionsJSON
        self.notify = notify
        self.notifyEvery = notifyEvery
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.deletedAt = deletedAt
    }

    /// A filter with any `deleted_at` is deleted (soft delete), whatever that time is.
    public var isDeleted: Bool { deletedAt != nil }

    /// The filter's conditions, decoded and validated (filter-language.md).
    public func decodedConditions() throws(FilterValidationError) -> FilterConditions {
        try FilterConditions.decode(json: conditionsJSON)
    }
}
