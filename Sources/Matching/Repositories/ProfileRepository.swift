import Chronology

/// Which profiles a backfill evaluates.
public enum ProfileSelection: Sendable, Hashable {
    case all
    /// Profiles whose `updated_at` lies in `from ..< to`; `from` nil: from the first; `to` nil: up to the
    /// backfill's clock (`upTo(_:)`).
    case changed(from: Timestamp?, to: Timestamp?)

    /// The selection with an open end closed at `clock`: a backfill resumed later reads the same window.
    public func upTo(_ clock: Timestamp) -> ProfileSelection {
        guard case .changed(let from, nil) = self else { return self }
        return .changed(from: from, to: clock)
    }
}

/// Profiles new to at least one change window (columnar), and the mark to remember for next time.
public struct ChangedProfiles: Sendable {
    public let profiles: ProfileColumns
    /// Per row of `profiles`: bit `w` is set when the profile is new to window `w`.
    public let windowMasks: [UInt64]
    public let mark: ChangeMark
    /// When `mark` was taken, by the store's clock.
    public let takenAt: Timestamp
    /// The snapshot the rows were read in (`mark` is an older one when an interrupted run is completed), when
    /// the store can tell later which profiles changed since (`UnitTransaction.profileFacts(_:ownerIds:readAt:)`).
    public let readAt: ChangeMark?

    public init(
        profiles: ProfileColumns, windowMasks: [UInt64], mark: ChangeMark, takenAt: Timestamp,
        readAt: ChangeMark? = nil
    ) {
        self.profiles = profiles
        self.windowMasks = windowMasks
        self.mark = mark
        self.takenAt = takenAt
        self.readAt = readAt
    }
}

public protocol ProfileRepository: Sendable {
    /// The profiles new to at least one of `windows`, visible at `upTo` (now, when nil), read consistently
    /// with the returned mark. A profile is new to a window when a matching change of it (insert, or an
    /// update of a column matching reads) committed after the window's mark; a nil window takes every
    /// profile, those that predate the change capture included. A change committed late by a transaction
    /// that began earlier is returned by the first read whose mark sees it. At most 64 windows.
    func changedProfiles(windows: [ChangeMark?], upTo: ChangeMark?) throws -> ChangedProfiles
    /// Among `marks`, those that see transactions this store has not started yet: progress recorded on a
    /// server ahead of this one (a restore, a failover). Time marks are never ahead.
    func marksAhead(_ marks: [ChangeMark]) throws -> [ChangeMark]
    /// Recorded changes that name transactions this store has not started yet, which only a dump restored into
    /// another server can leave (its rows keep the old server's transaction ids), are settled as committed now,
    /// so that every mark taken from now on sees them; returns how many. Time marks still decide whether the next
    /// run takes them (`matcher progress reset`). Without this a restored change would look newer than every
    /// mark, and every run would take its profile again until this server's transactions caught up.
    func settleChangesAhead() throws -> Int
    /// The profiles a backfill selects.
    func profiles(_ selection: ProfileSelection) throws -> ProfileColumns
    /// One profile, read like a run reads it; nil when there is no row. Throws `UnreadableProfile` when the
    /// row exists but a run would quarantine it.
    func profile(id: Int64) throws -> Profile?
    /// The profiles with these ids, as columns (read totally, like every profile read); absent ids are left out.
    func profileColumns(ids: [Int64]) throws -> ProfileColumns
    /// Status and plan of filter owners; an id with no profile row is absent.
    func owners(ids: [Int64]) throws -> [Int64: FilterOwner]
    /// The store's clock: a run's default `--now`.
    func currentTime() throws -> Timestamp
}

/// A profile row that exists but cannot be read (a column of a type the worker cannot read): runs quarantine
/// it and leave it out, so it matches no filter and satisfies none.
public struct UnreadableProfile: Error, Sendable, CustomStringConvertible {
    public let profileId: Int64
    public let reason: String

    public init(profileId: Int64, reason: String) {
        self.profileId = profileId
        self.reason = reason
    }

    public var description: String {
        "profile \(profileId) cannot be read, so runs quarantine it and it matches nothing: \(reason)"
    }
}
