import Chronology
import Foundation
import MatchingTestSupport
import Testing

@testable import Matching

/// The bad day's tools on the in-memory store: the notification pause in the unit commit, abandoning a run
/// that cannot be completed, and resetting progress that is ahead of the store.
@Suite struct OperatorActionTests {
    func seeded() -> InMemoryStore {
        let store = InMemoryStore(now: World.day1)
        store.save([
            World.profile(1, gender: 1), World.profile(10, loginHoursAgo: 5), World.profile(11),
            World.profile(12, residence: 27),
        ])
        store.save([World.filter(100, owner: 1, #"{"residence": {"anyOf": [13]}}"#)])
        return store
    }

    // MARK: - The pause

    @Test func aPausedRunRecordsMatchesAndSendsNothingThenTheNextRunAfterResumeSendsThem() throws {
        let store = seeded()
        try store.pauseNotifications(by: "oncall", reason: "push outage")
        let paused = try World.run(store)
        #expect(paused.counters.matchesWritten == 2 && paused.counters.notificationsWritten == 0)
        #expect(store.allNotifications.isEmpty)
        #expect(
            store.waitingPairs == [MatchPair(filterId: 100, profileId: 10), MatchPair(filterId: 100, profileId: 11)])
        #expect(store.allMatches.allSatisfy { $0.notificationId == nil })

        // Still paused on day 2: a new match waits too.
        store.setClock(World.day2)
        store.save([World.profile(12, residence: 13, at: World.day2)])
        _ = try World.run(store, now: World.day2)
        #expect(store.allNotifications.isEmpty && store.waitingPairs.count == 3)

        try store.resumeNotifications()
        let resumed = try World.run(store, now: World.day2.adding(microseconds: 60_000_000))
        #expect(resumed.counters.notificationsWritten == 1)
        let note = try #require(store.allNotifications.first)
        #expect(note.matchCount == 3 && note.profileIds == [12, 11, 10])
        #expect(store.waitingPairs.isEmpty && store.allMatches.allSatisfy { $0.notificationId == note.id })
    }

    @Test func thePauseHoldsBackNoFilterWithoutIt() throws {
        // The same world, never paused: the first run sends its digest (the pause is what held it back above).
        let store = seeded()
        #expect(try World.run(store).counters.notificationsWritten == 1)
    }

    // MARK: - Abandon

    @Test func anAbandonedRunIsNeverResumedAndTheNextRunStartsAfresh() throws {
        let store = seeded()
        store.failCommit(after: 0)
        #expect(throws: InMemoryCommitFailure.self) { try World.run(store) }
        let failed = try #require(store.allRuns.first)
        #expect(failed.status == .failed)

        let outcome = try #require(try AbandonRun(MatchingRepositories(store: store)).execute(.shard(.all)))
        #expect(outcome.run.id == failed.id && !outcome.alreadyAbandoned)
        #expect(try store.run(id: failed.id)?.status == .abandoned)
        #expect(try AbandonRun(MatchingRepositories(store: store)).execute(.shard(.all)) == nil)
        #expect(try AbandonRun(MatchingRepositories(store: store)).execute(.run(failed.id))?.alreadyAbandoned == true)

        let next = try World.run(store)
        #expect(next.resumedRunId == nil && next.counters.matchesWritten == 2)
        #expect(store.allRuns.map(\.status) == [.abandoned, .succeeded])
        // A succeeded run, or one that does not exist, is refused.
        #expect(throws: OperatorRefusal.self) {
            try AbandonRun(MatchingRepositories(store: store)).execute(.run(next.runId ?? 0))
        }
        #expect(throws: OperatorRefusal.self) { try AbandonRun(MatchingRepositories(store: store)).execute(.run(999)) }
    }

    /// A shard's run that failed after an unsharded run, started while it was still running, succeeded: the
    /// unsharded run covered its owners since, so the shard's next run abandons it rather than considering
    /// its old changes again for its remaining filters.
    @Test func aFailedRunThatANewerRunCoveredSinceIsAbandonedNotResumed() throws {
        let store = InMemoryStore(now: World.day1)
        store.save((1...4).map { World.profile(Int64($0), gender: 1) } + [World.profile(10), World.profile(11)])
        store.save((1...4).map { World.filter(Int64($0) * 100, owner: Int64($0)) })
        let half = try Shard(index: 0, count: 2)
        store.failCommit(after: 1)
        #expect(throws: InMemoryCommitFailure.self) { try World.run(store, shard: half, unitFilterLimit: 1) }
        let failed = try #require(store.allRuns.last)
        #expect(failed.status == .failed)

        // The unsharded run starts while the shard's process still holds its lock: it is not superseded. (Runs of
        // overlapping layouts now start one at a time; binaries before session 35 did not, and a fleet mid-upgrade
        // may mix them.)
        store.letOverlappingLayoutsRunTogether()
        let held = try #require(try store.tryLock(kind: .run, shard: half))
        let whole = try World.run(store, now: World.day2)
        held.release()
        #expect(whole.counters.candidates == 6)
        #expect(try store.run(id: failed.id)?.status == .failed)

        let next = try World.run(store, now: World.day2.adding(microseconds: 60_000_000), shard: half)
        #expect(next.resumedRunId == nil)
        #expect(next.counters.candidates == 0)
        #expect(try store.run(id: failed.id)?.status == .abandoned)
    }

    @Test func aRunWhoseShardLockIsHeldIsNotAbandoned() throws {
        let store = seeded()
        store.failCommit(after: 0)
        #expect(throws: InMemoryCommitFailure.self) { try World.run(store) }
        let held = try #require(try store.tryLock(kind: .run, shard: .all))
        defer { held.release() }
        #expect(throws: RunLocked.self) { try AbandonRun(MatchingRepositories(store: store)).execute(.shard(.all)) }
    }

    // MARK: - Progress reset

    @Test func progressAheadIsRefusedUntilResetThenChangesSinceTheResetTimeAreNew() throws {
        let store = seeded()
        _ = try World.run(store)
        // A restore: the recorded mark is ahead of the store's changes.
        let entry = try #require(try store.coverage().entries.first)
        store.setCoverage(
            Coverage(entries: [
                CoverageEntry(
                    shard: .all, mark: ChangeMark("1000000"),
                    takenAt: entry.takenAt, timeZone: entry.timeZone)
            ]))
        store.setClock(World.day2)
        store.save([World.profile(12, residence: 13, at: World.day2)])
        let refused = #expect(throws: ProgressAhead.self) { try World.run(store, now: World.day2) }
        #expect(refused?.description.contains("matcher progress reset --shard 0/1 --to") == true)
        // The status says so, as PostgreSQL's does (review of session 29: the in-memory one never did).
        let status = try store.serviceStatus(retention: false)
        #expect(status.shards.map(\.progressAhead) == [true])

        let reset = try ResetProgress(MatchingRepositories(store: store)).execute(shard: .all, to: World.day2)
        #expect(reset.after.entries.map(\.mark) == [ChangeMark.resetTo(World.day2)])
        #expect(reset.after.entries.first?.timeZone == "Asia/Tokyo")
        #expect(try store.serviceStatus(retention: false).shards.map(\.progressAhead) == [false])
        let next = try World.run(store, now: World.day2.adding(microseconds: 1))
        #expect(next.counters.candidates == 1 && next.counters.matchesWritten == 1)
        #expect(Set(World.pairs(store).map(\.profileId)) == [10, 11, 12])
        // The next run records a snapshot mark again.
        #expect(try store.coverage().entries.map { ChangeMark.Form($0.mark) } == [.snapshot("2")])
    }

    /// A `--to` after the database's clock (a mistyped year) is refused before anything changes: the next run
    /// would have taken none of the changes recorded until then, and its mark would have counted them as seen.
    @Test func aResetToATimeAfterTheDatabasesClockIsRefused() throws {
        let store = seeded()
        store.failCommit(after: 0)
        #expect(throws: InMemoryCommitFailure.self) { try World.run(store) }
        let coverage = try store.coverage()
        let future = try store.currentTime().adding(days: 365)
        let refused = #expect(throws: OperatorRefusal.self) {
            try ResetProgress(MatchingRepositories(store: store)).execute(shard: .all, to: future)
        }
        #expect(refused?.description.contains("--to \(future.iso8601) is after the database's clock") == true)
        #expect(refused?.failureKind == .usage)
        #expect(try store.coverage() == coverage)
        #expect(store.allRuns.map(\.status) == [.failed], "the interrupted run is not abandoned")
        // The database's own time is accepted.
        let now = try store.currentTime()
        #expect(try ResetProgress(MatchingRepositories(store: store)).execute(shard: .all, to: now).time == now)
    }

