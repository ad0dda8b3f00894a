import Chronology

/// Which profiles a backfill evaluates.
public enum ProfileSelection: Sendable, Hashable {
    case all
    /// Profiles whose `updated_at` lies in `from ..< to`.
    case changed(from: Timestamp, to: Timestamp)
}

/// Profiles changed since a mark (columnar), and the mark to remember for next time.
public struct ChangedProfiles: Sendable {
    public let profiles: ProfileColumns
    public let mark: ChangeMark

    public init(profiles: ProfileColumns, mark: ChangeMark) {
        self.profiles = profiles
        self.mark = mark
    }
}

public protocol ProfileRepository: Sendable {
    /// The profiles inserted or changed and committed after `since` (every profile when nil) and
    /// visible at `upTo` (now, when nil), read consistently with the returned mark. A change committed
    /// late by a transaction that began earlier is returned by the first read whose mark sees it.
    func changedProfiles(since: ChangeMark?, upTo: ChangeMark?) throws -> ChangedProfiles
    /// The profiles a backfill selects.
    func profiles(_ selection: ProfileSelection) throws -> ProfileColumns
    func profile(id: Int64) throws -> Profile?
    /// Status and plan of filter owners; an id with no profile row is absent.
    func owners(ids: [Int64]) throws -> [Int64: FilterOwner]
    /// The store's clock: a run's default `--now`.
    func currentTime() throws -> Timestamp
}
