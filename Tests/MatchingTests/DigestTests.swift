import Chronology
import DeterministicRandom
import Foundation
import MatchingTestSupport
import Testing

@testable import Matching

/// Issue 13, "Digests users can trust", in memory: the due rule's tolerance, digests that show the filter as
/// it is now, suspended filters, mutual matches, and intervals across daylight saving changes.
@Suite struct DigestTests {
    static let weekly = NotifyInterval(days: 7)
    static let hourly = NotifyInterval(microseconds: 3_600_000_000)

    func at(_ text: String) throws -> Timestamp { try #require(Timestamp(iso8601: text)) }

    /// Runs at `now` with the store's clock moved there.
    @discardableResult
    func run(
        _ store: InMemoryStore, _ now: Timestamp, maxPerFilter: Int = 100,
        output: any RunOutputHandler = SilentRunOutput()
    ) throws -> RunSummary {
        store.setClock(now)
        return try World.run(store, now: now, maxPerFilter: maxPerFilter, output: output)
    }

    // MARK: Notify turned on

    /// runs.md: a filter with notify on and unnotified matches gets a digest when it is due. The matches a filter
    /// recorded while its owner had notify off are counted by its first digest after notify is turned on (those
    /// still candidates then), each once; turned off and on again, only what was recorded meanwhile.
    @Test func matchesRecordedWhileNotifyWasOffAreInTheFirstDigestAfterItIsTurnedOn() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([
            World.profile(1, gender: 1), World.profile(10, loginHoursAgo: 2), World.profile(11, loginHoursAgo: 1),
            World.profile(12, loginHoursAgo: 3),
        ])
        store.save([World.filter(100, owner: 1, notify: false)])
        let day1 = try run(store, World.day1)
        #expect(day1.counters.matchesWritten == 3 && day1.counters.notificationsWritten == 0)
        #expect(store.waitingPairs.isEmpty)
        // Still off on day 2: 13 signs up and is recorded; 12 hides.
        store.setClock(World.day2)
        store.save([World.profile(13, at: World.day2), World.profile(12, status: 2, loginHoursAgo: 3, at: World.day2)])
        let day2 = try run(store, World.day2)
        #expect(day2.counters.matchesWritten == 1 && day2.counters.notificationsWritten == 0)
        #expect(store.waitingPairs.isEmpty)

        // The owner turns notify on: the next run lists the four unnotified matches, and its digest counts the
        // three still candidates, latest login first; 12 (hidden) is left out.
        store.save([World.filter(100, owner: 1, notify: true)])
        let output = RecordingRunOutput()
        let day3 = try run(store, World.day1.adding(days: 2), output: output)
        #expect(day3.counters.notificationsWritten == 1)
        let listed = output.events.compactMap { event -> [Int]? in
            if case .unlistedMatchesListed(let filters, let matches) = event { return [filters, matches] }
            return nil
        }
        #expect(listed == [[1, 4]])
        let digest = try #require(try store.notifications(filterId: 100).first)
        #expect(digest.matchCount == 3)
        #expect(digest.profileIds == [13, 11, 10])
        // Nothing is listed or counted twice.
        let day4 = try run(store, World.day1.adding(days: 3))
        #expect(day4.counters.notificationsWritten == 0)
        #expect(try store.notifications(filterId: 100).count == 1)

        // Off again: 14 is recorded, not listed; on again: the next digest counts 14 alone.
        store.save([World.filter(100, owner: 1, notify: false)])
        let day5 = World.day1.adding(days: 4)
        store.setClock(day5)
        store.save([World.profile(14, at: day5)])
        #expect(try run(store, day5).counters.matchesWritten == 1)
        store.save([World.filter(100, owner: 1, notify: true)])
        let day6 = try run(store, World.day1.adding(days: 5))
        #expect(day6.counters.notificationsWritten == 1)
        #expect(try store.notifications(filterId: 100).map(\.profileIds) == [[13, 11, 10], [14]])
    }

