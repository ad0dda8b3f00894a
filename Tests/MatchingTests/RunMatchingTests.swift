import Chronology
import Foundation
import MatchingTestSupport
import Testing

@testable import Matching

@Suite struct RunMatchingTests {
    /// Owner 1 (a man) searches women in Tokyo; profiles 10... are candidates.
    func seeded() -> InMemoryStore {
        let store = InMemoryStore(now: World.day1)
        store.save([
            World.profile(1, gender: 1),
            World.profile(10, loginHoursAgo: 5),
            World.profile(11, loginHoursAgo: 1),
            World.profile(12, loginHoursAgo: 1),
            World.profile(13, residence: 27),  // Osaka: no match
            World.profile(14, status: 2),  // hidden: not a candidate
            World.profile(15, gender: 1),  // a man: no match
        ])
        store.save([World.filter(100, owner: 1, #"{"gender": {"anyOf": [2]}, "residence": {"anyOf": [13]}}"#)])
        return store
    }

    /// runs.md: `match_count` = the unnotified matches, `profile_ids` = up to 10 of them in the same order (the
    /// latest `last_login_at` first, then the smallest id). Expected values written out, not derived.
    @Test func aDigestCountsEveryMatchAndShowsTheTenLatestLogins() throws {
        let store = InMemoryStore(now: World.day1)
        // 15 women: ids 20...34, logged in 1...15 hours ago in a shuffled order; 26 and 27 at the same hour.
        let hoursAgo: [Int64: Int] = [
            20: 9, 21: 3, 22: 14, 23: 1, 24: 11, 25: 6, 26: 2, 27: 2, 28: 15, 29: 8, 30: 4, 31: 13, 32: 5, 33: 12,
            34: 7,
        ]
        store.save(
            [World.profile(1, gender: 1)]
                + hoursAgo.keys.sorted().map { World.profile($0, loginHoursAgo: hoursAgo[$0]!) })
        store.save([World.filter(100, owner: 1)])
        let summary = try World.run(store)
        #expect(summary.counters.matchesWritten == 15)
        let note = try #require(store.allNotifications.first)
        #expect(store.allNotifications.count == 1)
        #expect(note.matchCount == 15)
        #expect(note.profileIds == [23, 26, 27, 21, 30, 32, 25, 34, 29, 20])
        #expect(store.allMatches.allSatisfy { $0.notificationId == note.id }, "all 15 are notified, 10 shown")
    }

    @Test func firstRunConsidersEveryProfileAndWritesCappedMatchesAndOneNotification() throws {
        let store = seeded()
        let summary = try World.run(store, maxPerFilter: 100)
        #expect(World.pairs(store).map(\.profileId) == [10, 11, 12])
        #expect(summary.counters.candidates == 7)
        #expect(summary.counters.matchesWritten == 3)
        #expect(summary.counters.notificationsWritten == 1)
        let note = try #require(store.allNotifications.first)
        #expect(note.recipientId == 1)
        #expect(note.matchCount == 3)
        // Latest login first, ties by smallest id.
        #expect(note.profileIds == [11, 12, 10])
        #expect(note.createdAt == World.day1)
        #expect(store.allMatches.allSatisfy { $0.notificationId == note.id && $0.matchedAt == World.day1 })
    }

    @Test func aDryRunTakesNoLockSoTheRealRunBesideItGoesOn() throws {
        let store = seeded()
        // The timer's real run holds the shard's lock; a dry run started beside it is not refused.
        let held = try #require(try store.tryLock(kind: .run, shard: .all))
        let dry = try World.run(store, dryRun: true)
        #expect(dry.dryRun && dry.matchesFound == 3)
        #expect(store.allMatches.isEmpty)
        // And while a dry run works, the lock stays free for the real run: taken from inside the dry run's
        // evaluation (its output handler), it is granted.
        held.release()
        let probe = LockProbe(store)
        _ = try World.run(store, dryRun: true, output: probe)
        #expect(probe.wasGranted, "a dry run leaves the shard's lock free")
        let real = try World.run(store)
        #expect(real.counters.matchesWritten == 3)
    }

    /// Takes (and releases) the shard's run lock when the evaluate phase starts, and says whether it was granted.
    final class LockProbe: RunOutputHandler, @unchecked Sendable {
        let store: InMemoryStore
        private let lock = NSLock()
        private var granted = false
        init(_ store: InMemoryStore) { self.store = store }
        var wasGranted: Bool { lock.withLock { granted } }
        func handle(_ event: RunEvent) {
            guard case .phaseStarted(.evaluate) = event, let held = try? store.tryLock(kind: .run, shard: .all)
            else { return }
            held.release()
            lock.withLock { granted = true }
        }
    }

    @Test func aRunInAnotherTimeZoneThanTheShardsIsRefusedUnlessTheOperatorSaysSo() throws {
        let store = seeded()
        _ = try World.run(store)
        let berlin = try #require(TimeZone(identifier: "Europe/Berlin"))
        let refused = #expect(throws: TimeZoneChanged.self) {
            try RunMatching(MatchingRepositories(store: store))
                .execute(.init(now: World.day2, timeZone: berlin))
        }
        #expect(refused?.failureKind == .configuration)
        #expect(refused?.description.contains("--time-zone-change") == true)
        _ = try RunMatching(MatchingRepositories(store: store))
            .execute(.init(now: World.day2, timeZone: berlin, timeZoneChange: true))
        // The shard now runs in Berlin: Tokyo would need the flag in turn.
        #expect(throws: TimeZoneChanged.self) {
            try RunMatching(MatchingRepositories(store: store))
                .execute(.init(now: World.day2.adding(days: 1)))
        }
    }

    /// Review of session 23: the zone check looked at every entry overlapping the shard, also an old layout's
    /// kept only for another shard of the new layout that has not run yet; a shard whose owners all take their
    /// changes from its own entry was refused for a zone it no longer uses.
    @Test func theZoneCheckLooksOnlyAtTheEntriesTheShardUses() throws {
        let store = manyFilters()
        let utc = try #require(TimeZone(identifier: "UTC"))
        for k in 0..<4 { _ = try World.run(store, shard: try Shard(index: k, count: 4)) }
        // Eight shards in UTC from day 2, on purpose; 5/8 does not run, so 1/4's Tokyo entry stays for its owners.
        for k in [0, 1, 2, 3, 4, 6, 7] {
            _ = try RunMatching(MatchingRepositories(store: store)).execute(
                .init(now: World.day2, timeZone: utc, shard: try Shard(index: k, count: 8), timeZoneChange: true))
        }
        let day3 = World.day2.adding(days: 1)
        let oneOfEight = try RunMatching(MatchingRepositories(store: store)).execute(
            .init(now: day3, timeZone: utc, shard: try Shard(index: 1, count: 8)))
        #expect(oneOfEight.runId != nil)
        // 5/8 itself still takes its owners' changes from 1/4's Tokyo entry: refused in UTC without the flag.
        #expect(throws: TimeZoneChanged.self) {
            try RunMatching(MatchingRepositories(store: store)).execute(
                .init(now: day3, timeZone: utc, shard: try Shard(index: 5, count: 8)))
        }
    }

