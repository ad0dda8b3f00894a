import Chronology

public enum RunKind: String, Sendable, Hashable, Codable {
    case run
    case backfill
}

public enum RunStatus: String, Sendable, Hashable, Codable {
    case running
    case succeeded
    case failed
    /// Given up by an operator (`matcher runs abandon`) or superseded by a run of a newer shard layout:
    /// never resumed; what it committed stays.
    case abandoned
}

/// Where change capture stands: an opaque token from the profile store (a PostgreSQL
/// `pg_snapshot` in text form, or a version counter in memory). Changes committed
/// after it are visible to a later run; changes visible in it were already considered.
public struct ChangeMark: Sendable, Hashable, Codable, CustomStringConvertible {
    public let token: String
    public init(_ token: String) { self.token = token }
    public var description: String { token }

    /// A mark an operator set by time (`matcher progress reset --to`): changes recorded at or after it count as new.
    public static func resetTo(_ time: Timestamp) -> ChangeMark { ChangeMark("time:" + time.iso8601) }

    /// What a mark holds: the store's own token, or a time set by an operator.
    public enum Form: Sendable, Hashable {
        case snapshot(String)
        case time(Timestamp)

        public init(_ mark: ChangeMark) {
            if mark.token.hasPrefix("time:"), let time = Timestamp(iso8601: String(mark.token.dropFirst(5))) {
                self = .time(time)
            } else {
                self = .snapshot(mark.token)
            }
        }
    }
}

/// The phases a run reports timings for.
public enum RunPhase: String, Sendable, Hashable, Codable, CaseIterable {
    case read
    case evaluate
    case write
    /// The retention sweep.
    case forget
}

/// What a run has written so far; kept in the runs table and carried across a resume.
public struct RunCounters: Sendable, Hashable, Codable {
    public let candidates: Int
    public let filtersEvaluated: Int
    public let filtersInvalid: Int
    public let filtersPaidIgnored: Int
    public let matchesWritten: Int
    public let notificationsWritten: Int
    /// Pairs the retention sweep forgot.
    public let matchesForgotten: Int

    public init(candidates: Int = 0, filtersEvaluated: Int = 0, filtersInvalid: Int = 0, filtersPaidIgnored: Int = 0,
                matchesWritten: Int = 0, notificationsWritten: Int = 0, matchesForgotten: Int = 0) {
        self.candidates = candidates
        self.filtersEvaluated = filtersEvaluated
        self.filtersInvalid = filtersInvalid
        self.filtersPaidIgnored = filtersPaidIgnored
        self.matchesWritten = matchesWritten
        self.notificationsWritten = notificationsWritten
        self.matchesForgotten = matchesForgotten
    }

    public static let zero = RunCounters()

    public static func + (a: RunCounters, b: RunCounters) -> RunCounters {
        RunCounters(candidates: a.candidates + b.candidates,
                    filtersEvaluated: a.filtersEvaluated + b.filtersEvaluated,
                    filtersInvalid: a.filtersInvalid + b.filtersInvalid,
                    filtersPaidIgnored: a.filtersPaidIgnored + b.filtersPaidIgnored,
                    matchesWritten: a.matchesWritten + b.matchesWritten,
                    notificationsWritten: a.notificationsWritten + b.notificationsWritten,
                    matchesForgotten: a.matchesForgotten + b.matchesForgotten)
    }
}

/// A row of the runs table (`matcher_runs`).
public struct RunRecord: Sendable, Hashable {
    public let id: Int64
    public let kind: RunKind
    public let shard: Shard
    public let clock: Timestamp
    public let maxPerFilter: Int
    public let writesNotifications: Bool
    public let status: RunStatus
    /// The change-capture windows: for each filter, the profiles changed after its owner's newest coverage
    /// (every profile when none) and visible at `upTo`. Nil for a backfill.
    public let coverage: Coverage?
    public let upTo: ChangeMark?
    /// When `upTo` was taken, by the store's clock: the run's coverage entry is ordered by it.
    public let upToTakenAt: Timestamp?
    /// The time zone the run evaluates in (its identifier).
    public let timeZone: String?
    public let retentionDays: Int?
    /// Filters up to and including this id have been written; a resumed run continues after it.
    public let resumeAfterFilter: Int64?
    /// The backfill's selection, so that only the same backfill resumes it.
    public let parameters: String
    public let counters: RunCounters

    public init(id: Int64, kind: RunKind, shard: Shard, clock: Timestamp, maxPerFilter: Int, writesNotifications: Bool,
                status: RunStatus, coverage: Coverage?, upTo: ChangeMark?, upToTakenAt: Timestamp? = nil,
                timeZone: String? = nil, retentionDays: Int? = nil, resumeAfterFilter: Int64?,
                parameters: String, counters: RunCounters) {
        self.id = id
        self.kind = kind
        self.shard = shard
        self.clock = clock
        self.maxPerFilter = maxPerFilter
        self.writesNotifications = writesNotifications
        self.status = status
        self.coverage = coverage
        self.upTo = upTo
        self.upToTakenAt = upToTakenAt
        self.timeZone = timeZone
        self.retentionDays = retentionDays
        self.resumeAfterFilter = resumeAfterFilter
        self.parameters = parameters
        self.counters = counters
    }
}

/// A filter skipped as invalid, with the reason, for operators.
public struct InvalidFilter: Sendable, Hashable {
    public let filterId: Int64
    public let ownerId: Int64
    public let error: FilterValidationError

    public init(filterId: Int64, ownerId: Int64, error: FilterValidationError) {
        self.filterId = filterId
        self.ownerId = ownerId
        self.error = error
    }
}
