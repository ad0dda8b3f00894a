/// Which saved filters a backfill evaluates.
public enum FilterSelection: Sendable, Hashable {
    case all
    case ids([Int64])
    case owners([Int64])
}

public protocol FilterRepository: Sendable {
    /// Filters that are not deleted, owned by the shard, chosen by `selection`, with `id > afterId`, in id order.
    func filters(_ selection: FilterSelection, shard: Shard, afterId: Int64?) throws -> [SavedFilter]
    /// The filters, not deleted, owned by any of `ownerIds`, whatever their shard, in id order.
    func filters(ownedBy ownerIds: [Int64]) throws -> [SavedFilter]
    /// One filter, deleted or not.
    func filter(id: Int64) throws -> SavedFilter?
    /// Records, for operators, the shard's filters found invalid by run `runId`, and forgets the ones in
    /// `validIds` (fixed since). Returns those of `invalid` newly listed: not listed before, or for another reason
    /// (what a run warns about; a filter invalid for the same reason run after run is counted, not warned again).
    @discardableResult
    func recordValidation(invalid: [InvalidFilter], validIds: [Int64], runId: Int64) throws -> [InvalidFilter]
    /// The invalid filters currently recorded.
    func recordedInvalidFilters() throws -> [InvalidFilter]
}
