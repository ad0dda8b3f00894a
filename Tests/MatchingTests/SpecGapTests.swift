import Chronology
import Foundation
import MatchingTestSupport
import Testing

@testable import Matching

/// Behaviours runs.md states that no other test held: a `backfill --notify` on a filter that is not due, mutual
/// pairs competing for a capped filter's places, and a shard that fails for days while the other advances.
@Suite struct SpecGapTests {
    static let weekly = NotifyInterval(days: 7)
    static let hour: Int64 = 3_600_000_000

    /// Runs at `now` with the store's clock moved there.
    @discardableResult
    func run(
        _ store: InMemoryStore, _ now: Timestamp, shard: Shard = .all, maxPerFilter: Int = 100
    ) throws -> RunSummary {
        store.setClock(now)
        return try World.run(store, now: now, shard: shard, maxPerFilter: maxPerFilter)
    }

    // MARK: (a) backfill --notify on a filter that is not due

    /// runs.md, Backfill: "With `--notify` they are notified like a run's (due filters now, the rest in later
    /// digests)". Owners 1 and 2 search women in Tokyo; filter 100 (owner 1) is weekly, 101 (owner 2) daily; day 1's
    /// run records and notifies woman 10 for both. On day 2 both owners add Osaka (27), where women 11 and 12 live
    /// and have not changed: no run evaluates them, the backfill does. 101 is due (a day has passed): notified
    /// now. 100 is not (one day of seven): its two matches wait, unnotified and not silent, through the runs of the
    /// week, and the first run at or after seven days less the tolerance (a tenth, at most an hour) after its
    /// last digest counts them in one digest, each once, latest login first.
    @Test func aBackfillWithNotifyLeavesAFilterThatIsNotDueToItsNextDigest() throws {
        let day1 = World.day1, day2 = World.day2
        let store = InMemoryStore(now: day1)
        store.save([
            World.profile(1, gender: 1), World.profile(2, gender: 1),
            World.profile(10, loginHoursAgo: 3),
            World.profile(11, residence: 27, loginHoursAgo: 1),
            World.profile(12, residence: 27, loginHoursAgo: 2),
        ])
        let tokyo = #"{"gender": {"anyOf": [2]}, "residence": {"anyOf": [13]}}"#
        let tokyoOrOsaka = #"{"gender": {"anyOf": [2]}, "residence": {"anyOf": [13, 27]}}"#
        store.save([World.filter(100, owner: 1, tokyo, every: Self.weekly), World.filter(101, owner: 2, tokyo)])
        let first = try run(store, day1)
        #expect(first.counters.matchesWritten == 2 && first.counters.notificationsWritten == 2)
        let weeklyFirst = try #require(try store.notifications(filterId: 100).first)
        #expect(weeklyFirst.profileIds == [10] && weeklyFirst.createdAt == day1)

        store.setClock(day2)
        store.save([
            World.filter(100, owner: 1, tokyoOrOsaka, every: Self.weekly), World.filter(101, owner: 2, tokyoOrOsaka),
        ])
        let backfill = try World.backfill(
            store, .init(filters: .ids([100, 101]), writesNotifications: true, now: day2))
        #expect(backfill.counters.matchesWritten == 4)
        #expect(backfill.counters.notificationsWritten == 1)
        #expect(store.silentPairs.isEmpty)
        // The daily filter, due: notified now.
        #expect(try store.notifications(filterId: 101).map(\.profileIds) == [[10], [11, 12]])
        #expect(try store.notifications(filterId: 101).last?.createdAt == day2)
        // The weekly one, not due: nothing now; its matches wait.
        #expect(try store.notifications(filterId: 100).map(\.id) == [weeklyFirst.id])
        let waiting = [MatchPair(filterId: 100, profileId: 11), MatchPair(filterId: 100, profileId: 12)]
        #expect(store.waitingPairs == Set(waiting))
        #expect(try store.matches(filterId: 100).filter { $0.notificationId == nil }.map(\.profileId) == [11, 12])

        // Runs of the week before the digest is due: nothing changed, nothing notified.
        let dueAt = day1.adding(days: 7).adding(microseconds: -Self.hour)
        for clock in [day1.adding(days: 3), dueAt.adding(microseconds: -1)] {
            let early = try run(store, clock)
            #expect(early.counters.candidates == 0)
            #expect(early.counters.notificationsWritten == 0, "at \(clock)")
            #expect(try store.notifications(filterId: 100).count == 1, "at \(clock)")
        }
        let due = try run(store, dueAt)
        #expect(due.counters.candidates == 0 && due.counters.matchesWritten == 0)
        #expect(due.counters.notificationsWritten == 1)
        let digests = try store.notifications(filterId: 100)
        #expect(digests.count == 2)
        let digest = try #require(digests.last)
        #expect(digest.matchCount == 2)
        #expect(digest.profileIds == [11, 12])
        #expect(digest.createdAt == dueAt)
        #expect(digest.recipientId == 1)
        let notifiedBy = Dictionary(
            uniqueKeysWithValues: try store.matches(filterId: 100).map { ($0.profileId, $0.notificationId) })
        #expect(notifiedBy == [10: weeklyFirst.id, 11: digest.id, 12: digest.id])
        #expect(store.waitingPairs.isEmpty)
        // Shown once: the next week's digest has nothing of them.
        let nextWeek = try run(store, dueAt.adding(days: 7))
        #expect(nextWeek.counters.notificationsWritten == 0)
        #expect(try store.notifications(filterId: 100).count == 2)
        #expect(store.allNotifications.count == 4)
    }