    /// Review of session 34: a zone changed one shard at a time left unsharded runs and backfills refused with
    /// advice naming the refused run's own shard and one zone, which, followed, gave the opposite refusal; and a
    /// backfill of one filter was refused for the zone of another shard of the layout.
    @Test func aZoneChangedOneShardAtATimeIsNamedAndABackfillFollowsItsOwnersZone() throws {
        let store = manyFilters()
        let utc = try #require(TimeZone(identifier: "UTC"))
        for k in 0..<4 { _ = try World.run(store, shard: try Shard(index: k, count: 4)) }
        _ = try RunMatching(MatchingRepositories(store: store)).execute(
            .init(now: World.day2, timeZone: utc, shard: try Shard(index: 1, count: 4), timeZoneChange: true))
        let refused = #expect(throws: TimeZoneChanged.self) {
            try RunMatching(MatchingRepositories(store: store)).execute(.init(now: World.day2.adding(days: 1)))
        }
        let text = refused?.description ?? ""
        #expect(text.contains("in different time zones") && text.contains("Asia/Tokyo (0/4, 2/4, 3/4)"), "\(text)")
        #expect(text.contains("(1/4)") && text.contains("--time-zone-change"), "\(text)")
        // Filter 102's owner (3) is in shard 3/4, still in Tokyo: its backfill runs in Tokyo.
        let tokyo = try Matching.Backfill(MatchingRepositories(store: store))
            .execute(.init(filters: .ids([102]), now: World.day2))
        #expect(tokyo.runId != nil)
        // Filter 100's owner (1) is in 1/4, in UTC since day 2: refused in Tokyo, naming that shard.
        let other = #expect(throws: TimeZoneChanged.self) {
            try Matching.Backfill(MatchingRepositories(store: store)).execute(
                .init(filters: .ids([100]), now: World.day2))
        }
        #expect(other?.description.hasPrefix("shard 1/4 ran in time zone") == true, "\(other?.description ?? "")")
    }

    /// From more shards than a run reads windows for (64) straight to one: refused, saying to go through a layout
    /// in between, and abandoning nothing; through 10 shards it works, and each change is seen once.
    @Test func fromHundredShardsToOneGoesThroughALayoutInBetween() throws {
        let store = manyFilters()
        for k in 0..<100 { _ = try World.run(store, shard: try Shard(index: k, count: 100)) }
        store.save([World.profile(41, loginHoursAgo: 1, at: World.day2)])
        let runsBefore = store.allRuns.count
        let refused = #expect(throws: TooManyChangeWindows.self) {
            try RunMatching(MatchingRepositories(store: store)).execute(.init(now: World.day2))
        }
        #expect(refused?.description.contains("layout in between") == true)
        #expect(store.allRuns.count == runsBefore && store.allRuns.allSatisfy { $0.status == .succeeded })
        var found = 0
        for k in 0..<10 {
            found += try World.run(store, now: World.day2, shard: try Shard(index: k, count: 10)).counters
                .matchesWritten
        }
        // Profile 41's matches, once: row for row what two unsharded runs record (the same world, the same
        // change, no shards at all).
        let reference = manyFilters()
        _ = try World.run(reference)
        reference.save([World.profile(41, loginHoursAgo: 1, at: World.day2)])
        let expected = try World.run(reference, now: World.day2).counters.matchesWritten
        #expect(found > 0 && found == expected)
        #expect(World.rows(store).matches.sorted() == World.rows(reference).matches.sorted())
        #expect(World.rows(store).notifications == World.rows(reference).notifications)
        let unsharded = try World.run(store, now: World.day2.adding(days: 1))
        #expect(unsharded.counters.candidates == 0 && unsharded.counters.matchesWritten == 0)
    }

    /// A backfill and `explain` are held to the zone the runs use. Ages and `notify_every` follow the zone's date,
    /// so a backfill in another zone recorded (and with `--notify`, notified) pairs a run at the same clock would
    /// not, and `explain` answered for Tokyo whatever the runs used.
    @Test func aBackfillAndExplainFollowTheZoneTheRunsUse() throws {
        let utc = try #require(TimeZone(identifier: "UTC"))
        let store = InMemoryStore(now: World.day1)
        // At 20:00 UTC it is already the next day in Tokyo: the woman born on that next day is 30 there, 29 in UTC.
        let clock = try #require(Timestamp(iso8601: "2026-03-01T20:00:00Z"))
        store.save([World.profile(1, gender: 1), World.profile(10, born: "1996-03-02")])
        store.save([World.filter(100, owner: 1, #"{"gender": {"anyOf": [2]}, "age": {"min": 30}}"#)])
        store.setClock(clock)
        let run = try RunMatching(MatchingRepositories(store: store)).execute(.init(now: clock, timeZone: utc))
        #expect(run.counters.matchesWritten == 0)

        let refused = #expect(throws: TimeZoneChanged.self) {
            try Matching.Backfill(MatchingRepositories(store: store)).execute(.init(now: clock))
        }
        #expect(refused?.description.contains("this backfill of shard 0/1 asks for Asia/Tokyo") == true)
        let inUTC = try Matching.Backfill(MatchingRepositories(store: store)).execute(.init(now: clock, timeZone: utc))
        #expect(inUTC.counters.matchesWritten == 0)
        let onPurpose = try Matching.Backfill(MatchingRepositories(store: store))
            .execute(.init(now: clock, timeZoneChange: true))
        #expect(onPurpose.counters.matchesWritten == 1)

        let explained = try ExplainMatch(MatchingRepositories(store: store))
            .execute(.init(filterId: 100, profileId: 10, now: clock))
        #expect(explained.clock.timeZone == utc && !explained.explanation.matches)
        let inTokyo = try ExplainMatch(MatchingRepositories(store: store))
            .execute(.init(filterId: 100, profileId: 10, now: clock, timeZone: .tokyo))
        #expect(inTokyo.explanation.matches)
    }

    @Test func capKeepsLatestLoginThenSmallestId() throws {
        let store = seeded()
        _ = try World.run(store, maxPerFilter: 2)
        #expect(World.pairs(store).map(\.profileId) == [11, 12])
    }

    @Test func rerunAddsNothing() throws {
        let store = seeded()
        _ = try World.run(store)
        let before = World.rows(store)
        let again = try World.run(store)
        #expect(again.counters.matchesWritten == 0)
        #expect(again.counters.notificationsWritten == 0)
        #expect(again.counters.candidates == 0)
        let after = World.rows(store)
        #expect(after.matches == before.matches)
        #expect(after.notifications == before.notifications)
    }

    @Test func secondRunConsidersOnlyChangedProfilesAndNewFiltersWaitForBackfill() throws {
        let store = seeded()
        _ = try World.run(store)
        // Day 2: 13 moves to Tokyo; a new filter would match 10-12 but they did not change.
        store.setClock(World.day2)
        store.save([World.profile(13, residence: 13, at: World.day2)])
        store.save([World.filter(101, owner: 15, #"{"gender": {"anyOf": [2]}}"#)])
        let summary = try World.run(store, now: World.day2)
        #expect(summary.counters.candidates == 1)
        #expect(
            Set(World.pairs(store))
                == Set([
                    MatchPair(filterId: 100, profileId: 10), MatchPair(filterId: 100, profileId: 11),
                    MatchPair(filterId: 100, profileId: 12), MatchPair(filterId: 100, profileId: 13),
                    MatchPair(filterId: 101, profileId: 13),
                ]))
        // A day has passed since filter 100's notification: a new digest with the one new match.
        let notes = try store.notifications(filterId: 100)
        #expect(notes.count == 2)
        #expect(notes.last?.matchCount == 1)
        #expect(notes.last?.profileIds == [13])
    }

    @Test func notifyEveryHoldsMatchesUntilDue() throws {
        let store = seeded()
        _ = try World.run(store)
        let halfDay = World.day1.adding(microseconds: 12 * 3_600_000_000)
        store.setClock(halfDay)
        store.save([World.profile(13, residence: 13, at: halfDay)])
        let early = try World.run(store, now: halfDay)
        #expect(early.counters.matchesWritten == 1)
        #expect(early.counters.notificationsWritten == 0)
        #expect(try store.matches(filterId: 100).first { $0.profileId == 13 }?.notificationId == nil)
        // Exactly one day after the last notification: due, even with no new match in this run.
        let due = try World.run(store, now: World.day2)
        #expect(due.counters.notificationsWritten == 1)
        let last = try #require(try store.notifications(filterId: 100).last)
        #expect(last.profileIds == [13])
        #expect(last.createdAt == World.day2)
    }

    @Test func notificationLeavesOutProfilesNoLongerEligible() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10), World.profile(11)])
        store.save([World.filter(100, owner: 1, every: NotifyInterval(months: 0, days: 7, microseconds: 0))])
        _ = try World.run(store)
        // Day 2: two new matches, one hidden before the notification is due, one blocked.
        store.save([
            World.profile(20, at: World.day2), World.profile(21, at: World.day2), World.profile(22, at: World.day2),
        ])
        _ = try World.run(store, now: World.day2)
        #expect(try store.notifications(filterId: 100).count == 1)
        let day9 = World.day1.adding(days: 8)
        store.save([World.profile(20, status: 2, at: day9)])
        store.block(21, 1)
        store.setClock(day9)
        let later = try World.run(store, now: day9)
        #expect(later.counters.notificationsWritten == 1)
        let digest = try #require(try store.notifications(filterId: 100).last)
        #expect(digest.profileIds == [22])
        #expect(digest.matchCount == 1)
        let waiting = try store.matches(filterId: 100).filter { $0.notificationId == nil }.map(\.profileId)
        #expect(waiting.sorted() == [20, 21])
    }

    @Test func noNotificationWhenNoWaitingMatchIsEligible() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10)])
        store.save([World.filter(100, owner: 1, every: NotifyInterval(months: 0, days: 7, microseconds: 0))])
        _ = try World.run(store)
        #expect(store.allNotifications.count == 1)
        // Day 2: a new match waits (not due for a week); then the owner blocks it.
        store.save([World.profile(11, at: World.day2)])
        #expect(try World.run(store, now: World.day2).counters.matchesWritten == 1)
        store.block(1, 11)
        let day9 = World.day1.adding(days: 8)
        let summary = try World.run(store, now: day9)
        #expect(summary.counters.notificationsWritten == 0)
        #expect(store.allNotifications.count == 1)
        #expect(try store.matches(filterId: 100).first { $0.profileId == 11 }?.notificationId == nil)
    }

    @Test func eligibilityExcludesOwnerBlocksInactiveOwnersDeletedAndNotifyOff() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([
            World.profile(1, gender: 2),  // owner searching women, is one
            World.profile(2, gender: 1, status: 3),  // suspended owner
            World.profile(3, gender: 1),
            World.profile(10), World.profile(11), World.profile(12),
        ])
        store.block(1, 11)
        store.block(12, 1)
        store.save([
            World.filter(100, owner: 1),
            World.filter(101, owner: 2),
            World.filter(102, owner: 3, deleted: true),
            World.filter(103, owner: 3, notify: false),
        ])
        let summary = try World.run(store)
        #expect(World.pairs(store).filter { $0.filterId == 100 }.map(\.profileId) == [10])
        #expect(World.pairs(store).filter { $0.filterId == 101 || $0.filterId == 102 }.isEmpty)
        #expect(World.pairs(store).filter { $0.filterId == 103 }.map(\.profileId) == [1, 10, 11, 12])
        #expect(try store.notifications(filterId: 103).isEmpty)
        #expect(summary.counters.filtersEvaluated == 2)
        #expect(summary.counters.notificationsWritten == 1)
    }

    @Test func invalidFiltersAreSkippedRecordedAndCountedAndTheRunSucceeds() throws {
        let store = seeded()
        store.save([
            World.filter(101, owner: 1, #"{"age": {"min": 40, "max": 30}}"#),
            World.filter(102, owner: 1, #"{"favorite_color": {"anyOf": [1]}}"#),
        ])
        let output = RecordingRunOutput()
        let summary = try World.run(store, output: output)
        #expect(summary.counters.filtersInvalid == 2)
        #expect(summary.counters.filtersEvaluated == 1)
        let recorded = try store.recordedInvalidFilters()
        #expect(recorded.map(\.filterId) == [101, 102])
        #expect(
            recorded.map(\.error.description) == ["age: min 40 is greater than max 30", "favorite_color: unknown item"])
        #expect(World.pairs(store).allSatisfy { $0.filterId == 100 })
        // Fixed, it is evaluated again (on changed profiles) and forgotten as invalid.
        store.save([World.filter(101, owner: 1, #"{"age": {"min": 20, "max": 40}}"#)])
        store.save([World.profile(10, smoking: 5, at: World.day1)])
        _ = try World.run(store)
        #expect(try store.recordedInvalidFilters().map(\.filterId) == [102])
        #expect(World.pairs(store).contains(MatchPair(filterId: 101, profileId: 10)))
    }

    /// Review of session 33: two hosts given two `--retention-days` forget each other's pairs early, and the
    /// pairs are recorded again as new. A run or backfill given a value other than the latest one's says so;
    /// one given the same value, or none (it keeps the latest), says nothing.
    @Test func aRetentionOtherThanTheLatestRunsIsReported() throws {
        let store = seeded()
        func changes(_ days: Int?, backfill: Bool = false, at clock: Timestamp) throws -> [[Int]] {
            let output = RecordingRunOutput()
            if backfill {
                _ = try Backfill(MatchingRepositories(store: store), output: output)
                    .execute(.init(now: clock, retentionDays: days))
            } else {
                _ = try RunMatching(MatchingRepositories(store: store), output: output)
                    .execute(.init(now: clock, retentionDays: days))
            }
            return output.events.compactMap { event in
                if case .retentionChanged(let from, let to) = event { return [from, to] }
                return nil
            }
        }
        #expect(try changes(30, at: World.day1) == [])  // the first: nothing to differ from
        #expect(try changes(180, at: World.day1.adding(days: 1)) == [[30, 180]])
        #expect(try changes(180, at: World.day1.adding(days: 2)) == [])
        #expect(try changes(nil, at: World.day1.adding(days: 3)) == [])
        #expect(try changes(30, backfill: true, at: World.day1.adding(days: 3)) == [[180, 30]])
        #expect(try store.latestRetentionDays() == 30)
    }

    @Test func paidConditionIgnoredForFreeOwnerAndCounted() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([
            World.profile(1, gender: 1, plan: 0), World.profile(2, gender: 1, plan: 1),
            World.profile(10, communities: [7]), World.profile(11, communities: [8]),
        ])
        let json = #"{"gender": {"anyOf": [2]}, "communities": {"anyOf": [7]}}"#
        store.save([World.filter(100, owner: 1, json), World.filter(101, owner: 2, json)])
        let summary = try World.run(store)
        #expect(World.pairs(store).filter { $0.filterId == 100 }.map(\.profileId) == [10, 11])
        #expect(World.pairs(store).filter { $0.filterId == 101 }.map(\.profileId) == [10])
        #expect(summary.counters.filtersPaidIgnored == 1)
    }

    @Test func dryRunWritesNothing() throws {
        let store = seeded()
        let summary = try World.run(store, dryRun: true)
        #expect(summary.matchesFound == 3)
        #expect(summary.runId == nil)
        #expect(store.allMatches.isEmpty)
        #expect(store.allNotifications.isEmpty)
        #expect(store.allRuns.isEmpty)
        // And a real run afterwards still considers every profile.
        #expect(try World.run(store).counters.matchesWritten == 3)
    }

    @Test func concurrentStartOfTheSameShardIsRefused() throws {
        let store = seeded()
        let held = try #require(try store.tryLock(kind: .run, shard: .all))
        #expect(throws: RunLocked.self) { try World.run(store) }
        #expect(store.allMatches.isEmpty)
        // Another shard's lock and a backfill's are not blocked by it.
        let half = try #require(try store.tryLock(kind: .run, shard: Shard(index: 0, count: 2)))
        let backfill = try #require(try store.tryLock(kind: .backfill, shard: .all))
        half.release()
        backfill.release()
        held.release()
        #expect(try World.run(store).counters.matchesWritten == 3)
    }

    /// Runs of shard layouts that overlap read the same window, and each took the other's committed pairs for
    /// recorded ones and filled its filters past them (review of session 35): one at a time. Shards of one layout,
    /// and layouts that share no owner, run together.
    @Test func aRunOfAnOverlappingShardLayoutIsRefusedWhileOneRuns() throws {
        let store = seeded()
        let quarter = try Shard(index: 1, count: 4)
        let held = try #require(try store.tryLock(kind: .run, shard: quarter))
        let refusal = #expect(throws: RunLocked.self) { try World.run(store) }
        #expect(refusal?.overlapping == [quarter])
        #expect(refusal?.description.contains("shard 1/4 holds its lock, and its filters overlap shard 0/1's") == true)
        #expect(store.allMatches.isEmpty && store.allRuns.isEmpty)
        #expect(throws: RunLocked.self) { try World.run(store, shard: Shard(index: 1, count: 2)) }
        // Its own layout's other shards, a layout with no owner in common, a backfill and a dry run go.
        for free in [try Shard(index: 0, count: 4), try Shard(index: 0, count: 2)] {
            let attempt = try store.tryLockAlone(kind: .run, shard: free)
            guard case .acquired(let lock) = attempt else {
                Issue.record("shard \(free) was refused: \(attempt)")
                continue
            }
            lock.release()
        }
        guard case .acquired(let backfill) = try store.tryLockAlone(kind: .backfill, shard: .all) else {
            Issue.record("a backfill was refused")
            return
        }
        backfill.release()
        #expect(try World.run(store, dryRun: true).matchesFound == 3)
        held.release()
        #expect(try World.run(store).counters.matchesWritten == 3)
    }

    /// A lock of an overlapping layout held for a moment (a run superseding an interrupted run takes its lock to
    /// abandon it) does not refuse a start: it tries again for about a second (review of session 35).
    @Test func aStartWaitsOutAMomentaryLockOfAnOverlappingLayout() throws {
        let store = seeded()
        let held = try #require(try store.tryLock(kind: .run, shard: Shard(index: 1, count: 4)))
        let released = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: 0.4)
            held.release()
            released.signal()
        }
        #expect(try World.run(store).counters.matchesWritten == 3)
        released.wait()
    }

    func manyFilters() -> InMemoryStore {
        let store = InMemoryStore(now: World.day1)
        var profiles: [Profile] = []
        for id in Int64(1)...40 {
            profiles.append(
                World.profile(
                    id, gender: Int16(id % 2 + 1), residence: Int16(id % 3 == 0 ? 27 : 13),
                    loginHoursAgo: Int(id % 7)))
        }
        store.save(profiles)
        var filters: [SavedFilter] = []
        for id in Int64(100)..<124 {
            let gender = id % 2 + 1
            filters.append(
                World.filter(
                    id, owner: id - 99, #"{"gender": {"anyOf": [\#(gender)]}, "residence": {"anyOf": [13]}}"#,
                    notify: id % 5 != 0))
        }
        store.save(filters)
        return store
    }

    /// The in-memory store's profiles, whose read of changed profiles fails (a statement timeout, a lost
    /// connection).
    struct FailingChangeReads: ProfileRepository {
        struct ReadFailure: Error, CustomStringConvertible {
            var description: String { "injected failure reading changed profiles" }
        }
        let base: InMemoryStore
        func changedProfiles(windows: [ChangeMark?], upTo: ChangeMark?) throws -> ChangedProfiles {
            throw ReadFailure()
        }
        func marksAhead(_ marks: [ChangeMark]) throws -> [ChangeMark] { try base.marksAhead(marks) }
        func settleChangesAhead() throws -> Int { try base.settleChangesAhead() }
        func profiles(_ selection: ProfileSelection) throws -> ProfileColumns { try base.profiles(selection) }
        func profile(id: Int64) throws -> Profile? { try base.profile(id: id) }
        func profileColumns(ids: [Int64]) throws -> ProfileColumns { try base.profileColumns(ids: ids) }
        func owners(ids: [Int64]) throws -> [Int64: FilterOwner] { try base.owners(ids: ids) }
        func currentTime() throws -> Timestamp { try base.currentTime() }
    }

    /// Review of session 37: a claim makes a failed run running again, its error cleared; a completion that
    /// failed before its pass (its read of changed profiles) left it so, shown interrupted, without an error.
    /// It is recorded failed with the completion's error, and the next run completes it.
    @Test func aCompletionThatFailsBeforeItsPassLeavesTheRunFailedWithItsError() throws {
        let store = manyFilters()
        store.failCommit(after: 1)
        #expect(throws: InMemoryCommitFailure.self) { try World.run(store, maxPerFilter: 3, unitFilterLimit: 4) }
        let interrupted = try #require(store.allRuns.first)
        #expect(interrupted.status == .failed)
        var repositories = MatchingRepositories(store: store)
        repositories.profiles = FailingChangeReads(base: store)
        #expect(throws: FailingChangeReads.ReadFailure.self) {
            try RunMatching(repositories, options: PassOptions(unitFilterLimit: 4))
                .execute(.init(now: World.day1, maxPerFilter: 3))
        }
        #expect(try store.run(id: interrupted.id)?.status == .failed)
        let status = try store.serviceStatus()
        let shard = try #require(status.shard(.all))
        #expect(status.state(of: shard) == .failing)
        let brief = try #require(shard.runsSince.first { $0.id == interrupted.id })
        #expect(brief.error == "injected failure reading changed profiles")
        let completed = try World.run(store, maxPerFilter: 3, unitFilterLimit: 4)
        #expect(completed.resumedRunId == interrupted.id)
        #expect(try store.run(id: interrupted.id)?.status == .succeeded)
    }

    @Test func crashBetweenUnitsThenRerunEqualsOneCleanRun() throws {
        let clean = manyFilters()
        _ = try World.run(clean, maxPerFilter: 3, unitFilterLimit: 4)
        for failAfter in [0, 1, 3, 5] {
            let crashed = manyFilters()
            crashed.failCommit(after: failAfter)
            #expect(throws: InMemoryCommitFailure.self) { try World.run(crashed, maxPerFilter: 3, unitFilterLimit: 4) }
            let status = crashed.allRuns.last?.status
            #expect(status == .failed)
            let resumed = try World.run(crashed, maxPerFilter: 3, unitFilterLimit: 4)
            #expect(resumed.resumedRunId == crashed.allRuns.first?.id)
            #expect(World.rows(crashed).matches == World.rows(clean).matches, "failing after \(failAfter) units")
            #expect(
                World.rows(crashed).notifications == World.rows(clean).notifications, "failing after \(failAfter) units"
            )
            let first = try #require(crashed.allRuns.first)
            #expect(first.status == .succeeded)
            #expect(first.counters.matchesWritten == clean.allRuns.first?.counters.matchesWritten)
        }
    }

    /// Runs `action` once, when the run starts writing (it has read its changes).
    final class OnceWhenWriting: RunOutputHandler, @unchecked Sendable {
        private let lock = NSLock()
        private var action: (() throws -> Void)?
        private(set) var failure: (any Error)?
        init(_ action: @escaping () throws -> Void) { self.action = action }
        func handle(_ event: RunEvent) {
            guard case .phaseStarted(.write) = event else { return }
            let pending = lock.withLock { () -> (() throws -> Void)? in
                defer { action = nil }
                return action
            }
            do { try pending?() } catch { lock.withLock { failure = error } }
        }
    }

    /// Shard 0/2's run reads day 2's sign-ups, and while it writes, shard 0/4's run (another layout, the operator
    /// moving to four shards) reads them too and succeeds; then 0/2's run dies after its first unit. Completed by
    /// the next 0/2 run, it leaves alone the remaining filters of 0/4's owners, which 0/4's run has shown every
    /// change already: each filter takes one run's cap of the sign-ups, never two. Left alone, those filters are
    /// still the other side of mutual pairs: the sign-ups who logged in last own filters (0/4's), and the pairs
    /// the completed run records with them are mutual when the filter's owner satisfies theirs.
    @Test func aResumedRunLeavesAloneTheFiltersANewerLayoutCoveredMeanwhile() throws {
        let store = manyFilters()
        let halves = try (0..<2).map { try Shard(index: $0, count: 2) }
        for half in halves { _ = try World.run(store, shard: half, maxPerFilter: 100) }
        let day2 = World.day1.adding(days: 1)
        store.setClock(day2)
        // Women, those with ids divisible by 4 logged in last (first in every cap) and each with a filter for
        // Tokyo, which owners living there satisfy.
        store.save(
            (Int64(41)...80).map {
                World.profile($0, gender: 2, residence: 13, loginHoursAgo: $0 % 4 == 0 ? 0 : 2, at: day2)
            }, updatedAt: day2)
        let signUpFilters = (Int64(41)...80).filter { $0 % 4 == 0 }
        store.save(signUpFilters.map { World.filter(1_000 + $0, owner: $0, #"{"residence": {"anyOf": [13]}}"#) })
        let quarter = try Shard(index: 0, count: 4)
        // Runs of overlapping layouts now start one at a time; binaries before session 35 did not, and a fleet
        // mid-upgrade may mix them: what they leave is still completed right.
        store.letOverlappingLayoutsRunTogether()
        let beside = OnceWhenWriting {
            _ = try World.run(store, now: day2, shard: quarter, maxPerFilter: 2, unitFilterLimit: 2)
            store.failCommit(after: 1)
        }
        #expect(throws: InMemoryCommitFailure.self) {
            try World.run(store, now: day2, shard: halves[0], maxPerFilter: 2, unitFilterLimit: 2, output: beside)
        }
        #expect(beside.failure == nil)
        let resumed = try World.run(store, now: day2, shard: halves[0], maxPerFilter: 2, unitFilterLimit: 2)
        #expect(resumed.resumedRunId == store.allRuns.first { $0.shard == halves[0] && $0.clock == day2 }?.id)

        // Day 2's pairs by filter: 0/4's filters (owners 4, 8, ...) took one cap each, and so did the rest of
        // 0/2's (owners 2, 6, 10, ...). The first unit's (filters 101 and 103) committed before the failure;
        // 103's chosen pairs were 0/4's too (the same cap order), so it inserted nothing new.
        var dayTwo: [Int64: Int] = [:]
        for match in store.allMatches where match.matchedAt == day2 { dayTwo[match.filterId, default: 0] += 1 }
        let quarterFilters = (Int64(100)..<124).filter { quarter.owns(ownerId: $0 - 99) }
        #expect(!quarterFilters.isEmpty)
        for filter in quarterFilters { #expect(dayTwo[filter] == 2, "filter \(filter): \(dayTwo[filter] ?? 0)") }
        for filter in (Int64(100)..<124)
        where halves[0].owns(ownerId: filter - 99) && !quarter.owns(ownerId: filter - 99) {
            #expect(dayTwo[filter] == 2, "filter \(filter): \(dayTwo[filter] ?? 0)")
        }
        // The completed run's pairs (0/2's filters after the first unit) with sign-ups who own a filter: mutual
        // exactly when the pair's filter owner lives in Tokyo (in `manyFilters`, owners whose id is not a
        // multiple of 3).
        let completed = store.allMatches.filter { match in
            let owner = match.filterId - 99
            return match.matchedAt == day2 && match.filterId < 124 && match.filterId > 103
                && halves[0].owns(ownerId: owner) && !quarter.owns(ownerId: owner)
                && signUpFilters.contains(match.profileId)
        }
        #expect(completed.contains { $0.mutual } && completed.contains { !$0.mutual })
        for match in completed {
            #expect(match.mutual == ((match.filterId - 99) % 3 != 0), "\(match.filterId)/\(match.profileId)")
        }
    }

    /// A unit that loses a deadlock to another writer (PostgreSQL rolls its transaction back) is written again in
    /// its turn: the run succeeds, writes what a run without the conflict writes, and says it retried.
    @Test func aUnitGivenUpForAWriteConflictIsWrittenAgainInItsTurn() throws {
        let clean = manyFilters()
        _ = try World.run(clean, maxPerFilter: 3, unitFilterLimit: 4)
        for after in [0, 2] {
            let store = manyFilters()
            store.conflictCommits(after: after, times: 2)
            let output = RecordingRunOutput()
            let summary = try World.run(store, maxPerFilter: 3, unitFilterLimit: 4, output: output)
            #expect(World.rows(store).matches == World.rows(clean).matches, "conflicts after \(after) units")
            #expect(World.rows(store).notifications == World.rows(clean).notifications)
            #expect(summary.counters.matchesWritten == clean.allRuns.first?.counters.matchesWritten)
            #expect(store.allRuns.map(\.status) == [.succeeded])
            let retries = output.events.compactMap { event -> Int? in
                if case .unitRetried(_, let attempt, let attempts, let reason) = event {
                    #expect(attempts == 3 && reason.contains("deadlock"))
                    return attempt
                }
                return nil
            }
            #expect(retries == [2, 3])
        }
    }

    /// A unit that keeps losing fails the run after its last attempt, like any failure: the units before it stay
    /// committed, and the next run resumes and writes the rest.
    @Test func aUnitThatKeepsConflictingFailsTheRunAndTheNextRunResumes() throws {
        let clean = manyFilters()
        _ = try World.run(clean, maxPerFilter: 3, unitFilterLimit: 4)
        let store = manyFilters()
        store.conflictCommits(after: 1, times: 3)
        #expect(throws: InMemoryWriteConflict.self) { try World.run(store, maxPerFilter: 3, unitFilterLimit: 4) }
        #expect(store.allRuns.last?.status == .failed)
        let before = World.rows(store).matches.count
        let resumed = try World.run(store, maxPerFilter: 3, unitFilterLimit: 4)
        #expect(resumed.resumedRunId == store.allRuns.first?.id)
        #expect(World.rows(store).matches == World.rows(clean).matches)
        #expect(World.rows(store).notifications == World.rows(clean).notifications)
        // What completing the interrupted run wrote is reported beside the new run's counts (review of session 23:
        // the report named the completed run and showed only the new run's counts).
        let completed = try #require(resumed.completedRun)
        #expect(completed.runId == store.allRuns.first?.id)
        // The completed run's counts are its whole (the attempt that failed included): with the new run's, every row.
        #expect(before > 0)
        #expect(
            completed.counters.matchesWritten + resumed.counters.matchesWritten == World.rows(store).matches.count)
        #expect(completed.counters.matchesWritten > 0)
        let text = ReportRenderer.render(.runSummary(resumed), as: .text)
        #expect(text.contains("Completed interrupted run #\(completed.runId)"), "\(text)")
    }

    /// A filter the app creates after an interrupted run started takes no part when that run is completed at its
    /// own clock (review of session 36: completed later, the run evaluated it against its old window and wrote it
    /// a digest dated before it existed, and the new run a second one a moment later). From the new run on it
    /// takes part like any filter: what a run that was never interrupted leaves, row for row.
    @Test func aFilterCreatedAfterAnInterruptedRunStartedTakesNoPartInItsCompletion() throws {
        // A filter there when the run started, stamped by an app server whose clock runs five minutes ahead: the
        // completion evaluates it, as the first process would have (the review of the change: left out, its first
        // window was never evaluated).
        let skewed = World.filter(201, owner: 2, #"{"gender": {"anyOf": [1]}}"#)
        let stampedAhead = SavedFilter(
            id: skewed.id, ownerId: skewed.ownerId, name: skewed.name, conditionsJSON: skewed.conditionsJSON,
            createdAt: World.day1.adding(microseconds: 300_000_000),
            updatedAt: World.day1.adding(microseconds: 300_000_000))
        let clean = manyFilters()
        clean.save([stampedAhead])
        _ = try World.run(clean, maxPerFilter: 3, unitFilterLimit: 4)
        #expect(clean.allMatches.contains { $0.filterId == 201 })
        let store = manyFilters()
        store.save([stampedAhead])
        store.conflictCommits(after: 1, times: 3)
        #expect(throws: InMemoryWriteConflict.self) { try World.run(store, maxPerFilter: 3, unitFilterLimit: 4) }
        let later = World.day1.adding(microseconds: 2 * 3_600_000_000)
        let created = World.filter(200, owner: 1, #"{"gender": {"anyOf": [2]}}"#)
        let createdLater = SavedFilter(
            id: created.id, ownerId: created.ownerId, name: created.name, conditionsJSON: created.conditionsJSON,
            createdAt: later.adding(microseconds: -1_800_000_000), updatedAt: later.adding(microseconds: -1_800_000_000)
        )
        for world in [clean, store] {
            world.setClock(later)
            world.save([createdLater])
        }
        let output = RecordingRunOutput()
        let resumed = try RunMatching(
            MatchingRepositories(store: store), output: output, options: PassOptions(unitFilterLimit: 4)
        ).execute(.init(now: later, maxPerFilter: 3))
        _ = try World.run(clean, now: later, maxPerFilter: 3, unitFilterLimit: 4)
        #expect(resumed.resumedRunId == store.allRuns.first?.id)
        let leftOut = output.events.compactMap { event -> Int? in
            if case .filtersCreatedSinceLeftOut(_, let count) = event { return count }
            return nil
        }
        #expect(leftOut == [1])
        #expect(!store.allMatches.contains { $0.filterId == 200 })
        #expect(!store.allNotifications.contains { $0.filterId == 200 })
        #expect(World.rows(store).matches == World.rows(clean).matches)
        #expect(World.rows(store).notifications == World.rows(clean).notifications)
        // It takes part from the new run on: a woman who signs up next is its match.
        let next = later.adding(microseconds: 3_600_000_000)
        store.setClock(next)
        store.save([World.profile(60, gender: 2, at: next)])
        _ = try World.run(store, now: next, maxPerFilter: 3, unitFilterLimit: 4)
        #expect(store.allMatches.filter { $0.filterId == 200 }.map(\.profileId) == [60])
    }

    @Test func shardsTogetherEqualOneRun() throws {
        let whole = manyFilters()
        _ = try World.run(whole, maxPerFilter: 3)
        let sharded = manyFilters()
        for k in 0..<4 {
            _ = try World.run(sharded, shard: try Shard(index: k, count: 4), maxPerFilter: 3)
        }
        #expect(World.rows(sharded).matches == World.rows(whole).matches)
        #expect(World.rows(sharded).notifications == World.rows(whole).notifications)
        // Each shard keeps its own progress: a change is seen by every shard's next run.
        sharded.save([World.profile(41, gender: 2, at: World.day1)])
        var candidates: [Int] = []
        for k in 0..<4 {
            candidates.append(try World.run(sharded, shard: try Shard(index: k, count: 4)).counters.candidates)
        }
        #expect(candidates == [1, 1, 1, 1])
    }

    @Test func stopRequestEndsAtUnitBoundaryAndNextRunCompletes() throws {
        let clean = manyFilters()
        _ = try World.run(clean, maxPerFilter: 3, unitFilterLimit: 4)
        let store = manyFilters()
        let stop = StopRequest()
        stop.request("SIGTERM")
        let useCase = RunMatching(
            MatchingRepositories(store: store), options: PassOptions(stop: stop, unitFilterLimit: 4))
        #expect(throws: RunStopped.self) { try useCase.execute(.init(now: World.day1, maxPerFilter: 3)) }
        #expect(store.allMatches.isEmpty)
        _ = try World.run(store, maxPerFilter: 3, unitFilterLimit: 4)
        #expect(World.rows(store).matches == World.rows(clean).matches)
    }

    /// A stop asked for while the process completes an interrupted run ends it before the new run reads: the
    /// completion commits, no new run is recorded (review of session 23: the new run read every change first).
    @Test func aStopDuringTheCompletionOfAnInterruptedRunEndsBeforeTheNewRun() throws {
        let store = manyFilters()
        store.conflictCommits(after: 1, times: 3)
        #expect(throws: InMemoryWriteConflict.self) { try World.run(store, maxPerFilter: 3, unitFilterLimit: 4) }
        let interrupted = try #require(store.allRuns.last)
        let output = StopWhenPhaseStarts(.forget)  // the completion's sweep: its units have committed
        #expect(throws: RunStopped.self) {
            try RunMatching(
                MatchingRepositories(store: store), output: output,
                options: PassOptions(stop: output.stop, unitFilterLimit: 4)
            ).execute(.init(now: World.day1, maxPerFilter: 3))
        }
        #expect(store.allRuns.count == 1, "no new run recorded")
        #expect(store.allRuns.first { $0.id == interrupted.id }?.status == .succeeded)
    }

    /// Requests a stop (as SIGTERM does) when `phase` starts.
    final class StopWhenPhaseStarts: RunOutputHandler, @unchecked Sendable {
        let stop = StopRequest()
        let phase: RunPhase
        private let lock = NSLock()
        private var started: [RunPhase] = []
        init(_ phase: RunPhase) { self.phase = phase }
        func handle(_ event: RunEvent) {
            guard case .phaseStarted(let begun) = event else { return }
            lock.withLock { started.append(begun) }
            if begun == phase { stop.request("SIGTERM") }
        }
        var phasesStarted: [RunPhase] { lock.withLock { started } }
    }

    /// Review of session 23: a stop was asked only before a unit's writes, so a dry run (no units) ran to its
    /// end, and a run went on through its evaluation; now each phase boundary asks too.
    @Test func aStopRequestEndsADryRunAtTheNextPhase() throws {
        let store = manyFilters()
        let output = StopWhenPhaseStarts(.read)  // the signal arrives while the profiles are read
        let useCase = RunMatching(
            MatchingRepositories(store: store), output: output, options: PassOptions(stop: output.stop))
        #expect(throws: RunStopped.self) { try useCase.execute(.init(now: World.day1, dryRun: true)) }
        #expect(!output.phasesStarted.contains(.evaluate), "it stops before evaluating")
    }

    /// A stop during the retention sweep ends the sweep, not the run: its units have committed; the expired
    /// pairs left are the next run's.
    @Test func aStopRequestDuringTheSweepLeavesTheRestToTheNextRun() throws {
        let store = seeded()
        _ = try World.run(store)
        let later = World.day1.adding(days: 10)
        store.setClock(later)
        let output = StopWhenPhaseStarts(.forget)
        let stopped = try RunMatching(
            MatchingRepositories(store: store), output: output, options: PassOptions(stop: output.stop)
        ).execute(.init(now: later, retentionDays: 7))
        #expect(stopped.retention?.stoppedByRequest == "SIGTERM")
        #expect(stopped.retention?.backlog == true)
        #expect(World.pairs(store).count == 3, "nothing forgotten yet")
        let next = try RunMatching(MatchingRepositories(store: store)).execute(.init(now: later, retentionDays: 7))
        #expect(next.counters.matchesForgotten == 3)
        #expect(World.pairs(store).isEmpty)
    }

    /// Review of session 24: a run's sweep forgot at most a fixed 5M pairs, fewer than a day at 1M x 100k
    /// records (about 6.7M), so there the expired pairs would pile up day after day. It now forgets at least
    /// twice what the run recorded (here: batches of one pair, at least one batch a run).
    @Test func aRunsSweepForgetsAtLeastTwiceWhatTheRunRecorded() throws {
        let options = PassOptions(retentionBatchSize: 1, retentionMinimumBatches: 1)
        let later = World.day1.adding(days: 10)
        /// `seeded()` after its first run (3 pairs, notified), on day 11, with `newcomers` saved.
        func dayEleven(newcomers: [Int64]) throws -> InMemoryStore {
            let store = seeded()
            _ = try World.run(store)
            store.setClock(later)
            store.save(newcomers.map { World.profile($0) }, updatedAt: later)
            return store
        }
        func run(_ store: InMemoryStore, at clock: Timestamp, retentionDays: Int) throws -> RunSummary {
            store.setClock(clock)
            return try RunMatching(MatchingRepositories(store: store), options: options)
                .execute(.init(now: clock, retentionDays: retentionDays))
        }

        let idle = try run(try dayEleven(newcomers: []), at: later, retentionDays: 7)
        #expect(idle.counters.matchesWritten == 0)
        #expect(idle.counters.matchesForgotten == 1, "a run that records nothing still forgets its minimum")
        #expect(idle.retention?.backlog == true)

        let busy = try dayEleven(newcomers: [20, 21])
        let summary = try run(busy, at: later, retentionDays: 7)
        #expect(summary.counters.matchesWritten == 2)
        #expect(summary.counters.matchesForgotten == 3, "budget 4: twice the 2 recorded")
        #expect(summary.retention?.backlog == false)
        #expect(Set(World.pairs(busy).map(\.profileId)) == [20, 21])

        // The sweep is service-wide: a run that records nothing itself (another shard's, a later one the same
        // day) takes the budget of what the service recorded in the day up to its clock.
        let sharded = try dayEleven(newcomers: [20, 21])
        let keeping = try run(sharded, at: later, retentionDays: 1_000)
        #expect(keeping.counters.matchesWritten == 2 && keeping.counters.matchesForgotten == 0)
        let sweeping = try run(
            sharded, at: later.adding(microseconds: Timestamp.microsecondsPerDay / 24), retentionDays: 7)
        #expect(sweeping.counters.matchesWritten == 0)
        #expect(sweeping.counters.matchesForgotten == 3, "budget 4: twice the day's 2")
        #expect(sweeping.retention?.backlog == false)
    }

    /// The commands' check of `--now` against the database's clock (`ClockAhead`): an hour ahead is allowed.
    @Test func aClockWellAheadOfTheDatabasesIsRefused() throws {
        let store = InMemoryStore(now: World.day1)
        try ClockAhead.check(nil, against: store)
        try ClockAhead.check(World.day1.adding(microseconds: ClockAhead.tolerance), against: store)
        let hours = #expect(throws: ClockAhead.self) {
            try ClockAhead.check(World.day1.adding(microseconds: 2 * 3_600_000_000 + 1), against: store)
        }
        #expect(
            hours?.description.contains("is 2 h after the database's clock") == true, "\(String(describing: hours))")
        #expect(hours?.failureKind == .usage)
        let years = #expect(throws: ClockAhead.self) {
            try ClockAhead.check(World.day1.adding(days: 3_653), against: store)
        }
        #expect(years?.description.contains("is 3653 days after") == true, "\(String(describing: years))")
        #expect(years?.description.contains("--allow-future-now") == true)
    }

    @Test func theSweepsBudgetFollowsWhatTheRunRecorded() {
        #expect(Retention.sweepBatches(recorded: 0, batchSize: 50_000, minimum: 100) == 100)
        #expect(Retention.sweepBatches(recorded: 2_500_000, batchSize: 50_000, minimum: 100) == 100)
        #expect(Retention.sweepBatches(recorded: 6_700_000, batchSize: 50_000, minimum: 100) == 268)
        #expect(Retention.sweepBatches(recorded: 6_700_001, batchSize: 50_000, minimum: 100) == 269)
        #expect(Retention.sweepBatches(recorded: 200_000_000, batchSize: 50_000, minimum: 100) == 1_000)
        #expect(Retention.sweepBatches(recorded: Int.max, batchSize: 50_000, minimum: 100) == 1_000)
        #expect(Retention.sweepBatches(recorded: 10, batchSize: 1, minimum: 50, ceiling: 5) == 50)
        #expect(Retention.sweepBatches(recorded: -5, batchSize: 0, minimum: 0) == 1)
    }
}

