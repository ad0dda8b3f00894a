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

    /// Running or failed: not finished, so the shard's next run may complete it (or an operator abandon it).
    public var isUnfinished: Bool { self == .running || self == .failed }
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
    /// Profiles read that could not be decoded: left out of the run and listed in `matcher_quarantine`.
    public let profilesQuarantined: Int
    /// Filters read that could not be decoded: not evaluated, listed in `matcher_quarantine`.
    public let filtersQuarantined: Int
    /// Profiles and filters read that held odd values (runs.md, "Eligibility": NULL array elements,
    /// infinite dates, out-of-domain codes, unknown status, NULL where NOT NULL was assumed, a filter
    /// whose owner has no profile row); read totally and counted, never a failure.
    public let oddValues: Int
    /// Filters whose every condition is paid while the owner lacks the plan (filter-language.md): suspended,
    /// they match nothing and send nothing (not counted as evaluated).
    public let filtersSuspended: Int
    /// Digests due whose waiting matches no longer qualified (profile no longer eligible, or the filter's
    /// current conditions no longer satisfied): no notification was written, the matches wait.
    public let digestsHeldBack: Int
    /// New matches recorded as mutual (runs.md "Mutual matches").
    public let matchesMutual: Int

    public init(
        candidates: Int = 0, filtersEvaluated: Int = 0, filtersInvalid: Int = 0, filtersPaidIgnored: Int = 0,
        matchesWritten: Int = 0, notificationsWritten: Int = 0, matchesForgotten: Int = 0,
        profilesQuarantined: Int = 0, filtersQuarantined: Int = 0, oddValues: Int = 0,
        filtersSuspended: Int = 0, digestsHeldBack: Int = 0, matchesMutual: Int = 0
    ) {
        self.filtersSuspended = filtersSuspended
        self.digestsHeldBack = digestsHeldBack
        self.matchesMutual = matchesMutual
        self.matchesForgotten = matchesForgotten
        self.profilesQuarantined = profilesQuarantined
        self.filtersQuarantined = filtersQuarantined
        self.oddValues = oddValues
        self.candidates = candidates
        self.filtersEvaluated = filtersEvaluated
        self.filtersInvalid = filtersInvalid
        self.filtersPaidIgnored = filtersPaidIgnored
        self.matchesWritten = matchesWritten
        self.notificationsWritten = notificationsWritten
    }

    public static let zero = RunCounters()

    public static func + (a: RunCounters, b: RunCounters) -> RunCounters {
        RunCounters(
            candidates: a.candidates + b.candidates,
            filtersEvaluated: a.filtersEvaluated + b.filtersEvaluated,
            filtersInvalid: a.filtersInvalid + b.filtersInvalid,
            filtersPaidIgnored: a.filtersPaidIgnored + b.filtersPaidIgnored,
            matchesWritten: a.matchesWritten + b.matchesWritten,
            notificationsWritten: a.notificationsWritten + b.notificationsWritten,
            matchesForgotten: a.matchesForgotten + b.matchesForgotten,
            profilesQuarantined: a.profilesQuarantined + b.profilesQuarantined,
            filtersQuarantined: a.filtersQuarantined + b.filtersQuarantined,
            oddValues: a.oddValues + b.oddValues,
            filtersSuspended: a.filtersSuspended + b.filtersSuspended,
            digestsHeldBack: a.digestsHeldBack + b.digestsHeldBack,
            matchesMutual: a.matchesMutual + b.matchesMutual)
    }

    /// These counters with the read-issue counts replaced by `issues`' (kept as the larger of the two,
    /// so that a resumed run, which reads again, never counts a row twice nor forgets one).
    public func withReadIssues(_ issues: RunCounters) -> RunCounters {
        RunCounters(
            candidates: candidates, filtersEvaluated: filtersEvaluated, filtersInvalid: filtersInvalid,
            filtersPaidIgnored: filtersPaidIgnored, matchesWritten: matchesWritten,
            notificationsWritten: notificationsWritten, matchesForgotten: matchesForgotten,
            profilesQuarantined: max(profilesQuarantined, issues.profilesQuarantined),
            filtersQuarantined: max(filtersQuarantined, issues.filtersQuarantined),
            oddValues: max(oddValues, issues.oddValues), filtersSuspended: filtersSuspended,
            digestsHeldBack: digestsHeldBack, matchesMutual: matchesMutual)
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
    /// The process writing the run: set when it starts the run or claims it (`RunRepository.claim`). Its units
    /// commit, and the run finishes, only while it is still the run's owner. Nil for a run started before the
    /// store kept owners.
    public let owner: String?

    public init(
        id: Int64, kind: RunKind, shard: Shard, clock: Timestamp, maxPerFilter: Int, writesNotifications: Bool,
        status: RunStatus, coverage: Coverage?, upTo: ChangeMark?, upToTakenAt: Timestamp? = nil,
        timeZone: String? = nil, retentionDays: Int? = nil, resumeAfterFilter: Int64?,
        parameters: String, counters: RunCounters, owner: String? = nil
    ) {
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
        self.owner = owner
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