    /// Review of session 37: a match recorded while notify was off, past the retention when notify is turned on,
    /// was forgotten and left out of the first digest, although no run had forgotten it while notify was off.
    /// runs.md: forgetting "never drops a match that waits for its digest". Still recorded, it is listed and
    /// counted; profile 10 changed meanwhile is that same match, not a new one (the run records none). A match a
    /// run forgot while notify was still off is gone (`aMatchForgottenByARunWhileNotifyWasOffIsNotListed`).
    @Test func aMatchRecordedWhileNotifyWasOffIsListedPastTheRetentionIfNoRunForgotIt() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10), World.profile(11, loginHoursAgo: 1)])
        store.save([World.filter(100, owner: 1, notify: false)])
        #expect(try run(store, World.day1).counters.matchesWritten == 2)
        store.save([World.filter(100, owner: 1, notify: true)])
        let later = World.day1.adding(days: 3)
        store.setClock(later)
        store.save([World.profile(10, residence: 14, at: later)])
        let output = RecordingRunOutput()
        let summary = try RunMatching(MatchingRepositories(store: store), output: output)
            .execute(.init(now: later, retentionDays: 2))
        #expect(summary.counters.matchesWritten == 0)
        #expect(summary.counters.notificationsWritten == 1)
        let digest = try #require(try store.notifications(filterId: 100).first)
        #expect(digest.matchCount == 2)
        #expect(digest.profileIds == [10, 11])
        // Notified and past the retention: forgotten by the same run's sweep.
        #expect(try store.matches(filterId: 100).isEmpty)
        let listed = output.events.compactMap { event -> [Int]? in
            if case .unlistedMatchesListed(let filters, let matches) = event { return [filters, matches] }
            return nil
        }
        #expect(listed == [[1, 2]])
    }

    /// A match recorded while notify was off and forgotten by a run while notify was still off (past the
    /// retention) is gone: the first digest after notify is turned on does not count it.
    @Test func aMatchForgottenByARunWhileNotifyWasOffIsNotListed() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10)])
        store.save([World.filter(100, owner: 1, notify: false)])
        #expect(try run(store, World.day1).counters.matchesWritten == 1)
        func runKeepingTwoDays(
            _ clock: Timestamp, output: any RunOutputHandler = SilentRunOutput()
        ) throws
            -> RunSummary
        {
            store.setClock(clock)
            return try RunMatching(MatchingRepositories(store: store), output: output)
                .execute(.init(now: clock, retentionDays: 2))
        }
        #expect(try runKeepingTwoDays(World.day1.adding(days: 3)).counters.matchesForgotten == 1)
        store.save([World.filter(100, owner: 1, notify: true)])
        let output = RecordingRunOutput()
        let summary = try runKeepingTwoDays(World.day1.adding(days: 4), output: output)
        #expect(summary.counters.notificationsWritten == 0)
        #expect(store.waitingPairs.isEmpty)
        #expect(try store.notifications(filterId: 100).isEmpty)
        // The note was read and cleared all the same (one filter, nothing to list).
        let listed = output.events.compactMap { event -> [Int]? in
            if case .unlistedMatchesListed(let filters, let matches) = event { return [filters, matches] }
            return nil
        }
        #expect(listed == [[1, 0]])
    }

    /// Review of session 37: the sweep is service-wide, and the listing was only of the running shard's filters,
    /// so a run of shard 0/2 forgot the matches filter 100 (owner 1, shard 1/2) recorded while its notify was
    /// off, after notify was turned on; shard 1/2's digest then had none. Every sweep now lists first.
    @Test func anotherShardsSweepKeepsANotifyingFiltersMatchesRecordedWhileNotifyWasOff() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(2, gender: 1), World.profile(10)])
        store.save([World.filter(100, owner: 1, notify: false), World.filter(200, owner: 2, notify: false)])
        #expect(try run(store, World.day1).counters.matchesWritten == 2)
        store.save([World.filter(100, owner: 1), World.filter(200, owner: 2)])
        let day4 = World.day1.adding(days: 3)
        store.setClock(day4)
        func runShard(_ shard: Shard) throws -> RunSummary {
            try RunMatching(MatchingRepositories(store: store))
                .execute(.init(now: day4, shard: shard, retentionDays: 2))
        }
        let shard0 = try runShard(try Shard(index: 0, count: 2))
        #expect(shard0.counters.notificationsWritten == 1)  // filter 200's, its own
        let shard1 = try runShard(try Shard(index: 1, count: 2))
        #expect(shard1.counters.notificationsWritten == 1)
        #expect(try store.notifications(filterId: 100).map(\.profileIds) == [[10]])
    }

    /// Review of session 37: a backfill without --notify of a filter whose notify was turned on found its match
    /// recorded while notify was off, past the retention, expired, and recorded it again, silent: never in a
    /// digest. A backfill lists such matches first too: the match waits, and the next run's digest counts it.
    @Test func aBackfillWithoutNotifyKeepsANotifyingFiltersMatchWaiting() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10)])
        store.save([World.filter(100, owner: 1, notify: false)])
        #expect(try run(store, World.day1).counters.matchesWritten == 1)
        store.save([World.filter(100, owner: 1)])
        let day4 = World.day1.adding(days: 3)
        store.setClock(day4)
        let backfill = try World.backfill(store, .init(filters: .ids([100]), now: day4, retentionDays: 2))
        #expect(backfill.counters.matchesWritten == 0)
        #expect(store.waitingPairs == [MatchPair(filterId: 100, profileId: 10)])
        let next = try RunMatching(MatchingRepositories(store: store)).execute(.init(now: day4, retentionDays: 2))
        #expect(next.counters.notificationsWritten == 1)
        #expect(try store.notifications(filterId: 100).map(\.profileIds) == [[10]])
    }

    // MARK: 1. The due rule's tolerance

    @Test func dailyDigestsAtFourOhSevenThenFourOhThreeAreBothSent() throws {
        let first = try at("2026-03-01T04:07:00+09:00")
        let second = try at("2026-03-02T04:03:00+09:00")
        let store = InMemoryStore(now: first)
        store.save([World.profile(1, gender: 1, at: first), World.profile(10, at: first)])
        store.save([World.filter(100, owner: 1)])
        #expect(try run(store, first).counters.notificationsWritten == 1)
        store.setClock(second)
        store.save([World.profile(11, at: second)])
        let next = try run(store, second)
        #expect(next.counters.notificationsWritten == 1)
        #expect(try store.notifications(filterId: 100).map(\.createdAt) == [first, second])
    }

    @Test func anHourlyFilterIsDueAfterFiftyFourMinutesNotFiftyThree() throws {
        let start = World.day1
        let store = InMemoryStore(now: start)
        store.save([World.profile(1, gender: 1), World.profile(10)])
        store.save([World.filter(100, owner: 1, every: Self.hourly)])
        _ = try run(store, start)
        let minute = Int64(60_000_000)
        store.setClock(start.adding(microseconds: minute))
        store.save([World.profile(11, at: start.adding(microseconds: minute))])
        let early = try run(store, start.adding(microseconds: 53 * minute))
        #expect(early.counters.matchesWritten == 1)
        #expect(early.counters.notificationsWritten == 0)
        let due = try run(store, start.adding(microseconds: 54 * minute))
        #expect(due.counters.notificationsWritten == 1)
        #expect(try store.notifications(filterId: 100).last?.profileIds == [11])
    }

    @Test func dueRuleToleranceIsATenthAtMostAnHour() throws {
        #expect(NotifyInterval(days: 1).dueTolerance == 3_600_000_000)
        #expect(Self.hourly.dueTolerance == 360_000_000)
        #expect(NotifyInterval(microseconds: 600_000_000).dueTolerance == 60_000_000)
        #expect(NotifyInterval(months: 1).dueTolerance == 3_600_000_000)
        #expect(NotifyInterval(days: -1).dueTolerance == 0)
        #expect(NotifyInterval(days: 2_147_483_647).dueTolerance == 3_600_000_000)
        let filter = World.filter(1, owner: 2, every: NotifyInterval(days: 1))
        let last = World.day1
        let clock = { (hours: Int64, minutes: Int64) in
            EvaluationClock(now: last.adding(microseconds: (hours * 60 + minutes) * 60_000_000))
        }
        #expect(NotificationPlanner.isDue(filter, lastNotifiedAt: nil, clock: clock(0, 0)))
        #expect(!NotificationPlanner.isDue(filter, lastNotifiedAt: last, clock: clock(22, 59)))
        #expect(NotificationPlanner.isDue(filter, lastNotifiedAt: last, clock: clock(23, 0)))
    }

    // MARK: 2. A digest shows the filter as it is now

    /// Owner 1 (a man) with a weekly filter; day 1 sends the first digest (profile 10).
    func weeklyStore(_ json: String) -> InMemoryStore {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10, residence: 13)])
        store.save([World.filter(100, owner: 1, json, every: Self.weekly)])
        return store
    }

    @Test func anEditedFiltersWaitingMatchesAreCheckedAgainstItsCurrentConditions() throws {
        let store = weeklyStore(#"{"gender": {"anyOf": [2]}, "residence": {"anyOf": [13]}}"#)
        _ = try run(store, World.day1)
        store.setClock(World.day2)
        store.save([World.profile(20, residence: 13, at: World.day2)])  // Tokyo: matches, waits a week
        _ = try run(store, World.day2)
        #expect(store.waitingPairs == [MatchPair(filterId: 100, profileId: 20)])
        // Day 8: the owner now searches Osaka; 21 lives in Osaka.
        let day8 = World.day1.adding(days: 7)
        store.setClock(day8)
        store.save([
            World.filter(
                100, owner: 1, #"{"gender": {"anyOf": [2]}, "residence": {"anyOf": [27]}}"#,
                every: Self.weekly)
        ])
        store.save([World.profile(21, residence: 27, at: day8)])
        let summary = try run(store, day8)
        #expect(summary.counters.notificationsWritten == 1)
        let digest = try #require(try store.notifications(filterId: 100).last)
        #expect(digest.profileIds == [21])
        #expect(digest.matchCount == 1)
        #expect(store.waitingPairs == [MatchPair(filterId: 100, profileId: 20)])
        // 20 moves to Osaka: it qualifies again and is shown in the next digest.
        let day15 = World.day1.adding(days: 14)
        store.setClock(day15)
        store.save([World.profile(20, residence: 27, at: day15)])
        _ = try run(store, day15)
        #expect(try store.notifications(filterId: 100).last?.profileIds == [20])
        #expect(store.waitingPairs.isEmpty)
    }

    /// Runs over `repositories` (the store's, some replaced by spies) at `now`, the store's clock moved there.
    @discardableResult
    func run(_ store: InMemoryStore, _ repositories: MatchingRepositories, _ now: Timestamp) throws -> RunSummary {
        store.setClock(now)
        return try RunMatching(repositories).execute(.init(now: now, maxPerFilter: 100))
    }

    /// The in-memory store, noting whose waiting lists a run reads.
    final class WaitingReads: ForwardingMatches, @unchecked Sendable {
        private let lock = NSLock()
        private var asked: Set<Int64> = []

        init(_ base: InMemoryStore) { super.init(base) }

        /// The filters whose waiting lists were read since the last call.
        func taken() -> Set<Int64> {
            lock.lock()
            defer { lock.unlock() }
            defer { asked = [] }
            return asked
        }

        override func waitingProfiles(filterIds: [Int64], forgetting: PassedOverCutoffs) throws -> WaitingProfiles {
            lock.lock()
            asked.formUnion(filterIds)
            lock.unlock()
            return try base.waitingProfiles(filterIds: filterIds, forgetting: forgetting)
        }
    }

    /// A run reads the waiting lists only of filters a digest may be due for: a weekly filter's list on its
    /// digest's day, not on the days between (where no unit could use it), and a daily filter's every day.
    @Test func aWeeklyFiltersWaitingListIsReadOnlyOnItsDigestsDay() throws {
        let store = weeklyStore(#"{"gender": {"anyOf": [2]}}"#)
        store.save([World.profile(2, gender: 1)])
        store.save([World.filter(200, owner: 2)])  // daily
        let reads = WaitingReads(store)
        var repositories = MatchingRepositories(store: store)
        repositories.matches = reads
        let run = { (now: Timestamp) in try self.run(store, repositories, now) }
        _ = try run(World.day1)
        #expect(reads.taken() == [100, 200])  // neither has had a digest yet
        store.setClock(World.day2)
        store.save([World.profile(20, at: World.day2)])
        #expect(try run(World.day2).counters.matchesWritten == 2)
        #expect(reads.taken() == [200])
        #expect(store.waitingPairs == [MatchPair(filterId: 100, profileId: 20)])
        let day3 = World.day1.adding(days: 2)
        _ = try run(day3)
        #expect(reads.taken() == [200])
        let day8 = World.day1.adding(days: 7)
        let summary = try run(day8)
        #expect(reads.taken() == [100, 200])
        #expect(summary.counters.notificationsWritten == 1)
        #expect(try store.notifications(filterId: 100).last?.profileIds == [20])
        #expect(store.waitingPairs.isEmpty)
    }

    /// The in-memory store's blocks, noting which profiles a run asks about.
    final class BlockReads: BlockRepository, @unchecked Sendable {
        let base: InMemoryStore
        private let lock = NSLock()
        private var asked: [[Int64]?] = []

        init(_ base: InMemoryStore) { self.base = base }

        /// The requests since the last call: the ids of each, sorted (nil: the whole table).
        func taken() -> [[Int64]?] {
            lock.lock()
            defer { lock.unlock() }
            defer { asked = [] }
            return asked
        }

        func blocks(involving ids: [Int64]?) throws -> BlockSet {
            lock.lock()
            asked.append(ids?.sorted())
            lock.unlock()
            return try base.blocks(involving: ids)
        }
    }

    /// A run reads the blocks of its candidates, and for its digests those of the waiting matches' profiles,
    /// never the whole table (which the app grows without bound); a block between an owner and a waiting
    /// profile that is no candidate that day still keeps the profile out of the digest.
    @Test func aRunReadsOnlyTheBlocksOfItsCandidatesAndWaitingProfiles() throws {
        let store = weeklyStore(#"{"gender": {"anyOf": [2]}}"#)
        let reads = BlockReads(store)
        var repositories = MatchingRepositories(store: store)
        repositories.blocks = reads
        let run = { (now: Timestamp) in try self.run(store, repositories, now) }
        store.block(1, 99)  // the owner once blocked someone who is never a candidate here
        _ = try run(World.day1)
        #expect(reads.taken() == [[1, 10]])
        store.setClock(World.day2)
        store.save([World.profile(20, at: World.day2), World.profile(21, at: World.day2)])
        _ = try run(World.day2)
        #expect(reads.taken() == [[20, 21]])
        #expect(
            store.waitingPairs == [MatchPair(filterId: 100, profileId: 20), MatchPair(filterId: 100, profileId: 21)])
        // Day 8, the weekly digest: 30 is new; 21 blocked the owner meanwhile, and neither 20 nor 21 changed.
        let day8 = World.day1.adding(days: 7)
        store.setClock(day8)
        store.save([World.profile(30, at: day8)])
        store.block(21, 1)
        let summary = try run(day8)
        #expect(reads.taken() == [[30], [20, 21]])
        #expect(summary.counters.notificationsWritten == 1)
        let digest = try #require(try store.notifications(filterId: 100).last)
        #expect(Set(digest.profileIds) == [20, 30])
        #expect(digest.matchCount == 2)
    }

    @Test func aProfileThatTurnedThirtyThreeIsNotShownByATwentyFiveToThirtyTwoFilter() throws {
        let store = weeklyStore(#"{"gender": {"anyOf": [2]}, "age": {"min": 25, "max": 32}}"#)
        store.save([World.profile(10, born: "1996-01-01")])
        _ = try run(store, World.day1)
        // Born 1993-03-05: 32 on day 2 (2026-03-02), 33 from 2026-03-05.
        store.setClock(World.day2)
        store.save([World.profile(20, born: "1993-03-05", at: World.day2)])
        #expect(try run(store, World.day2).counters.matchesWritten == 1)
        // Waiting since day 2, due a week after day 1's digest less an hour: not overdue before then.
        let waiting = try store.serviceStatus(retention: false).digests
        #expect(waiting.matches == 1 && waiting.oldestMatchedAt == World.day2)
        #expect(waiting.oldestDueSince == World.day1.adding(days: 7).adding(microseconds: -3_600_000_000))
        let day8 = World.day1.adding(days: 7)
        let summary = try run(store, day8)
        #expect(summary.counters.notificationsWritten == 0)
        #expect(summary.counters.digestsHeldBack == 1)
        #expect(try store.notifications(filterId: 100).count == 1)
        #expect(store.waitingPairs == [MatchPair(filterId: 100, profileId: 20)])
        // The held-back digest passed the match over: listed still (a later digest shows it if it qualifies
        // again), but no digest is waiting, and retention forgets it like any passed-over match.
        let status = try store.serviceStatus(retention: false)
        #expect(status.digests.matches == 0 && status.digests.notNotifiable == 1)
        let day10 = World.day1.adding(days: 9)
        store.setClock(day10)
        let later = try RunMatching(MatchingRepositories(store: store)).execute(.init(now: day10, retentionDays: 7))
        // Forgotten with profile 10's match, notified on day 1. Passed over and recorded before the cutoff, it is
        // forgotten at this clock before the sweep deletes it: no digest reads it again (so none is held back),
        // as in a layout where another shard's sweep ran first.
        #expect(later.counters.digestsHeldBack == 0 && later.counters.matchesForgotten == 2)
        #expect(store.waitingPairs.isEmpty && World.pairs(store).isEmpty)
    }

    @Test func loggedInWithinThreeDaysNoLongerHoldsAWeekLater() throws {
        let store = weeklyStore(#"{"gender": {"anyOf": [2]}, "last_login": {"withinDays": 3}}"#)
        _ = try run(store, World.day1)
        store.setClock(World.day2)
        store.save([World.profile(20, at: World.day2), World.profile(21, at: World.day2)])
        #expect(try run(store, World.day2).counters.matchesWritten == 2)
        // Day 8: 21 logged in yesterday (a login alone is no change for matching), 20 last a week ago.
        let day8 = World.day1.adding(days: 7)
        store.setClock(day8)
        store.save([World.profile(21, loginHoursAgo: 24, at: day8)])
        let summary = try run(store, day8)
        #expect(summary.counters.notificationsWritten == 1)
        #expect(summary.counters.digestsHeldBack == 0)
        #expect(try store.notifications(filterId: 100).last?.profileIds == [21])
        #expect(store.waitingPairs == [MatchPair(filterId: 100, profileId: 20)])
    }

    /// Blocks `blocks` when the run starts writing: after it read profiles and blocks.
    final class BlockWhenWriting: RunOutputHandler, @unchecked Sendable {
        let action: @Sendable () -> Void
        init(_ action: @escaping @Sendable () -> Void) { self.action = action }
        func handle(_ event: RunEvent) {
            if case .phaseStarted(.write) = event { action() }
        }
    }

    @Test func aProfileBlockedBetweenReadAndWriteIsNeverShown() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10), World.profile(11, loginHoursAgo: 2)])
        store.save([World.filter(100, owner: 1)])
        let summary = try run(store, World.day1, output: BlockWhenWriting { store.block(10, 1) })
        #expect(summary.counters.matchesWritten == 2)
        let digest = try #require(store.allNotifications.first)
        #expect(digest.profileIds == [11])
        #expect(store.waitingPairs == [MatchPair(filterId: 100, profileId: 10)])
        // A waiting match hidden between read and write is not shown either.
        store.setClock(World.day2)
        store.save([World.profile(12, at: World.day2)])
        let store2 = store
        _ = try run(
            store, World.day2,
            output: BlockWhenWriting {
                store2.save([World.profile(12, status: Profile.Status.hidden, at: World.day2)])
            })
        #expect(try store.notifications(filterId: 100).count == 1)
        #expect(
            store.waitingPairs == [MatchPair(filterId: 100, profileId: 10), MatchPair(filterId: 100, profileId: 12)])
    }

    // MARK: 3. Suspended filters

    @Test func aLapsedOwnersCommunitiesOnlyFilterIsSuspendedNotEmptied() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([
            World.profile(1, gender: 1, plan: Profile.Plan.free), World.profile(10, communities: [3]),
            World.profile(11, communities: [4]),
        ])
        store.save([World.filter(100, owner: 1, #"{"communities": {"anyOf": [3]}}"#)])
        let lapsed = try run(store, World.day1)
        #expect(lapsed.counters.filtersSuspended == 1)
        #expect(lapsed.counters.filtersEvaluated == 0)
        #expect(lapsed.counters.matchesWritten == 0)
        #expect(store.allNotifications.isEmpty)
        let explained = try ExplainMatch(MatchingRepositories(store: store))
            .execute(.init(filterId: 100, profileId: 11, now: World.day1))
        #expect(!explained.explanation.matches)
        #expect(explained.explanation.eligibility.first { $0.name == "filter not suspended" }?.passed == false)
        // The owner pays: the filter applies again (to the profiles that change from now on).
        store.setClock(World.day2)
        store.save([World.profile(1, gender: 1, plan: Profile.Plan.paid, at: World.day2)])
        store.save([
            World.profile(12, communities: [3], at: World.day2), World.profile(13, communities: [5], at: World.day2),
        ])
        let paid = try run(store, World.day2)
        #expect(paid.counters.filtersSuspended == 0)
        #expect(World.pairs(store) == [MatchPair(filterId: 100, profileId: 12)])
        #expect(try store.notifications(filterId: 100).first?.profileIds == [12])
    }

    /// filter-language.md: a suspended filter "sends no digest until the owner pays again". A match waiting for the
    /// weekly digest when the plan lapses is neither sent nor forgotten on the digest's day; once the owner pays,
    /// the next run sends it.
    @Test func aSuspendedFiltersWaitingMatchIsSentOnlyOnceTheOwnerPaysAgain() throws {
        let store = InMemoryStore(now: World.day1)
        let weekly = NotifyInterval(months: 0, days: 7, microseconds: 0)
        store.save([World.profile(1, gender: 1, plan: Profile.Plan.paid), World.profile(10, communities: [3])])
        store.save([World.filter(100, owner: 1, #"{"communities": {"anyOf": [3]}}"#, every: weekly)])
        _ = try run(store, World.day1)
        #expect(try store.notifications(filterId: 100).map(\.profileIds) == [[10]])
        // Day 2: a new match waits for the weekly digest; day 3: the plan lapses.
        store.save([World.profile(12, communities: [3], at: World.day2)])
        _ = try run(store, World.day2)
        #expect(store.waitingPairs == [MatchPair(filterId: 100, profileId: 12)])
        store.save([World.profile(1, gender: 1, plan: Profile.Plan.free, at: World.day1.adding(days: 2))])
        // Day 8, the digest's day: suspended, so nothing is sent and the match keeps waiting.
        let due = try run(store, World.day1.adding(days: 7))
        #expect(due.counters.filtersSuspended == 1)
        #expect(due.counters.notificationsWritten == 0)
        #expect(try store.notifications(filterId: 100).count == 1)
        #expect(store.waitingPairs == [MatchPair(filterId: 100, profileId: 12)])
        // Day 9: the owner pays again; the run sends the waiting match.
        store.save([World.profile(1, gender: 1, plan: Profile.Plan.paid, at: World.day1.adding(days: 8))])
        let paid = try run(store, World.day1.adding(days: 8))
        #expect(paid.counters.filtersSuspended == 0)
        #expect(try store.notifications(filterId: 100).map(\.profileIds) == [[10], [12]])
        #expect(store.waitingPairs.isEmpty)
    }

    // MARK: 4. Mutual matches

    @Test func aPairIsMutualWhenTheMatchedProfilesFilterWantsTheOwner() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1, residence: 13), World.profile(10), World.profile(11)])
        store.save([
            World.filter(100, owner: 1),
            World.filter(200, owner: 10, #"{"gender": {"anyOf": [1]}, "residence": {"anyOf": [13]}}"#),
            World.filter(201, owner: 11, #"{"gender": {"anyOf": [1]}, "residence": {"anyOf": [27]}}"#),
        ])
        let summary = try run(store, World.day1)
        // (100, 10) and, the other way round, (200, 1).
        #expect(summary.counters.matchesMutual == 2)
        #expect(try store.matches(filterId: 200).map(\.mutual) == [true])
        let flags = Dictionary(uniqueKeysWithValues: try store.matches(filterId: 100).map { ($0.profileId, $0.mutual) })
        #expect(flags == [10: true, 11: false])
        #expect(try store.notifications(filterId: 100).first?.mutualCount == 1)
        let explain = ExplainMatch(MatchingRepositories(store: store))
        let yes = try explain.execute(.init(filterId: 100, profileId: 10, now: World.day1))
        #expect(yes.mutualVia == 200)
        let rendered = ReportRenderer.render(Report.explanation(yes), as: .text)
        #expect(rendered.contains("yes, via filter 200"))
        #expect(try explain.execute(.init(filterId: 100, profileId: 11, now: World.day1)).mutualVia == nil)
        // A block either way, or the other side's filter deleted, and it is not mutual (as found when notified).
        store.block(1, 10)
        #expect(try explain.execute(.init(filterId: 100, profileId: 10, now: World.day1)).mutualVia == nil)
    }

    @Test func theMutualFlagMatchesABruteForceCheckOnASeededWorld() throws {
        var world = SeededWorld(seed: 2026)
        let store = InMemoryStore(now: World.day1)
        let profiles = (1...5_000).map { world.profile(Int64($0), at: World.day1) }
        store.save(profiles)
        var filters: [SavedFilter] = []
        for index in 1...2_000 {
            let owner = Int64(1 + (index * 7) % 5_000)
            filters.append(world.filter(Int64(100_000 + index), owner: owner))
        }
        store.save(filters)
        for _ in 0..<400 { store.block(Int64(1 + world.next(5_000)), Int64(1 + world.next(5_000))) }
        // At most 20 new pairs a filter and run, so that the debug build checks every pair in seconds.
        let summary = try run(store, World.day1, maxPerFilter: 20)
        #expect(summary.counters.matchesWritten > 20_000)
        let day1 = store.allMatches
        let expected1 = try Self.bruteForceMutual(
            store, pairs: day1.map(\.pair), clock: EvaluationClock(now: World.day1))
        let found1 = Set(day1.filter(\.mutual).map(\.pair))
        #expect(found1 == expected1)
        #expect(summary.counters.matchesMutual == expected1.count)
        #expect(expected1.count > 500, "only \(expected1.count) mutual pairs")
        Self.expectMutualCounts(store, day1)

        // Day 2: some profiles change, some reverse filters are deleted or edited; new pairs and digests
        // carry the latest finding, the others keep theirs.
        store.setClock(World.day2)
        var changed: [Profile] = []
        for _ in 1...300 {
            let id = Int64(world.next(5_000) + 1)
            changed.append(world.profile(id, at: World.day2))
        }
        store.save(changed)
        var edited: [SavedFilter] = []
        for index in 1...150 {
            let old = filters[world.next(filters.count)]
            edited.append(
                index % 2 == 0
                    ? World.filter(old.id, owner: old.ownerId, old.conditionsJSON, deleted: true)
                    : world.filter(old.id, owner: old.ownerId))
        }
        store.save(edited)
        let before = Dictionary(uniqueKeysWithValues: day1.map { ($0.pair, $0) })
        _ = try run(store, World.day2, maxPerFilter: 20)
        let day2Notes = Set(store.allNotifications.filter { $0.createdAt == World.day2 }.map(\.id))
        let day2 = store.allMatches
        let touched = day2.filter { (m: FilterMatch) -> Bool in
            if m.matchedAt == World.day2 { return true }
            guard let id = m.notificationId, day2Notes.contains(id) else { return false }
            return before[m.pair]?.notificationId == nil
        }
        #expect(touched.count > 100)
        let expected2 = try Self.bruteForceMutual(
            store, pairs: touched.map(\.pair), clock: EvaluationClock(now: World.day2))
        #expect(Set(touched.filter(\.mutual).map(\.pair)) == expected2)
        let touchedPairs = Set(touched.map(\.pair))
        let kept = day2.filter { !touchedPairs.contains($0.pair) }
        let changedFinding = kept.filter { match in match.mutual != (before[match.pair].map(\.mutual) ?? false) }
        #expect(changedFinding.isEmpty, "untouched pairs keep their finding")
        Self.expectMutualCounts(store, day2)
    }

    /// Every digest's `mutual_count` is the number of its counted matches flagged mutual.
    static func expectMutualCounts(_ store: InMemoryStore, _ matches: [FilterMatch]) {
        var mutualBy: [Int64: Int] = [:]
        for match in matches where match.mutual {
            if let id = match.notificationId { mutualBy[id, default: 0] += 1 }
        }
        let wrong = store.allNotifications.filter { $0.mutualCount != mutualBy[$0.id, default: 0] }
        #expect(wrong.isEmpty, "mutual_count of \(wrong.prefix(5).map(\.id))")
    }

    /// The definition of runs.md, pair by pair, with the reference evaluator.
    static func bruteForceMutual(
        _ store: InMemoryStore, pairs: [MatchPair], clock: EvaluationClock
    ) throws -> Set<MatchPair> {
        let blocks = try store.blocks(involving: nil)
        let everyProfile = try store.profiles(.all)
        var profiles: [Int64: Profile] = [:]
        for row in 0..<everyProfile.count { profiles[everyProfile.ids[row]] = everyProfile.profile(at: row) }
        let filters = try store.filters(.all, shard: .all, afterId: nil)
        let filterById = Dictionary(uniqueKeysWithValues: filters.map { ($0.id, $0) })
        var byOwner: [Int64: [(SavedFilter, Result<FilterConditions, FilterValidationError>)]] = [:]
        for filter in filters {
            let conditions: Result<FilterConditions, FilterValidationError>
            do { conditions = .success(try filter.decodedConditions()) } catch { conditions = .failure(error) }
            byOwner[filter.ownerId, default: []].append((filter, conditions))
        }
        var mutual = Set<MatchPair>()
        for pair in pairs {
            guard let filter = filterById[pair.filterId], let owner = profiles[filter.ownerId],
                let matched = profiles[pair.profileId]
            else { continue }
            let record = FilterOwner(id: matched.id, status: matched.status, plan: matched.plan)
            if (byOwner[pair.profileId] ?? []).contains(where: { theirs, conditions in
                ReferenceEvaluator.matches(
                    owner, theirs, conditions: conditions, owner: record, blocks: blocks, clock: clock)
            }) {
                mutual.insert(pair)
            }
        }
        return mutual
    }

    // MARK: 5. Time zones

    @Test func dayIntervalsAcrossDaylightSavingChangesAddLikePostgres() throws {
        let berlin = try #require(TimeZone(identifier: "Europe/Berlin"))
        let newYork = try #require(TimeZone(identifier: "America/New_York"))
        let day = NotifyInterval(days: 1)
        // Expected values: PostgreSQL 15 with `SET TIME ZONE` to the zone, `timestamptz '...' + interval '...'`.
        let cases: [(TimeZone, String, NotifyInterval, String)] = [
            (berlin, "2026-03-28T01:30:00+01:00", day, "2026-03-29T00:30:00Z"),
            (berlin, "2026-03-28T02:30:00+01:00", day, "2026-03-29T01:30:00Z"),  // 02:30 does not exist: 03:30 CEST
            (
                berlin, "2026-03-28T02:30:00+01:00", NotifyInterval(days: 1, microseconds: 3_600_000_000),
                "2026-03-29T02:30:00Z"
            ),
            (berlin, "2026-02-28T02:30:00+01:00", NotifyInterval(months: 1), "2026-03-28T01:30:00Z"),
            (berlin, "2026-10-24T02:30:00+02:00", day, "2026-10-25T01:30:00Z"),  // 02:30 twice: the later (CET)
            (berlin, "2026-10-24T04:00:00+02:00", day, "2026-10-25T03:00:00Z"),
            (berlin, "2026-10-26T02:30:00+01:00", NotifyInterval(days: -1), "2026-10-25T01:30:00Z"),
            (
                berlin, "2026-03-28T04:00:00+01:00", NotifyInterval(microseconds: 24 * 3_600_000_000),
                "2026-03-29T03:00:00Z"
            ),
            (newYork, "2026-03-07T02:30:00-05:00", day, "2026-03-08T07:30:00Z"),  // 02:30 does not exist: 03:30 EDT
            (newYork, "2026-03-07T04:07:00-05:00", day, "2026-03-08T08:07:00Z"),
            (newYork, "2026-10-31T01:30:00-04:00", day, "2026-11-01T06:30:00Z"),  // 01:30 twice: the later (EST)
            (newYork, "2026-10-29T01:30:00-04:00", NotifyInterval(days: 7), "2026-11-05T06:30:00Z"),
            (newYork, "2026-10-01T01:30:00-04:00", NotifyInterval(months: 1, days: 1), "2026-11-02T06:30:00Z"),
        ]
        for (zone, start, interval, expected) in cases {
            let result = interval.added(to: try at(start), in: zone)
            #expect(result == (try at(expected)), "\(zone.identifier) \(start) + \(interval): \(result.iso8601)")
        }
    }

    @Test func aRunInAnotherZoneFailsUnlessTheChangeIsAskedFor() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10)])
        store.save([World.filter(100, owner: 1)])
        _ = try run(store, World.day1)
        let berlin = try #require(TimeZone(identifier: "Europe/Berlin"))
        let matching = RunMatching(MatchingRepositories(store: store))
        #expect(throws: TimeZoneChanged.self) {
            try matching.execute(.init(now: World.day2, timeZone: berlin))
        }
        let changed = try matching.execute(.init(now: World.day2, timeZone: berlin, timeZoneChange: true))
        #expect(changed.runId != nil)
        // From now on the shard runs in Berlin: Tokyo is the change.
        #expect(throws: TimeZoneChanged.self) {
            try matching.execute(.init(now: World.day2.adding(days: 1)))
        }
    }
}

