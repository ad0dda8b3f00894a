import Chronology
import Foundation

/// `matcher explain --filter ID --profile ID`: for each condition of the filter, the profile's value,
/// the condition and pass or fail, and the eligibility checks, at the run's clock.
public struct ExplainMatch: Sendable {
    public struct Input: Sendable {
        public let filterId: Int64
        public let profileId: Int64
        public let now: Timestamp?
        /// nil: the zone of the runs that covered the filter's owner last (`Coverage`), else Asia/Tokyo, so that
        /// the answer is the one a run at the same clock gives.
        public let timeZone: TimeZone?

        public init(filterId: Int64, profileId: Int64, now: Timestamp? = nil, timeZone: TimeZone? = nil) {
            self.filterId = filterId
            self.profileId = profileId
            self.now = now
            self.timeZone = timeZone
        }
    }

    public struct Result: Sendable {
        public let filter: SavedFilter
        public let profileId: Int64
        public let profile: Profile?
        public let owner: FilterOwner?
        public let clock: EvaluationClock
        public let explanation: Explanation
        /// The pair as already recorded in `filter_matches`, if it is.
        public let recorded: FilterMatch?
        /// The retention days a run applies (the latest run's, else the default), and whether the recorded pair is
        /// past it at the clock and not waiting for a digest: forgotten, so a run records it again if it matches.
        public let retentionDays: Int
        public let recordedForgotten: Bool
        /// runs.md "Mutual matches", which defines mutual for a matching pair only: when the pair matches, the
        /// profile's first filter (by id) that the filter's owner satisfies at the clock (both active, no block
        /// either way, that filter not deleted, valid, not suspended, the profile's plan applied); nil when there
        /// is none (not mutual), and whenever the pair does not match.
        public let mutualVia: Int64?

        public var mutual: Bool { mutualVia != nil }
    }

    /// No saved filter has the id: a bad `--filter` value (cli.md: a usage error, exit 64), not a failure of the
    /// command (it exited 1 until session 32's review). There are no conditions to explain; a profile id that no
    /// row has is explained instead ("profile active: FAIL, profile not found"), as a match it cannot be.
    public struct FilterNotFound: ClassifiedError, Sendable, CustomStringConvertible {
        public let filterId: Int64
        public var description: String { "saved filter \(filterId) does not exist" }
        public var failureKind: FailureKind { .usage }
    }

    private let repositories: MatchingRepositories
    private var profiles: any ProfileRepository { repositories.profiles }
    private var filters: any FilterRepository { repositories.filters }
    private var blocks: any BlockRepository { repositories.blocks }
    private var matches: any MatchRepository { repositories.matches }

    public init(_ repositories: MatchingRepositories) {
        self.repositories = repositories
    }

    public func execute(_ input: Input) throws -> Result {
        guard let filter = try filters.filter(id: input.filterId) else {
            throw FilterNotFound(filterId: input.filterId)
        }
        // A row a run cannot read is quarantined and matches nothing (runs.md "Eligibility"): explain says so,
        // with the column and the problem, as its answer, not as a failure of the command.
        let profile: Profile?
        var unreadable: UnreadableProfile?
        do {
            profile = try profiles.profile(id: input.profileId)
        } catch let error as UnreadableProfile {
            (profile, unreadable) = (nil, error)
        }
        let owner = try profiles.owners(ids: [filter.ownerId])[filter.ownerId]
        let blockSet = try blocks.blocks(involving: [filter.ownerId, input.profileId])
        let zone = try input.timeZone ?? runsZone(forOwner: filter.ownerId) ?? .tokyo
        let clock = EvaluationClock(now: try input.now ?? profiles.currentTime(), timeZone: zone)
        let explanation = ReferenceEvaluator.explain(
            profile, filter, owner: owner, blocks: blockSet, clock: clock, profileUnreadable: unreadable)
        let recorded = try matches.matches(filterId: filter.id).first { $0.profileId == input.profileId }
        let retentionDays = try Retention.days(nil, runs: repositories.runs, output: SilentRunOutput())
        let forgotten =
            try recorded.map { match in
                try matches.recordedPairs(
                    among: [match.pair],
                    forgottenBefore: Retention.cutoff(clock: clock.now, retentionDays: retentionDays)
                ).expired.contains(match.pair)
            } ?? false
        return Result(
            filter: filter, profileId: input.profileId, profile: profile, owner: owner, clock: clock,
            explanation: explanation, recorded: recorded, retentionDays: retentionDays, recordedForgotten: forgotten,
            mutualVia: explanation.matches
                ? try mutualVia(filter: filter, profileId: input.profileId, blocks: blockSet, clock: clock) : nil)
    }

    /// The zone of the progress entry that covers `ownerId` (the runs of the owner's shard), if one does.
    private func runsZone(forOwner ownerId: Int64) throws -> TimeZone? {
        let coverage = try repositories.runs.coverage()
        return coverage.entryIndex(forOwner: ownerId).flatMap { coverage.entries[$0].timeZone }
            .flatMap(TimeZone.init(identifier:))
    }

    /// The reverse direction, with the reference evaluator: the profile's filters against the filter's owner.
    private func mutualVia(
        filter: SavedFilter, profileId: Int64, blocks: BlockSet, clock: EvaluationClock
    ) throws
        -> Int64?
    {
        guard profileId != filter.ownerId else { return nil }
        let ownerProfile: Profile?
        do {
            ownerProfile = try profiles.profile(id: filter.ownerId)
        } catch is UnreadableProfile {
            ownerProfile = nil  // a run quarantines the row: the owner satisfies no filter there either
        }
        guard let owner = ownerProfile else { return nil }
        let theirs = try filters.filters(ownedBy: [profileId])
        guard !theirs.isEmpty else { return nil }
        let record = try profiles.owners(ids: [profileId])[profileId]
        return theirs.first { ReferenceEvaluator.matches(owner, $0, owner: record, blocks: blocks, clock: clock) }?.id
    }
}
