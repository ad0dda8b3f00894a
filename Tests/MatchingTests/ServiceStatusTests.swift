import Chronology
import Foundation
import MatchingTestSupport
import Testing

@testable import Matching

/// `matcher status` as people and scripts read it: golden text and JSON for a healthy service, a failed shard,
/// a paused service and a lagging shard, from the in-memory store on a fixed clock (`Golden/`; set
/// MATCHER_UPDATE_GOLDEN=1 to rewrite them after a deliberate change, then read the diff).
@Suite struct ServiceStatusTests {
    /// Owner 1 searches women in Tokyo; owner 2 too (so shards 1/2 and 0/2 both have a filter).
    static func world() -> InMemoryStore {
        let store = InMemoryStore(now: World.day1)
        store.save([
            World.profile(1, gender: 1), World.profile(2, gender: 1),
            World.profile(10, loginHoursAgo: 5), World.profile(11), World.profile(12, residence: 27),
        ])
        store.save([
            World.filter(100, owner: 1, #"{"residence": {"anyOf": [13]}}"#),
            World.filter(200, owner: 2, #"{"gender": {"anyOf": [2]}}"#, notify: false),
            World.filter(300, owner: 2, #"{"age": {"min": 40, "max": 30}}"#),
        ])
        return store
    }

    static let hour: Int64 = 3_600_000_000

    @Test func healthy() throws {
        let store = Self.world()
        _ = try World.run(store)
        store.setClock(World.day1.adding(microseconds: 2 * Self.hour))
        let status = try store.serviceStatus()
        #expect(status.state(of: try #require(status.shard(.all))) == .ok)
        // Filter 100 was notified; filter 200 (notify off) records its matches without listing them as waiting.
        #expect(status.invalidFilters == 1 && status.digests.matches == 0 && status.digests.notNotifiable == 0)
        try Self.golden("healthy", status)
    }

    @Test func failedShard() throws {
        let store = Self.world()
        let halves = [try Shard(index: 0, count: 2), try Shard(index: 1, count: 2)]
        for shard in halves { _ = try World.run(store, shard: shard) }
        store.setClock(World.day2)
        store.save([World.profile(12, residence: 13, at: World.day2)])
        _ = try World.run(store, now: World.day2, shard: halves[0])
        store.failCommit(after: 0)
        #expect(throws: InMemoryCommitFailure.self) { try World.run(store, now: World.day2, shard: halves[1]) }
        store.setClock(World.day2.adding(microseconds: Self.hour))
        let status = try store.serviceStatus()
        #expect(status.state(of: try #require(status.shard(halves[1]))) == .failing)
        #expect(status.state(of: try #require(status.shard(halves[0]))) == .ok)
        try Self.golden("failed-shard", status)
    }

    @Test func paused() throws {
        let store = Self.world()
        try store.pauseNotifications(by: "oncall", reason: "APNs outage, INC-123")
        _ = try World.run(store)
        store.setClock(World.day1.adding(microseconds: 5 * Self.hour))
        let status = try store.serviceStatus()
        #expect(status.notificationPause?.reason == "APNs outage, INC-123")
        #expect(
            status.digests.matches == 3 && status.digests.filters == 1 && status.digests.oldestMatchedAt == World.day1)
        try Self.golden("paused", status)
    }

    @Test func lagging() throws {
        let store = Self.world()
        _ = try World.run(store)
        store.setClock(World.day1.adding(days: 3).adding(microseconds: 4 * Self.hour))
        let status = try store.serviceStatus()
        let shard = try #require(status.shard(.all))
        #expect(status.state(of: shard) == .lagging)
        #expect(status.lagSeconds(of: shard) == Int64(76 * 3_600))
        try Self.golden("lagging", status)
    }

    /// A shard that no timer starts after a reshard: its owners are covered only by the old layout's entry,
    /// whose last success every other shard's run exports (`matcher_stalest_shard_success_clock_timestamp_seconds`).
    @Test func theStalestShardIsTheOneNoTimerStarts() throws {
        let store = Self.world()
        for index in 0..<2 { _ = try World.run(store, shard: try Shard(index: index, count: 2)) }
        var status = try store.serviceStatus()
        #expect(status.stalestLagSeconds == 0)
        // Four shards from day 2, but 3/4 never runs: 1/2's entry still covers its owners.
        for day in 1...3 {
            let clock = World.day1.adding(days: day)
            store.setClock(clock)
            for index in [0, 1, 2] { _ = try World.run(store, now: clock, shard: try Shard(index: index, count: 4)) }
        }
        store.setClock(World.day1.adding(days: 3).adding(microseconds: Self.hour))
        status = try store.serviceStatus()
        #expect(status.stalestLagSeconds == Int64(3 * 24 * 3_600 + 3_600))
        // Once 3/4 runs, the old layout is folded into the new one and nothing lags.
        _ = try World.run(store, now: World.day1.adding(days: 3), shard: try Shard(index: 3, count: 4))
        status = try store.serviceStatus()
        #expect(status.stalestLagSeconds == 3_600)
    }

    /// A run stopped by SIGTERM (a shutdown, `systemctl stop`) is `stopped`, not `failing` (review of session 23:
    /// the runbook calls it routine, and status called it a failure).
    @Test func aRunStoppedOnRequestIsStoppedNotFailing() throws {
        let store = Self.world()
        // The signal arrives while the run reads: it stops at the next phase, its run recorded.
        let output = RunMatchingTests.StopWhenPhaseStarts(.read)
        #expect(throws: RunStopped.self) {
            try RunMatching(MatchingRepositories(store: store), output: output, options: PassOptions(stop: output.stop))
                .execute(.init(now: World.day1))
        }
        let status = try store.serviceStatus()
        let shard = try #require(status.shard(.all))
        #expect(status.state(of: shard) == .stopped)
        // Its run, too, reads as stopped (review of session 37: listed "failed", which a script counted as a
        // failure): `stopped` in the JSON beside the stored status, and the text's state.
        let brief = try #require(shard.runsSince.last)
        #expect(brief.status == .failed && brief.isStopped)
        #expect(status.json.contains(#""status": "failed""#) && status.json.contains(#""stopped": true"#))
        let text = ReportRenderer.render(.serviceStatus(status), as: .text)
        let runLine = try #require(
            text.split(separator: "\n").first { $0.contains("#\(brief.id)") && $0.contains("SIGTERM") })
        #expect(runLine.contains("stopped") && !runLine.contains("failed"), "\(runLine)")
        _ = try World.run(store)
        let after = try store.serviceStatus()
        #expect(after.state(of: try #require(after.shard(.all))) == .ok)
    }