@Suite struct BackfillTests {
    @Test func backfillEvaluatesNewFilterAgainstUnchangedProfilesWithoutNotifying() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10), World.profile(11, residence: 27)])
        _ = try World.run(store)
        store.save([World.filter(100, owner: 1, #"{"residence": {"anyOf": [13]}}"#)])
        #expect(try World.run(store).counters.matchesWritten == 0)
        let summary = try World.backfill(store, .init(filters: .ids([100]), now: World.day1))
        #expect(summary.kind == .backfill)
        #expect(World.pairs(store) == [MatchPair(filterId: 100, profileId: 10)])
        #expect(store.allNotifications.isEmpty)
        // The first backfill's pair is silent for good; with --notify, the new match is notified, alone.
        #expect(store.silentPairs == [MatchPair(filterId: 100, profileId: 10)])
        store.save([World.profile(12)])
        let notifying = try World.backfill(
            store, .init(filters: .owners([1]), writesNotifications: true, now: World.day1))
        #expect(notifying.counters.notificationsWritten == 1)
        #expect(store.allNotifications.first?.profileIds == [12])
    }

    /// The sweep forgets every filter's pairs: a backfill of one filter by hand, or a run, without
    /// `--retention-days` keeps them as long as the latest run did (365 here), not the new service's 180.
    @Test func withoutTheFlagTheLatestRunsRetentionApplies() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10), World.profile(11)])
        store.save([World.filter(100, owner: 1), World.filter(200, owner: 1, #"{"residence": {"anyOf": [27]}}"#)])
        let repositories = MatchingRepositories(store: store)
        _ = try RunMatching(repositories).execute(.init(now: World.day1, retentionDays: 365))
        #expect(World.pairs(store).count == 2)

        let later = World.day1.adding(days: 200)
        store.setClock(later)
        let backfill = try World.backfill(store, .init(filters: .ids([200]), now: later))
        #expect(backfill.counters.matchesForgotten == 0)
        let run = try RunMatching(repositories).execute(.init(now: later.adding(days: 1)))
        #expect(run.counters.matchesForgotten == 0)
        #expect(try store.latestRetentionDays() == 365)
        #expect(World.pairs(store).count == 2)

        // The operator's flag is the new retention, and the runs after it keep it.
        let shorter = try RunMatching(repositories).execute(.init(now: later.adding(days: 2), retentionDays: 180))
        #expect(shorter.counters.matchesForgotten == 2)
        #expect(try store.latestRetentionDays() == 180)
    }

    /// Review of session 24: a backfill's `--retention-days 30` forgot every filter's pairs at 30 days, and the
    /// next runs without the flag went back to the latest run's 180: the pairs 30-180 days old were gone
    /// already, so the promise of the runs after it was not the one kept. A flag given to a backfill is kept too.
    @Test func aBackfillsRetentionIsKeptByTheRunsAfterIt() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10)])
        store.save([World.filter(100, owner: 1)])
        let repositories = MatchingRepositories(store: store)
        _ = try RunMatching(repositories).execute(.init(now: World.day1, retentionDays: 180))
        let later = World.day1.adding(days: 1)
        store.setClock(later)
        _ = try World.backfill(store, .init(filters: .ids([100]), now: later, retentionDays: 30))
        #expect(try store.latestRetentionDays() == 30)
        let run = try RunMatching(repositories).execute(.init(now: later.adding(days: 40)))
        #expect(run.counters.matchesForgotten == 1, "the backfill's 30 days, not the earlier run's 180")
    }

    @Test func backfillByChangedWindow() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1)], updatedAt: World.day1)
        store.save([World.profile(10)], updatedAt: World.day1.adding(days: -5))
        store.save([World.profile(11)], updatedAt: World.day1.adding(days: -1))
        store.save([World.filter(100, owner: 1)])
        _ = try World.backfill(
            store,
            .init(
                profiles: .changed(from: World.day1.adding(days: -2), to: World.day1),
                now: World.day1))
        #expect(World.pairs(store).map(\.profileId) == [11])
    }
}

