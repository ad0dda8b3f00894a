import Chronology

/// A (filter, profile) pair: recorded at most once, ever.
public struct MatchPair: Sendable, Hashable, Comparable {
    public let filterId: Int64
    public let profileId: Int64

    public init(filterId: Int64, profileId: Int64) {
        self.filterId = filterId
        self.profileId = profileId
    }

    public static func < (a: MatchPair, b: MatchPair) -> Bool {
        (a.filterId, a.profileId) < (b.filterId, b.profileId)
    }
}

/// A row of `filter_matches`.
public struct FilterMatch: Sendable, Hashable {
    public let filterId: Int64
    public let profileId: Int64
    public let matchedAt: Timestamp
    public let runId: Int64?
    public let notificationId: Int64?
    /// The latest finding of runs.md "Mutual matches": set when the pair is recorded and again when notified.
    public let mutual: Bool
    /// Recorded by a backfill without `--notify`: never notified, never in a digest (runs.md "Backfill").
    public let silent: Bool

    public init(
        filterId: Int64, profileId: Int64, matchedAt: Timestamp, runId: Int64?, notificationId: Int64? = nil,
        mutual: Bool = false, silent: Bool = false
    ) {
        self.filterId = filterId
        self.profileId = profileId
        self.matchedAt = matchedAt
        self.runId = runId
        self.notificationId = notificationId
        self.mutual = mutual
        self.silent = silent
    }

    public var pair: MatchPair { MatchPair(filterId: filterId, profileId: profileId) }

    public func notified(by notificationId: Int64, mutual: Bool) -> FilterMatch {
        FilterMatch(
            filterId: filterId, profileId: profileId, matchedAt: matchedAt, runId: runId,
            notificationId: notificationId, mutual: mutual, silent: silent)
    }

    /// The same row as `silent` says it is.
    public func with(silent: Bool) -> FilterMatch {
        FilterMatch(
            filterId: filterId, profileId: profileId, matchedAt: matchedAt, runId: runId,
            notificationId: notificationId, mutual: mutual, silent: silent)
    }
}

/// A row of `notifications`: one digest for a filter's owner.
public struct MatchNotification: Sendable, Hashable {
    public let id: Int64
    public let recipientId: Int64
    public let filterId: Int64
    public let matchCount: Int
    public let profileIds: [Int64]
    public let createdAt: Timestamp
    public let sentAt: Timestamp?
    public let runId: Int64?
    /// How many of the counted matches are mutual.
    public let mutualCount: Int

    public init(
        id: Int64, recipientId: Int64, filterId: Int64, matchCount: Int, profileIds: [Int64],
        createdAt: Timestamp, sentAt: Timestamp? = nil, runId: Int64?, mutualCount: Int = 0
    ) {
        self.mutualCount = mutualCount
        self.id = id
        self.recipientId = recipientId
        self.filterId = filterId
        self.matchCount = matchCount
        self.profileIds = profileIds
        self.createdAt = createdAt
        self.sentAt = sentAt
        self.runId = runId
    }
}

/// A row of `blocks`.
public struct Block: Sendable, Hashable {
    public let blockerId: Int64
    public let blockedId: Int64

    public init(blockerId: Int64, blockedId: Int64) {
        self.blockerId = blockerId
        self.blockedId = blockedId
    }
}