    /// Review of session 33: a shard whose run is stopped every day (its unit's time limit) said `stopped`, routine,
    /// while its last success fell past the 26 h the alerts page at. Past that, it is `lagging`.
    @Test func aShardStoppedDayAfterDayIsLagging() throws {
        let store = Self.world()
        _ = try World.run(store)
        let clock = World.day1.adding(days: 2)
        store.setClock(clock)
        let output = RunMatchingTests.StopWhenPhaseStarts(.read)
        #expect(throws: RunStopped.self) {
            try RunMatching(MatchingRepositories(store: store), output: output, options: PassOptions(stop: output.stop))
                .execute(.init(now: clock))
        }
        let status = try store.serviceStatus()
        let shard = try #require(status.shard(.all))
        #expect(status.state(of: shard) == .lagging)
        #expect(status.lagSeconds(of: shard) == Int64(48 * 3_600))
    }

    /// A shard whose first run is stopped day after day (a large first run under a two-hour limit) is `stopped` for a
    /// day, then `never_succeeded`, as MatcherNeverSucceeded pages.
    @Test func aFirstRunStoppedForMoreThanADayIsNeverSucceeded() throws {
        let store = Self.world()
        let output = RunMatchingTests.StopWhenPhaseStarts(.read)
        #expect(throws: RunStopped.self) {
            try RunMatching(MatchingRepositories(store: store), output: output, options: PassOptions(stop: output.stop))
                .execute(.init(now: World.day1))
        }
        var status = try store.serviceStatus()
        #expect(status.state(of: try #require(status.shard(.all))) == .stopped)
        store.setClock(World.day1.adding(days: 2))
        status = try store.serviceStatus()
        #expect(status.state(of: try #require(status.shard(.all))) == .neverSucceeded)
    }

    /// A run whose process died (no one holds the shard's lock) is `interrupted` while the shard is within its lag,
    /// `lagging` past it.
    @Test func anInterruptedRunIsInterruptedUntilTheShardLags() throws {
        let store = Self.world()
        _ = try World.run(store)
        let clock = World.day1.adding(days: 1)
        _ = try store.start(
            NewRun(
                kind: .run, shard: .all, clock: clock, maxPerFilter: 100, writesNotifications: true, coverage: nil,
                upTo: nil, upToTakenAt: nil, timeZone: "Asia/Tokyo", retentionDays: 30, parameters: "{}",
                candidates: 0))
        store.setClock(clock)
        var status = try store.serviceStatus()
        #expect(status.state(of: try #require(status.shard(.all))) == .interrupted)
        store.setClock(World.day1.adding(days: 2))
        status = try store.serviceStatus()
        #expect(status.state(of: try #require(status.shard(.all))) == .lagging)
    }

    /// An abandoned run shows until a success covers its owners again, also for a shard with no progress of its
    /// own: a new installation's first run, or a new layout's shard (review of session 36: status said "(none)").
    @Test func anAbandonedRunShowsUntilASuccessCoversItsOwners() throws {
        func abandonedRun(_ store: InMemoryStore, _ shard: Shard, at clock: Timestamp) throws -> Int64 {
            store.setClock(clock)
            let run = try store.start(
                NewRun(
                    kind: .run, shard: shard, clock: clock, maxPerFilter: 100, writesNotifications: true,
                    coverage: nil, upTo: nil, upToTakenAt: nil, timeZone: "Asia/Tokyo", retentionDays: 30,
                    parameters: "{}", candidates: 0))
            try store.fail(
                runId: run.id, owner: run.owner, error: RunStopped(reason: "SIGTERM", runId: run.id).description)
            try store.abandon(runId: run.id)
            return run.id
        }
        let fresh = Self.world()
        let first = try abandonedRun(fresh, .all, at: World.day1)
        var status = try fresh.serviceStatus()
        let all = try #require(status.shard(.all))
        #expect(all.runsSince.map(\.id) == [first] && all.runsSince.first?.status == .abandoned)
        #expect(status.state(of: all) == .neverSucceeded)
        // Its error said the next run resumes it: no longer so, and the text says whose error it was.
        let text = ReportRenderer.render(.serviceStatus(status), as: .text)
        #expect(text.contains("abandoned") && text.contains("before it was abandoned: stopped at"), "\(text)")
        _ = try World.run(fresh, now: World.day1.adding(microseconds: 60_000_000))
        status = try fresh.serviceStatus()
        #expect(try #require(status.shard(.all)).runsSince.isEmpty)

        // A new layout's shard: 1/4 abandoned after an unsharded success; shown until 0/2 and 1/2 have succeeded.
        let store = Self.world()
        _ = try World.run(store)
        let quarter = try Shard(index: 1, count: 4)
        let abandoned = try abandonedRun(store, quarter, at: World.day2)
        status = try store.serviceStatus()
        #expect(try #require(status.shard(quarter)).runsSince.map(\.id) == [abandoned])
        _ = try World.run(store, now: World.day2.adding(microseconds: 60_000_000), shard: try Shard(index: 0, count: 2))
        #expect(try store.serviceStatus().shard(quarter) != nil)
        _ = try World.run(
            store, now: World.day2.adding(microseconds: 120_000_000), shard: try Shard(index: 1, count: 2))
        #expect(try store.serviceStatus().shard(quarter) == nil)
    }

    @Test func durationsReadAsPeopleSayThem() {
        #expect(Report.duration(0) == "0s")
        #expect(Report.duration(59) == "59s")
        #expect(Report.duration(3_661) == "1h 1m")
        #expect(Report.duration(80 * 3_600) == "3d 8h")
        #expect(Report.duration(-90) == "-1m 30s")
        #expect(Report.duration(.min).hasPrefix("-"))
    }

    /// The marks' line says where they landed, and what to do only when there are enough of them and most moved.
    @Test func marksSayWhereTheyLandedAndWhatToDo() {
        let daily = MarkPlacement(marks: 451_914, inPlace: 448_778, fillfactor: 90)
        #expect(Report.marks(daily) == "451914 since statistics reset, 99.3 % in place (HOT), fillfactor 90")
        let hourly = Report.marks(MarkPlacement(marks: 6_539_064, inPlace: 1_812_251, fillfactor: 90))
        #expect(hourly.hasPrefix("6539064 since statistics reset, 27.7 % in place (HOT), fillfactor 90; most move"))
        #expect(hourly.hasSuffix("set fillfactor 50 (deploy/README.md)"))
        // Once the fillfactor is lowered, the counts since the reset still hold the earlier marks: no advice to set it.
        let lowered = Report.marks(MarkPlacement(marks: 6_539_064, inPlace: 1_812_251, fillfactor: 50))
        #expect(!lowered.contains("set fillfactor 50") && lowered.contains("pg_stat_reset_single_table_counters"))
        let few = MarkPlacement(marks: 9_000, inPlace: 100, fillfactor: 90)
        #expect(!few.mostMove && !Report.marks(few).contains("most move"))
        let none = MarkPlacement(marks: 0, inPlace: 0, fillfactor: 90)
        #expect(none.inPlaceShare == nil && Report.marks(none) == "none since statistics reset, fillfactor 90")
    }

    /// Compares the text and the JSON with `Golden/NAME.txt` and `Golden/NAME.json`.
    static func golden(
        _ name: String, _ status: ServiceStatus, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Golden")
        let outputs = [
            ("txt", ReportRenderer.render(.serviceStatus(status), as: .text) + "\n"), ("json", status.json + "\n"),
        ]
        for (ext, actual) in outputs {
            let file = folder.appendingPathComponent("\(name).\(ext)")
            if ProcessInfo.processInfo.environment["MATCHER_UPDATE_GOLDEN"] == "1" {
                // A run that rewrites the files compares nothing: it never counts as a pass.
                try Data(actual.utf8).write(to: file)
                Issue.record("\(file.lastPathComponent) rewritten; run the tests again without MATCHER_UPDATE_GOLDEN")
                continue
            }
            let expected = try String(contentsOf: file, encoding: .utf8)
            #expect(actual == expected, "\(file.lastPathComponent) differs:\n\(actual)", sourceLocation: sourceLocation)
        }
        // The JSON parses, and its keys are snake_case.
        let json = try JSONSerialization.jsonObject(with: Data(status.json.utf8))
        #expect(Self.keys(json).allSatisfy { $0.allSatisfy { $0.isLowercase || $0.isNumber || $0 == "_" } })
    }

    static func keys(_ value: Any) -> [String] {
        if let object = value as? [String: Any] { return object.keys + object.values.flatMap(keys) }
        if let array = value as? [Any] { return array.flatMap(keys) }
        return []
    }

    /// Status's rule for a suspended filter, by its keys alone (as the PostgreSQL query has it).
    @Test func aFilterWhoseKeysAllNeedAPlanTheOwnerLacksIsSuspended() {
        let free = Profile.Plan.free
        #expect(InMemoryStore.allKeysNeedAPlan(#"{"communities": {"anyOf": [3]}}"#, above: free))
        #expect(InMemoryStore.allKeysNeedAPlan(#"{"communities": "x"}"#, above: free), "values do not count")
        #expect(InMemoryStore.allKeysNeedAPlan(#"{"communities": "x"}"#, above: -3), "below 0 is free")
        #expect(!InMemoryStore.allKeysNeedAPlan(#"{"communities": "x"}"#, above: Profile.Plan.paid))
        #expect(!InMemoryStore.allKeysNeedAPlan(#"{"communities": "x", "gender": {"anyOf": [2]}}"#, above: free))
        #expect(!InMemoryStore.allKeysNeedAPlan(#"{"communities": "x", "bogus": 1}"#, above: free), "unknown key")
        #expect(!InMemoryStore.allKeysNeedAPlan("{}", above: free), "an empty filter matches everyone")
        #expect(!InMemoryStore.allKeysNeedAPlan("[1]", above: free))
        #expect(!InMemoryStore.allKeysNeedAPlan("null", above: free))
        #expect(!InMemoryStore.allKeysNeedAPlan("{", above: free))
    }
}
