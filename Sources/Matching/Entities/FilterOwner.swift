/// What the engine needs to know about a saved filter's owner.
public struct FilterOwner: Sendable, Hashable {
    public let id: Int64
    public let status: Int16
    public let plan: Int16
    /// A status other than 1...4 or a plan other than 0 or 1 (runs.md, "Eligibility"; docs/decisions.md,
    /// "Plans are ordered"), or a NULL the store read as 0: the run counts the owner among its odd values, as it
    /// counts a candidate.
    public let heldOddValues: Bool

    /// `readNull`: the store read a NULL status or plan (as 0).
    public init(id: Int64, status: Int16, plan: Int16, readNull: Bool = false) {
        self.id = id
        self.status = status
        self.plan = plan
        heldOddValues = readNull || !(1...4).contains(status) || !(0...1).contains(plan)
    }

    public var isActive: Bool { PairEligibility.isActive(status) }
}
