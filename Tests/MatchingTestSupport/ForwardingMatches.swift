import Chronology
import Matching

/// A match store that forwards every call to `base`: a test double subclasses it and overrides only what it
/// changes (a failure it injects, a read it notes).
///
/// `withUnitWriters` is not forwarded: the protocol's default writes every unit through this store, so a
/// subclass sees each unit of work (a base's own writers would bypass it).
open class ForwardingMatches: MatchRepository, @unchecked Sendable {
    public let base: any MatchRepository

    public init(_ base: any MatchRepository) { self.base = base }

    open func recordedPairs(among pairs: [MatchPair], forgottenBefore: Timestamp?) throws -> RecordedPairs {
        try base.recordedPairs(among: pairs, forgottenBefore: forgottenBefore)
    }
    open func waitingProfiles(filterIds: [Int64], forgetting: PassedOverCutoffs) throws -> WaitingProfiles {
        try base.waitingProfiles(filterIds: filterIds, forgetting: forgetting)
    }
    open func lastNotified(filterIds: [Int64]) throws -> [Int64: Timestamp] {
        try base.lastNotified(filterIds: filterIds)
    }
    open func withUnitTransaction<T>(_ body: (any UnitTransaction) throws -> T) throws -> T {
        try base.withUnitTransaction(body)
    }
    open func forgetExpired(
        before cutoff: Timestamp, passedOverBefore: Timestamp?, batchSize: Int, maxBatches: Int, stop: StopRequest
    ) throws -> RetentionOutcome? {
        try base.forgetExpired(
            before: cutoff, passedOverBefore: passedOverBefore, batchSize: batchSize, maxBatches: maxBatches,
            stop: stop)
    }
    open func listUnlistedMatches(ofNotifying filterIds: [Int64]) throws -> UnlistedListing {
        try base.listUnlistedMatches(ofNotifying: filterIds)
    }
    open func matches(filterId: Int64) throws -> [FilterMatch] { try base.matches(filterId: filterId) }
    open func notifications(filterId: Int64) throws -> [MatchNotification] {
        try base.notifications(filterId: filterId)
    }
}
