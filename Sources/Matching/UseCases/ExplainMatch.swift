import Chronology
import Foundation

/// `matcher explain --filter ID --profile ID`: for each condition of the filter, the profile's value,
/// the condition and pass or fail, and the eligibility checks, at the run's clock.
public struct ExplainMatch: Sendable {
    public struct Input: Sendable {
        public let filterId: Int64
        public let profileId: Int64
        public let now: Timestamp?
        public let timeZone: TimeZone

        public init(filterId: Int64, profileId: Int64, now: Timestamp? = nil, timeZone: TimeZone = .tokyo) {
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
    }

    public struct FilterNotFound: Error, Sendable, CustomStringConvertible {
        public let filterId: Int64
        public var description: String { "saved filter \(filterId) does not exist" }
    }

    private let profiles: any ProfileRepository
    private let filters: any FilterRepository
    private let blocks: any BlockRepository
    private let matches: any MatchRepository

    public init(profiles: any ProfileRepository, filters: any FilterRepository, blocks: any BlockRepository,
                matches: any MatchRepository) {
        self.profiles = profiles
        self.filters = filters
        self.blocks = blocks
        self.matches = matches
    }

    public func execute(_ input: Input) throws -> Result {
        guard let filter = try filters.filter(id: input.filterId) else {
            throw FilterNotFound(filterId: input.filterId)
        }
        let profile = try profiles.profile(id: input.profileId)
        let owner = try profiles.owners(ids: [filter.ownerId])[filter.ownerId]
        let blockSet = try blocks.blocks(involving: [filter.ownerId, input.profileId])
        let clock = EvaluationClock(now: try input.now ?? profiles.currentTime(), timeZone: input.timeZone)
        let explanation = ReferenceEvaluator.explain(profile, filter, owner: owner, blocks: blockSet, clock: clock)
        let recorded = try matches.matches(filterId: filter.id).first { $0.profileId == input.profileId }
        return Result(filter: filter, profileId: input.profileId, profile: profile, owner: owner, clock: clock,
                      explanation: explanation, recorded: recorded)
    }
}