    @Test func aResetAbandonsTheShardsInterruptedRun() throws {
        let store = seeded()
        store.failCommit(after: 0)
        #expect(throws: InMemoryCommitFailure.self) { try World.run(store) }
        let reset = try ResetProgress(MatchingRepositories(store: store)).execute(shard: .all, to: World.day1)
        #expect(reset.abandonedRunId == store.allRuns.first?.id)
        #expect(store.allRuns.map(\.status) == [.abandoned])
    }

    @Test func resettingOneShardKeepsOtherLayoutsOwnersCovered() throws {
        let t = World.day1
        let s2 = [try Shard(index: 0, count: 2), try Shard(index: 1, count: 2)]
        let s4 = try Shard(index: 0, count: 4)
        let ahead = ChangeMark("ahead"), fine = ChangeMark("fine")
        let coverage = Coverage(entries: [
            CoverageEntry(shard: s2[0], mark: ahead, takenAt: t, timeZone: "Asia/Tokyo"),
            CoverageEntry(shard: s2[1], mark: fine, takenAt: t, timeZone: "Asia/Tokyo"),
            CoverageEntry(shard: s4, mark: ahead, takenAt: t.adding(microseconds: 1)),
        ])
        let later = t.adding(days: 1)
        let reset = coverage.resetting(s4, to: t, takenAt: later, ahead: [ahead])
        // 0/4 has the reset, newest; 0/2 still covers 2/4 (its mark reset too: it was ahead); 1/2 untouched.
        #expect(reset.entries.map(\.shard) == [s4, s2[0], s2[1]] || reset.entries.map(\.shard) == [s4, s2[1], s2[0]])
        #expect(reset.entries.first { $0.shard == s4 }?.mark == .resetTo(t))
        #expect(reset.entries.first { $0.shard == s4 }?.timeZone == "Asia/Tokyo")
        #expect(reset.entries.first { $0.shard == s2[0] }?.mark == .resetTo(t))
        #expect(reset.entries.first { $0.shard == s2[1] }?.mark == fine)
        #expect(try reset.entries.first { $0.shard == (try Shard(index: 2, count: 4)) } == nil)
        #expect(reset.coversWholly(.all))
        // Resetting the whole drops every entry inside it.
        #expect(coverage.resetting(.all, to: t, takenAt: later, ahead: []).entries.map(\.shard) == [.all])
    }