@Suite struct ExplainMatchTests {
    @Test func explainsEachConditionAndEligibility() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10, residence: 27)])
        store.save([World.filter(100, owner: 1, #"{"gender": {"anyOf": [2]}, "residence": {"anyOf": [13, 14]}}"#)])
        let result = try ExplainMatch(MatchingRepositories(store: store))
            .execute(.init(filterId: 100, profileId: 10, now: World.day1))
        #expect(result.explanation.matches == false)
        #expect(result.explanation.conditions.map(\.itemKey) == ["gender", "residence"])
        #expect(result.explanation.conditions.map(\.outcome) == [.pass, .fail])
        let report = Report.explanation(result)
        let text = ReportRenderer.render(report, as: .text)
        #expect(text.contains("NO MATCH"))
        #expect(text.contains("residence"))
        let json = ReportRenderer.render(report, as: .json)
        #expect(json.contains("\"conditions\":["))
        #expect(throws: ExplainMatch.FilterNotFound.self) {
            try ExplainMatch(MatchingRepositories(store: store))
                .execute(.init(filterId: 999, profileId: 10, now: World.day1))
        }
        // Typed for scripts (review of session 32): the verdict, the filter's id, whether recorded, mutual.
        #expect(json.contains(#""match":false"#) && json.contains(#""filter_id":100"#), "\(json)")
        #expect(json.contains(#""recorded":false"#) && json.contains(#""mutual_via":null"#), "\(json)")
    }

    /// Review of session 32: an invalid filter's conditions table was empty, as a `{}` filter's (which matches
    /// everyone) is; it now says they were not evaluated.
    @Test func anInvalidFiltersConditionsAreSaidNotEvaluated() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10)])
        store.save([World.filter(100, owner: 1, #"{"height": {"min": 1e400}}"#), World.filter(101, owner: 1, "{}")])
        let explain = ExplainMatch(MatchingRepositories(store: store))
        let invalid = Report.explanation(try explain.execute(.init(filterId: 100, profileId: 10, now: World.day1)))
        let everyone = Report.explanation(try explain.execute(.init(filterId: 101, profileId: 10, now: World.day1)))
        let invalidJSON = ReportRenderer.render(invalid, as: .json)
        #expect(invalidJSON.contains(#""conditions_evaluated":false"#) && invalidJSON.contains(#""match":false"#))
        #expect(invalidJSON.contains(#""conditions":[]"#), "only conditions in the table: \(invalidJSON)")
        let everyoneJSON = ReportRenderer.render(everyone, as: .json)
        #expect(everyoneJSON.contains(#""conditions_evaluated":true"#) && everyoneJSON.contains(#""match":true"#))
        let text = ReportRenderer.render(invalid, as: .text)
        #expect(text.contains("Conditions evaluated") && text.contains("NO MATCH"), "\(text)")
    }
}

@Suite struct ReportTests {
    @Test func runSummaryRendersAsTextAndJSON() throws {
        let summary = RunSummary(
            runId: 7, kind: .run, shard: try Shard(index: 1, count: 4), clock: World.day1,
            dryRun: false, resumedRunId: nil,
            counters: RunCounters(
                candidates: 5, filtersEvaluated: 3, filtersInvalid: 1,
                matchesWritten: 9, notificationsWritten: 2),
            matchesFound: 9, phaseSeconds: [.read: 0.5, .evaluate: 0.25, .write: 1], totalSeconds: 1.75,
            retention: nil, completedRun: nil)
        let report = Report.runSummary(summary)
        #expect(report.section("Counts")?.value("Matches written") == .integer(9))
        let text = ReportRenderer.render(report, as: .text)
        #expect(text.hasPrefix("matcher run #7"))
        #expect(text.contains("  Matches written                       9"))
        let json = ReportRenderer.render(report, as: .json)
        #expect(json.contains("\"matches_written\":9"))
        #expect(json.contains("\"shard\":\"1/4\""))
        #expect(json.contains("\"read\":0.5"))
    }

    /// Review of the run summary: the run's id, its kind and whether it was a dry run are typed fields of the run
    /// section, whatever the kind and --dry-run (a dry run has no id: null).
    @Test func runSummarySaysTheRunIdKindAndDryRunAsFields() throws {
        func json(_ runId: Int64?, _ kind: RunKind, dryRun: Bool) -> String {
            ReportRenderer.render(
                Report.runSummary(
                    RunSummary(
                        runId: runId, kind: kind, shard: .all, clock: World.day1, dryRun: dryRun, resumedRunId: nil,
                        counters: RunCounters(), matchesFound: 0, phaseSeconds: [:], totalSeconds: 0, retention: nil,
                        completedRun: nil)), as: .json)
        }
        let real = json(7, .run, dryRun: false)
        #expect(
            real.contains(#""run_id":7"#) && real.contains(#""kind":"run""#) && real.contains(#""dry_run":false"#),
            "\(real)")
        let dry = json(nil, .backfill, dryRun: true)
        #expect(
            dry.contains(#""run_id":null"#) && dry.contains(#""kind":"backfill""#) && dry.contains(#""dry_run":true"#),
            "\(dry)")
    }

    /// Review of session 37: the run summary's JSON keys came and went with the run's state (a dry run's counts,
    /// a completion's keys and section, the retention sweep's backlog absent altogether), so a script met a
    /// missing key. Every state now has the same keys, null where they do not apply; the text shows only values.
    @Test func everyRunSummaryHasTheSameKeysAndTheTextShowsOnlyValues() throws {
        func summary(
            dryRun: Bool = false, resumed: Int64? = nil, retention: RetentionOutcome? = nil,
            completed: CompletedRun? = nil
        ) -> RunSummary {
            RunSummary(
                runId: dryRun ? nil : 8, kind: .run, shard: .all, clock: World.day1, dryRun: dryRun,
                resumedRunId: resumed, counters: RunCounters(matchesWritten: 4), matchesFound: 4,
                phaseSeconds: [:], totalSeconds: 1, retention: retention, completedRun: completed)
        }
        func keys(_ summary: RunSummary) throws -> [String] {
            let json = ReportRenderer.render(.runSummary(summary), as: .json)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
            return try object.keys.sorted().flatMap { key -> [String] in
                guard key != "title" else { return [key] }
                let section = try #require(object[key] as? [String: Any], "\(key)")
                return section.keys.sorted().map { "\(key).\($0)" }
            }
        }
        let plain = summary()
        let states = [
            summary(dryRun: true), summary(resumed: 8),
            summary(
                resumed: 5, retention: RetentionOutcome(forgotten: 3, backlog: true, stoppedByRequest: "SIGTERM"),
                completed: CompletedRun(runId: 5, counters: RunCounters(matchesWritten: 2), totalSeconds: 0.5)),
        ]
        let expected = try keys(plain)
        #expect(expected.contains("counts.retention_backlog") && expected.contains("completed_run.run_id"))
        for state in states { #expect(try keys(state) == expected) }

        let dryJSON = ReportRenderer.render(.runSummary(states[0]), as: .json)
        #expect(dryJSON.contains(#""matches_found":4"#) && dryJSON.contains(#""matches_written":null"#))
        let swept = ReportRenderer.render(.runSummary(states[2]), as: .json)
        #expect(swept.contains(#""retention_backlog":true"#) && swept.contains(#""retention_stopped":"SIGTERM""#))
        #expect(swept.contains(#""completed_interrupted_run":5"#) && swept.contains(#""resumed":null"#))

        // The text: a plain run shows neither a completion nor a sweep it did not have, nor found matches.
        let plainText = ReportRenderer.render(.runSummary(plain), as: .text)
        for absent in ["Completed interrupted run", "Resumed", "Retention", "Matches found", " -"] {
            #expect(!plainText.contains(absent), "\(absent)")
        }
        let sweptText = ReportRenderer.render(.runSummary(states[2]), as: .text)
        #expect(sweptText.contains("Completed interrupted run #5"))
        #expect(sweptText.contains("Retention backlog") && sweptText.contains("SIGTERM"))
        let dryText = ReportRenderer.render(.runSummary(states[0]), as: .text)
        #expect(dryText.contains("Matches found") && !dryText.contains("Matches written"))
    }

    @Test func tablesAlignJapaneseByDisplayWidth() {
        let report = Report(
            title: "t",
            sections: [
                .table(
                    "t", "T", columns: [ReportColumn("item", "item"), ReportColumn("value", "value")],
                    rows: [
                        [.text("residence"), .text("13 (東京都)")], [.text("x"), .text("1")],
                    ])
            ])
        let lines = ReportRenderer.render(report, as: .text).split(separator: "\n").map(String.init)
        // "13 (東京都)" takes 11 columns: "13 (" and ")" are 5, the three kanji 2 each.
        #expect(ReportRenderer.displayWidth("13 (東京都)") == 11)
        #expect(lines.contains("  item       value"))
        #expect(lines.contains("  residence  13 (東京都)"))
    }

    @Test func jsonEscapesControlAndQuotes() {
        let report = Report(
            title: "t \"q\"\n", sections: [.fields("s", "S", [ReportField("k", "K", .text("a\u{1}b"))])])
        #expect(ReportRenderer.render(report, as: .json) == #"{"s":{"k":"a\u0001b"},"title":"t \"q\"\n"}"#)
    }
}

@Suite struct ShardTests {
    @Test func parsesAndRejectsWithClearErrors() throws {
        let shard = try Shard(parsing: "3/4")
        #expect(shard.index == 3 && shard.count == 4)
        #expect(shard.owns(ownerId: 7) && !shard.owns(ownerId: 8) && Shard.all.owns(ownerId: -5))
        #expect(try Shard(index: 1, count: 4).owns(ownerId: -3))  // -3 mod 4 = 1
        for (text, problem) in [
            ("4/4", "K must satisfy 0 <= K < N"), ("0/0", "N must be at least 1"),
            ("1/40000", "N must be at most 32767"), ("a/b", "expected K/N, for example 0/4"),
        ] {
            #expect(throws: ShardError(text: text, problem: problem)) { try Shard(parsing: text) }
        }
    }
}

@Suite struct CoverageTests {
    /// A long unsharded run read its changes at t1; the shards' timer read at t2 and succeeded first. When the
    /// unsharded run succeeds, every owner keeps the shards' newer mark: the changes of (t1, t2] are not
    /// considered again.
    @Test func aRunThatFinishesLateWithAnOlderMarkKeepsTheNewerEntries() throws {
        let t1 = World.day1, t2 = World.day1.adding(microseconds: 3_600_000_000)
        let halves = try (0..<2).map { try Shard(index: $0, count: 2) }
        let shards = Coverage.none
            .recording(CoverageEntry(shard: halves[0], mark: ChangeMark("snap:t2-a"), takenAt: t2))
            .recording(CoverageEntry(shard: halves[1], mark: ChangeMark("snap:t2-b"), takenAt: t2))
        let late = shards.recording(CoverageEntry(shard: .all, mark: ChangeMark("snap:t1"), takenAt: t1))
        #expect(late.entries.count == 3)
        #expect(Set(late.entries.prefix(2).map(\.mark)) == [ChangeMark("snap:t2-a"), ChangeMark("snap:t2-b")])
        #expect(late.entries.last?.mark == ChangeMark("snap:t1"))
        for owner in Int64(0)..<4 {
            let index = try #require(late.entryIndex(forOwner: owner))
            #expect(late.entries[index].takenAt == t2)
        }
        // The other way round, the newer unsharded entry covers both halves wholly and replaces them.
        let unsharded = shards.recording(
            CoverageEntry(shard: .all, mark: ChangeMark("snap:t3"), takenAt: t2.adding(microseconds: 1)))
        #expect(unsharded.entries.map(\.mark) == [ChangeMark("snap:t3")])
    }
}

@Suite struct NotifyIntervalTests {
    @Test func addsLikePostgres() throws {
        let jan31 = try #require(Timestamp(iso8601: "2026-01-31T10:00:00Z"))
        let month = NotifyInterval(months: 1, days: 0, microseconds: 0)
        #expect(month.added(to: jan31, in: .tokyo).iso8601 == "2026-02-28T10:00:00Z")
        let mixed = NotifyInterval(months: 0, days: 1, microseconds: 3_600_000_000)
        #expect(mixed.added(to: jan31, in: .tokyo).iso8601 == "2026-02-01T11:00:00Z")
    }
}
