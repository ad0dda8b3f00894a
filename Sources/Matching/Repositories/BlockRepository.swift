public protocol BlockRepository: Sendable {
    /// Every block with a side among `ids` (all blocks when nil).
    func blocks(involving ids: [Int64]?) throws -> BlockSet
}
