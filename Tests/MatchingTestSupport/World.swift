import Chronology
import Foundation
import Matching

/// A small world for use-case tests: the clock, profile and filter builders.
public enum World {
    public static let day1 = Timestamp(iso8601: "2026-03-01T03:00:00Z")!
    public static let day2 = day1.adding(days: 1)

    /// A profile with the items the tests filter on; everything else unanswered.
    public static func profile(
        _ id: Int64, gender: Int16 = 2, born: String = "1996-05-01", residence: Int16 = 13,
        smoking: Int16 = 1, status: Int16 = 1, plan: Int16 = 0, loginHoursAgo: Int = 1,
        communities: [Int32] = [], at clock: Timestamp = day1
    ) -> Profile {
        Profile.make(
            id: id, status: status, plan: plan,
            lastLoginAt: clock.adding(microseconds: -Int64(loginHoursAgo) * 3_600_000_000),
            createdAt: clock.adding(days: -100),
            [
                "gender": .code(gender),
                "age": .date(CalendarDate(iso8601: born)),
                "residence": .code(residence),
                "smoking": .code(smoking),
                "communities": .codes(communities),
            ])
    }

    public static func filter(
        _ id: Int64, owner: Int64, _ json: String = #"{"gender": {"anyOf": [2]}}"#, notify: Bool = true,
        every: NotifyInterval = NotifyInterval(months: 0, days: 1, microseconds: 0),
        deleted: Bool = false
    ) -> SavedFilter {
        SavedFilter(
            id: id, ownerId: owner, name: "search \(id)", conditionsJSON: json, notify: notify,
            notifyEvery: every, createdAt: day1.adding(days: -10), updatedAt: day1.adding(days: -10),
            deletedAt: deleted ? day1.adding(days: -1) : nil)
    }

    public static func run(
        _ store: InMemoryStore, now: Timestamp = day1, shard: Shard = .all, maxPerFilter: Int = 100,
        dryRun: Bool = false, unitFilterLimit: Int = 2_000,
        output: any RunOutputHandler = SilentRunOutput()
    ) throws -> RunSummary {
        try RunMatching(
            MatchingRepositories(store: store), output: output, options: PassOptions(unitFilterLimit: unitFilterLimit)
        )
        .execute(.init(now: now, shard: shard, maxPerFilter: maxPerFilter, dryRun: dryRun))
    }

    public static func backfill(_ store: InMemoryStore, _ input: Backfill.Input) throws -> RunSummary {
        try Backfill(MatchingRepositories(store: store)).execute(input)
    }

    public static func pairs(_ store: InMemoryStore) -> [MatchPair] { store.allMatches.map(\.pair) }

    /// What another store holds, comparable across stores: matches and notifications without ids.
    public static func rows(_ store: InMemoryStore) -> (matches: [String], notifications: [String]) {
        let notes = store.allNotifications
        let byId = Dictionary(uniqueKeysWithValues: notes.map { ($0.id, $0) })
        let silent = store.silentPairs
        let matches = store.allMatches.map { m in
            "\(m.filterId)/\(m.profileId) at \(m.matchedAt) notified \(m.notificationId.flatMap { byId[$0] }.map { "\($0.filterId)@\($0.createdAt)" } ?? "no")"
                + "\(m.mutual ? " mutual" : "")\(silent.contains(m.pair) ? " silent" : "")"
        }
        let notifications = notes.map {
            "\($0.recipientId) \($0.filterId) \($0.matchCount) \($0.profileIds) \($0.createdAt) mutual \($0.mutualCount)"
        }.sorted()
        return (matches, notifications)
    }
}