    // MARK: (b) mutual pairs and the cap

    /// runs.md, Mutual matches: "Whether a pair is mutual never changes which pairs are recorded or their order."
    /// Owner 1 (a man in Tokyo) searches women, capped at 12 a run; 14 women compete, six of whom own a filter
    /// that wants him (mutual), and woman 10 one that wants Osaka (not mutual). The cap keeps the latest logins,
    /// then the smallest id, whichever are mutual: mutual 22 and 23 (the oldest logins) are left out, mutual 12, 16,
    /// 19 and 21 are kept. The digest lists the first ten in the same order and `mutual_count` counts the mutual
    /// ones among the twelve it counts (four; two of them shown). A twin world where no woman owns a filter (no
    /// pair mutual) records and lists exactly the same.
    @Test func mutualPairsNeitherTakePlacesInTheCapNorMoveInTheDigest() throws {
        // Hours since each woman's last login.
        let hoursAgo: [Int64: Int] = [
            10: 3, 11: 1, 12: 7, 13: 2, 14: 5, 15: 1, 16: 9, 17: 4, 18: 6, 19: 8, 20: 2, 21: 10, 22: 11, 23: 12,
        ]
        let mutual: [Int64] = [12, 16, 19, 21, 22, 23]
        func world(womenFilters: Bool) -> InMemoryStore {
            let store = InMemoryStore(now: World.day1)
            store.save(
                [World.profile(1, gender: 1, residence: 13)]
                    + hoursAgo.keys.sorted().map { World.profile($0, loginHoursAgo: hoursAgo[$0]!) })
            var filters = [World.filter(100, owner: 1)]
            if womenFilters {
                filters += mutual.map {
                    World.filter(200 + $0, owner: $0, #"{"gender": {"anyOf": [1]}, "residence": {"anyOf": [13]}}"#)
                }
                filters.append(
                    World.filter(210, owner: 10, #"{"gender": {"anyOf": [1]}, "residence": {"anyOf": [27]}}"#))
            }
            store.save(filters)
            return store
        }
        let capOrder: [Int64] = [11, 15, 13, 20, 10, 17, 14, 18, 12, 19, 16, 21]

        let store = world(womenFilters: true)
        try run(store, World.day1, maxPerFilter: 12)
        let recorded = try store.matches(filterId: 100)
        #expect(Set(recorded.map(\.profileId)) == Set(capOrder))
        #expect(recorded.count == 12)
        #expect(recorded.filter(\.mutual).map(\.profileId).sorted() == [12, 16, 19, 21])
        let notes = try store.notifications(filterId: 100)
        let digest = try #require(notes.first)
        #expect(notes.count == 1)
        #expect(digest.matchCount == 12)
        #expect(digest.profileIds == Array(capOrder.prefix(10)))
        #expect(digest.mutualCount == 4)
        // The other side: each mutual woman's filter records the owner, mutual (his filter wants her) whether or
        // not the cap kept her pair with him.
        for woman in mutual {
            let theirs = try store.matches(filterId: 200 + woman)
            #expect(theirs.map(\.profileId) == [1], "filter \(200 + woman)")
            #expect(theirs.map(\.mutual) == [true], "filter \(200 + woman)")
        }
        #expect(try store.matches(filterId: 210).isEmpty)

        let twin = world(womenFilters: false)
        try run(twin, World.day1, maxPerFilter: 12)
        #expect(try twin.matches(filterId: 100).map(\.profileId) == recorded.map(\.profileId))
        #expect(try twin.matches(filterId: 100).allSatisfy { !$0.mutual })
        let twinDigest = try #require(try twin.notifications(filterId: 100).first)
        #expect(twinDigest.profileIds == digest.profileIds)
        #expect(twinDigest.matchCount == 12 && twinDigest.mutualCount == 0)
    }

    // MARK: (c) a shard that fails for days

    /// runs.md, Shards: each shard has its own progress, "so that a slow or failed shard does not hold the others
    /// back", and a run considers for each filter "exactly the profiles changed since the last successful run that
    /// covered that filter". Filter 100's owner (2) is shard 0/2's, filter 101's (3) shard 1/2's; both search
    /// women. After day 1 (both shards succeed), 0/2 fails on days 2, 3 and 4 (its first unit's commit), while
    /// 1/2 succeeds each day with that day's changes only. On day 5, 0/2 completes its interrupted day-2 run
    /// (docs/decisions.md: with its own clock and window) and then runs day 5: together they consider exactly the
    /// five women changed since day 1 (20 changed on days 2 and 4, once, as she is now), and record each once.
    @Test func aShardThatFailedForDaysCatchesUpOnEveryChangeOnceAndTheOtherShardNeverWaits() throws {
        let day = (1...5).map { World.day1.adding(days: $0 - 1) }
        let zero = try Shard(index: 0, count: 2), one = try Shard(index: 1, count: 2)
        let store = InMemoryStore(now: day[0])
        store.save([
            World.profile(2, gender: 1), World.profile(3, gender: 1), World.profile(10), World.profile(11),
        ])
        store.save([World.filter(100, owner: 2), World.filter(101, owner: 3)])
        for half in [zero, one] {
            let first = try run(store, day[0], shard: half)
            #expect(first.counters.candidates == 4 && first.counters.matchesWritten == 2)
        }

        // Each day's changes (the app's), saved at that day's clock.
        let changes: [[Profile]] = [
            [World.profile(20, at: day[1]), World.profile(21, at: day[1])],
            // 11 only logs in: activity, no candidate.
            [World.profile(22, at: day[2]), World.profile(11, at: day[2])],
            // 20 changes an item she is matched on by no filter (smoking): a change all the same.
            [World.profile(23, at: day[3]), World.profile(20, smoking: 2, at: day[3])],
            [World.profile(24, at: day[4])],
        ]
        var otherShard: [Int] = []
        for d in 1...3 {
            store.setClock(day[d])
            store.save(changes[d - 1], updatedAt: day[d])
            store.failCommit(after: 0)
            #expect(throws: InMemoryCommitFailure.self) { try run(store, day[d], shard: zero) }
            let other = try run(store, day[d], shard: one)
            otherShard.append(other.counters.candidates)
            #expect(other.resumedRunId == nil && other.completedRun == nil)
        }
        // Shard 0/2 wrote nothing for days 2-4; its one interrupted run (day 2's) stays failed, tried again on days
        // 3 and 4.
        #expect(try store.matches(filterId: 100).map(\.profileId) == [10, 11])
        #expect(try store.notifications(filterId: 100).count == 1)
        let failed = store.allRuns.filter { $0.shard == zero && $0.status != .succeeded }
        #expect(failed.map(\.clock) == [day[1]])
        #expect(failed.map(\.status) == [.failed])

        store.setClock(day[4])
        store.save(changes[3], updatedAt: day[4])
        let recovered = try run(store, day[4], shard: zero)
        let completed = try #require(recovered.completedRun)
        #expect(recovered.resumedRunId == completed.runId)
        #expect(completed.runId == failed.first?.id)
        let other = try run(store, day[4], shard: one)
        otherShard.append(other.counters.candidates)

        // The other shard, each day: 20 and 21; 22; 23 and 20; 24. Never held back, never a change twice.
        #expect(otherShard == [2, 1, 2, 1])
        // The recovered shard: day 2's run, completed, considers the women changed by day 2 and not since (21;
        // 20 changed again on day 4, and is left to day 5's run); day 5's run those changed since day 2's read
        // (20, 22, 23, 24). Five women changed since the shard's last success, each considered once: one pair
        // written by the completion, four by day 5's run. A run's candidate counter is what it read when it
        // started (kept in its row across attempts, whose committed units may have used every one of them), so
        // the completed run still says 2: a figure of the run, not of the completing pass.
        #expect(completed.counters.candidates == 2 && recovered.counters.candidates == 4)
        #expect(completed.counters.matchesWritten == 1 && recovered.counters.matchesWritten == 4)

        // The same pairs for both filters, each once.
        let everyone: [Int64] = [10, 11, 20, 21, 22, 23, 24]
        #expect(try store.matches(filterId: 100).map(\.profileId) == everyone)
        #expect(try store.matches(filterId: 101).map(\.profileId) == everyone)
        let matchedAt = Dictionary(
            uniqueKeysWithValues: try store.matches(filterId: 100).map { ($0.profileId, $0.matchedAt) })
        #expect(
            matchedAt == [
                10: day[0], 11: day[0], 21: day[1], 20: day[4], 22: day[4], 23: day[4], 24: day[4],
            ])
        // Each new match notified once, by the digest of the run that recorded it.
        let counted = try store.notifications(filterId: 100).map {
            [$0.createdAt.iso8601] + $0.profileIds.map(String.init)
        }
        #expect(
            counted == [
                [day[0].iso8601, "10", "11"], [day[1].iso8601, "21"], [day[4].iso8601, "24", "20", "23", "22"],
            ])
        #expect(try store.matches(filterId: 100).allSatisfy { $0.notificationId != nil })
        #expect(
            try store.notifications(filterId: 101).map(\.profileIds) == [[10, 11], [20, 21], [22], [23], [24]])

        // Both shards' next runs: nothing left to consider.
        for half in [zero, one] {
            let next = try run(store, day[4].adding(days: 1), shard: half)
            #expect(next.counters.candidates == 0 && next.resumedRunId == nil, "\(half)")
        }
    }
}