/// A seeded world of varied profiles and filters that often want each other (mutual matches).
struct SeededWorld {
    private var random: SplitMix64

    init(seed: UInt64) { random = SplitMix64(seed: seed) }

    mutating func next(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }

    mutating func profile(_ id: Int64, at clock: Timestamp) -> Profile {
        let born = clock.calendarDate(in: .tokyo).adding(days: -((20 + next(25)) * 365 + next(365)))
        return Profile.make(
            id: id, status: next(25) == 0 ? Profile.Status.hidden : Profile.Status.active,
            plan: Int16(next(3) == 0 ? 1 : 0),
            lastLoginAt: clock.adding(microseconds: -Int64(next(20 * 24)) * 3_600_000_000),
            createdAt: clock.adding(days: -100),
            [
                "gender": .code(Int16(1 + next(2))),
                "age": .date(next(20) == 0 ? nil : born),
                "residence": .code(next(3) == 0 ? 13 : Int16(1 + next(47))),
                "smoking": .code(Int16(next(6))),
                "communities": .codes(next(3) == 0 ? [Int32(1 + next(4))] : []),
            ])
    }

    mutating func filter(_ id: Int64, owner: Int64) -> SavedFilter {
        var parts = ["\"gender\": {\"anyOf\": [\(1 + next(2))]}"]
        let low = 20 + next(15)
        if next(2) == 0 { parts.append("\"age\": {\"min\": \(low), \"max\": \(low + 5 + next(15))}") }
        if next(3) == 0 { parts.append("\"residence\": {\"anyOf\": [13, \(1 + next(47))]}") }
        if next(5) == 0 { parts.append("\"smoking\": {\"anyOf\": [0, 1, 2]}") }
        if next(6) == 0 { parts.append("\"communities\": {\"anyOf\": [\(1 + next(4))]}") }
        if next(6) == 0 { parts.append("\"last_login\": {\"withinDays\": \(1 + next(10))}") }
        let json = next(40) == 0 ? "{\"age\": {\"min\": 40, \"max\": 30}}" : "{" + parts.joined(separator: ", ") + "}"
        return World.filter(id, owner: owner, json, every: NotifyInterval(days: Int32(1 + next(2) * 6)))
    }
}