    /// `matcher reindex`'s report, both ways: the title says what was done and why, the fields give the sizes
    /// and ratios an operator compares, and the JSON holds them as numbers and flags.
    @Test func theRebuildReportSaysWhatWasDoneAndWhy() throws {
        let entries: Int64 = 1_000_000
        let packed = PrimaryKeySize.packedBytes(entries: entries)
        let before = PrimaryKeySize(bytes: 3 * packed, entries: entries)
        #expect(before.ratio == 3)
        let leftAlone = PrimaryKeyRebuild(
            index: "filter_matches_pkey", before: before, after: nil, minimumRatio: 4, droppedLeftovers: [],
            seconds: 0.01)
        let text = ReportRenderer.render(.primaryKeyRebuild(leftAlone), as: .text)
        #expect(text.contains("filter_matches_pkey is 3.00x its packed size, below --min-ratio 4.00; left as it is"))

        let rebuilt = PrimaryKeyRebuild(
            index: "filter_matches_pkey", before: before,
            after: PrimaryKeySize(bytes: packed * 6 / 5, entries: entries),
            minimumRatio: 2, droppedLeftovers: ["filter_matches_pkey_ccnew"], seconds: 8.5)
        let json = ReportRenderer.render(.primaryKeyRebuild(rebuilt), as: .json)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let key = try #require(object["primary_key"] as? [String: Any])
        #expect(key["rebuilt"] as? Bool == true)
        #expect(key["before_bytes"] as? Int == Int(3 * packed))
        #expect(key["packed_bytes"] as? Int == Int(packed))
        // Ratios as numbers and the leftovers as an array (review of session 37: "3.00x", "none").
        #expect(key["ratio_before"] as? Double == 3)
        #expect(key["ratio_after"] as? Double == 1.2)
        #expect(key["min_ratio"] as? Double == 2)
        #expect(key["leftovers_dropped"] as? [String] == ["filter_matches_pkey_ccnew"])
        let leftAloneJSON = ReportRenderer.render(.primaryKeyRebuild(leftAlone), as: .json)
        #expect(leftAloneJSON.contains(#""leftovers_dropped":[]"#))
        // The same keys whether it rebuilt or not (null when not).
        #expect(leftAloneJSON.contains(#""after_bytes":null"#) && leftAloneJSON.contains(#""ratio_after":null"#))
        #expect(!text.contains("After"))
        let rebuiltText = ReportRenderer.render(.primaryKeyRebuild(rebuilt), as: .text)
        #expect(rebuiltText.contains("filter_matches_pkey rebuilt"))
        #expect(rebuiltText.contains("3.00x") && rebuiltText.contains("1.20x"))
        #expect(text.contains("none"))
    }
}
