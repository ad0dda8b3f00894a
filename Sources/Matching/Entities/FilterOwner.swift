/// What the engine needs to know about a saved filter's owner.
public struct FilterOwner: Sendable, Hashable {
    public let id: Int64
    public let status: Int16
    public let plan: Int16

    public init(id: Int64, status: Int16, plan: Int16) {
        self.id = id
        self.status = status
        self.plan = plan
    }

    public var isActive: Bool { PairEligibility.isActive(status) }
}
