public protocol BlockRepository: Sendable {
    /// Every block with a side among `ids` (all blocks when nil). A run asks for the blocks of its candidates
    /// (and, for its digests, of the waiting matches' profiles), never for the whole table, which the app
    /// grows without bound: the run's cost and memory follow the day's profiles.
    func blocks(involving ids: [Int64]?) throws -> BlockSet
}
