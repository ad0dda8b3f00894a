import Chronology
import Foundation
import Matching
import MatchingPostgres
import PostgresClient
import PostgresTestSupport
import Testing

/// The PostgreSQL unit of work on its own: the fast path (matches written once, already marked) and the
/// fallback when another writer recorded one of the unit's pairs after the run read the table.
@Suite struct UnitOfWorkTests {
    let clock = EvaluationClock(now: ScenarioWorld.day1)

    func setUp() throws -> (Twin, RunRecord, NotificationCandidateFilter) {
        let twin = try Twin()
        try twin.writer.upsertProfiles(
            [ScenarioWorldProfiles.man(1)] + (2...4).map { ScenarioWorldProfiles.woman($0) },
            updatedAt: ScenarioWorld.day1)
        let filter = SavedFilter(
            id: 10, ownerId: 1, conditionsJSON: #"{"gender": {"anyOf": [2]}}"#,
            createdAt: ScenarioWorld.day1, updatedAt: ScenarioWorld.day1)
        try twin.writer.upsertFilters([filter])
        let run = try twin.postgres.start(
            NewRun(
                kind: .run, shard: .all, clock: ScenarioWorld.day1, maxPerFilter: 100,
                writesNotifications: true, coverage: nil, upTo: nil,
                upToTakenAt: nil, timeZone: "Asia/Tokyo", retentionDays: 180,
                parameters: "{}", candidates: 3))
        return (twin, run, NotificationCandidateFilter(filter: filter, owner: FilterOwner(id: 1, status: 1, plan: 0)))
    }

    func unit(
        _ run: RunRecord, _ notify: NotificationCandidateFilter, _ ids: [Int64], bulk: Bool = false
    ) -> WorkUnit {
        WorkUnit(
            runId: run.id, clock: clock, lastFilterId: 10, matches: [FilterResult(filterId: 10, profileIds: ids)],
            notify: [notify], filterCounters: RunCounters(filtersEvaluated: 1),
            lastLoginAt: Dictionary(uniqueKeysWithValues: ids.map { ($0, ScenarioWorld.day1) }), bulk: bulk,
            runOwner: run.owner)
    }

    /// The profile ids of filter 10's bulk list row at the unit's clock, and the pairs recorded with `bulk` set.
    private func bulkListed(_ twin: Twin) throws -> (listed: [Int64], recorded: [Int64]) {
        let rows = try twin.connection.query(
            "SELECT profile_ids FROM matcher_bulk_matches WHERE filter_id = 10 AND matched_at = $1",
            [.timestamptz(clock.now)]
        ).rows
        let listed = try rows.first.map { try $0.int64Array(0) } ?? []
        let recorded = try twin.connection.query(
            "SELECT profile_id FROM filter_matches WHERE filter_id = 10 AND bulk ORDER BY profile_id"
        ).rows.map { try $0.int64(0) }
        return (listed, recorded)
    }

    @Test func pairsRecordedInBulkAreListedOnceByFilterAndClock() throws {
        let (twin, run, notify) = try setUp()
        // Another writer recorded (10, 3) pair by pair after this run read the table: the unit falls back, and
        // lists only what it recorded itself.
        try twin.connection.query(
            "INSERT INTO filter_matches (filter_id, profile_id, matched_at) VALUES (10, 3, $1)",
            [.timestamptz(ScenarioWorld.day1)])
        let first = try twin.postgres.commit(unit(run, notify, [2, 3], bulk: true), planner: NotificationPlanner())
        #expect(first.matchesWritten == 1)
        #expect(try bulkListed(twin) == ([2], [2]))
        // A second unit of the same filter at the same clock (a retried unit of a run with the same clock) joins
        // the filter's row, in order; the fast path lists what it copied.
        let second = try twin.postgres.commit(unit(run, notify, [4], bulk: true), planner: NotificationPlanner())
        #expect(second.matchesWritten == 1)
        #expect(try bulkListed(twin) == ([2, 4], [2, 4]))
        // A unit not in bulk lists nothing.
        try twin.writer.upsertProfiles([ScenarioWorldProfiles.woman(5)], updatedAt: ScenarioWorld.day1)
        _ = try twin.postgres.commit(unit(run, notify, [5]), planner: NotificationPlanner())
        #expect(try bulkListed(twin) == ([2, 4], [2, 4]))
        #expect(try twin.postgres.matches(filterId: 10).map(\.profileId) == [2, 3, 4, 5])
    }

    /// Review of session 33: a unit's marks go in statements of at most `marksPerStatement` pairs (one array of 100k
    /// made the planner hash the whole table: docs/decisions.md, the plans measured). What this checks is the
    /// seams: across three statements every pair is marked once, with its own digest and mutual flag, and leaves
    /// the waiting list; a pair not marked stays as it was.
    @Test func marksOfMoreThanOneStatementAreEachWrittenOnce() throws {
        let (twin, _, _) = try setUp()
        let count: Int64 = 25_001
        try twin.connection.query(
            """
            INSERT INTO filter_matches (filter_id, profile_id, matched_at)
            SELECT 10 + i % 3, i, $1 FROM generate_series(1, $2::bigint + 1) AS i
            """, [.timestamptz(ScenarioWorld.day1), .int8(count)])
        try twin.connection.query(
            """
            INSERT INTO matcher_waiting_matches (filter_id, profile_id, matched_at)
            SELECT filter_id, profile_id, matched_at FROM filter_matches
            """)
        let pairs = (1...count).map { MatchPair(filterId: 10 + $0 % 3, profileId: $0) }
        let marks = Dictionary(uniqueKeysWithValues: pairs.map { ($0, 100 + $0.profileId % 7) })
        let mutual = Set(pairs.filter { $0.profileId % 5 == 0 })
        try twin.postgres.withUnitTransaction { tx in try tx.markNotified(marks, mutual: mutual) }
        let wrong = try twin.connection.query(
            """
            SELECT count(*) FROM filter_matches
            WHERE profile_id <= $1 AND (notification_id IS DISTINCT FROM 100 + profile_id % 7
                                        OR mutual <> (profile_id % 5 = 0))
            """, [.int8(count)]
        ).rows[0].int64(0)
        #expect(wrong == 0)
        let unmarked = try twin.connection.query(
            "SELECT profile_id, notification_id IS NULL FROM filter_matches WHERE profile_id > $1", [.int8(count)]
        ).rows.map { "\(try $0.int64(0)) \(try $0.bool(1))" }
        #expect(unmarked == ["\(count + 1) true"])
        let waiting = try twin.connection.query("SELECT profile_id FROM matcher_waiting_matches").rows.map {
            try $0.int64(0)
        }
        #expect(waiting == [count + 1])
    }

    @Test func newMatchesAreWrittenOnceAlreadyNotified() throws {
        let (twin, run, notify) = try setUp()
        let outcome = try twin.postgres.commit(unit(run, notify, [4, 2, 3]), planner: NotificationPlanner())
        #expect(outcome == WorkUnitOutcome(matchesWritten: 3, notificationsWritten: 1))
        let notes = try twin.postgres.notifications(filterId: 10)
        #expect(notes.map(\.profileIds) == [[2, 3, 4]])
        #expect(try twin.postgres.matches(filterId: 10).allSatisfy { $0.notificationId == notes.first?.id })
        let counters = try #require(try twin.postgres.run(id: run.id)).counters
        #expect(counters.matchesWritten == 3 && counters.notificationsWritten == 1 && counters.filtersEvaluated == 1)
    }

    /// A new match its digest cannot count (the profile was hidden after the run read it) waits, not passed over,
    /// whether or not another writer recorded one of the unit's pairs meanwhile (review of session 23: the
    /// fallback marked it passed over, which lets retention forget it while it waits; the common path did not).
    @Test(arguments: [false, true])
    func aNewMatchHiddenBeforeItsDigestWaitsOnEitherPath(recordedMeanwhile: Bool) throws {
        let (twin, run, notify) = try setUp()
        if recordedMeanwhile {
            try twin.connection.query(
                "INSERT INTO filter_matches (filter_id, profile_id, matched_at) VALUES (10, 3, $1)",
                [.timestamptz(ScenarioWorld.day1)])
        }
        try twin.connection.execute("UPDATE profiles SET status = 2 WHERE id = 4")
        let outcome = try twin.postgres.commit(unit(run, notify, [2, 3, 4]), planner: NotificationPlanner())
        #expect(outcome.notificationsWritten == 1)
        let notes = try twin.postgres.notifications(filterId: 10)
        #expect(notes.first.map { Set($0.profileIds) } == (recordedMeanwhile ? [2] : [2, 3]))
        let entry = try twin.connection.query(
            "SELECT passed_over FROM matcher_waiting_matches WHERE filter_id = 10 AND profile_id = 4"
        ).rows.first
        #expect(try entry?.bool(0) == false, "listed waiting, not passed over")
    }

    /// A unit that decides a digest (filter 10) and records matches of a notify-off filter (20) notes filter 20,
    /// whether or not another writer recorded one of filter 20's pairs meanwhile (the fallback path), and lists
    /// none of its matches as waiting.
    @Test(arguments: [false, true])
    func aUnitNotesTheNotifyOffFilterItRecordsForOnEitherPath(recordedMeanwhile: Bool) throws {
        let (twin, run, notify) = try setUp()
        let off = SavedFilter(
            id: 20, ownerId: 1, conditionsJSON: #"{"gender": {"anyOf": [2]}}"#, notify: false,
            createdAt: ScenarioWorld.day1, updatedAt: ScenarioWorld.day1)
        try twin.writer.upsertFilters([off])
        if recordedMeanwhile {
            try twin.connection.query(
                "INSERT INTO filter_matches (filter_id, profile_id, matched_at) VALUES (20, 3, $1)",
                [.timestamptz(ScenarioWorld.day1)])
        }
        let both = WorkUnit(
            runId: run.id, clock: clock, lastFilterId: 20,
            matches: [
                FilterResult(filterId: 10, profileIds: [2, 3]), FilterResult(filterId: 20, profileIds: [2, 3]),
            ],
            notify: [notify, NotificationCandidateFilter(filter: off, owner: FilterOwner(id: 1, status: 1, plan: 0))],
            filterCounters: RunCounters(filtersEvaluated: 2),
            lastLoginAt: [2: ScenarioWorld.day1, 3: ScenarioWorld.day1], runOwner: run.owner)
        let outcome = try twin.postgres.commit(both, planner: NotificationPlanner())
        #expect(outcome.matchesWritten == (recordedMeanwhile ? 3 : 4) && outcome.notificationsWritten == 1)
        let note = try twin.connection.query(
            "SELECT filter_id, unlisted_from = $1 FROM matcher_filter_state WHERE unlisted_from IS NOT NULL",
            [.timestamptz(ScenarioWorld.day1)]
        ).rows.map { "\(try $0.int64(0)) \(try $0.bool(1))" }
        #expect(note == ["20 true"])
        let listed = try twin.connection.query("SELECT count(*) FROM matcher_waiting_matches WHERE filter_id = 20")
            .rows[0].int64(0)
        #expect(listed == 0)
    }

    @Test func aPairRecordedMeanwhileFallsBackAndIsNeitherDuplicatedNorNotifiedTwice() throws {
        let (twin, run, notify) = try setUp()
        // Another writer (a backfill with --notify) recorded (10, 3) after this run read the table.
        try twin.connection.query(
            """
            INSERT INTO filter_matches (filter_id, profile_id, matched_at) VALUES (10, 3, $1)
            """, [.timestamptz(ScenarioWorld.day1)])
        try twin.connection.query(
            """
            INSERT INTO matcher_waiting_matches (filter_id, profile_id, matched_at) VALUES (10, 3, $1)
            """, [.timestamptz(ScenarioWorld.day1)])
        let outcome = try twin.postgres.commit(unit(run, notify, [2, 3]), planner: NotificationPlanner())
        #expect(outcome == WorkUnitOutcome(matchesWritten: 1, notificationsWritten: 1))
        let matches = try twin.postgres.matches(filterId: 10)
        #expect(matches.map(\.profileId) == [2, 3])
        let note = try #require(try twin.postgres.notifications(filterId: 10).first)
        #expect(note.matchCount == 2)
        #expect(matches.allSatisfy { $0.notificationId == note.id })
        // Nothing is waiting, and a second unit for the same filter the same day notifies nothing.
        let again = try twin.postgres.commit(unit(run, notify, [4]), planner: NotificationPlanner())
        #expect(again == WorkUnitOutcome(matchesWritten: 1, notificationsWritten: 0))
        #expect(try twin.postgres.notifications(filterId: 10).count == 1)
    }

    @Test func recordedPairsProbesOnlyTheGivenPairsWhateverTheirNumber() throws {
        let (twin, run, notify) = try setUp()
        _ = try twin.postgres.commit(unit(run, notify, [2, 3, 4]), planner: NotificationPlanner())
        // More pairs than one probe takes, most of them never recorded, spread over filter-id ranges that hold
        // no pair at all (skipped with one index descent each).
        let many: [MatchPair] = (3...120_003).map { (n: Int) -> MatchPair in
            let filterId: Int64 = n % 7 == 0 ? 10 : Int64(n) * 100
            return MatchPair(filterId: filterId, profileId: Int64(n % 5) + 100)
        }
        let recorded = [MatchPair(filterId: 10, profileId: 3), MatchPair(filterId: 10, profileId: 4)]
        #expect(
            try twin.postgres.recordedPairs(among: many + recorded, forgottenBefore: nil).kept
                == [MatchPair(filterId: 10, profileId: 3), MatchPair(filterId: 10, profileId: 4)])
        #expect(
            try twin.postgres.recordedPairs(among: [MatchPair(filterId: 10, profileId: 2)], forgottenBefore: nil).kept
                == [MatchPair(filterId: 10, profileId: 2)])
        #expect(try twin.postgres.recordedPairs(among: [], forgottenBefore: nil).kept.isEmpty)
    }

    /// The blocks of some profiles, looked up by them (a table much larger than the ids: by index probes, or by
    /// one scan when the ids are many) or streamed and kept: the same answer every way, never a block without a
    /// side among the ids, a block between two of them once.
    @Test func blocksInvolvingIdsAreTheSameByLookupAndByStream() throws {
        let twin = try Twin()
        let blocks =
            (1...300).map { Block(blockerId: Int64($0), blockedId: Int64(1_000 + $0 % 7)) }
            + [Block(blockerId: 500_000, blockedId: 600_000), Block(blockerId: 1_003, blockedId: 2)]
        try twin.writer.insertBlocks(blocks)
        try twin.connection.execute("ANALYZE blocks")  // 302 rows: three ids are looked up, 100,003 stream it
        let few: [Int64] = [2, 3, 1_003]
        let expected = BlockSet(
            blocks.filter { few.contains($0.blockerId) || few.contains($0.blockedId) }
                .map { (blocker: $0.blockerId, blocked: $0.blockedId) })
        #expect(expected.count == 2 + 43)  // 2 and 3 blocked 1_002 and 1_003; 1_003 blocked 2; 42 blocked 1_003
        #expect(try twin.postgres.blocks(involving: few) == expected)  // two index probes an id
        // 23 ids: looked up (302 rows > 8 an id), by one scan (302 rows < 40 an id).
        let some = few + (9_000..<Int64(9_020))
        #expect(try twin.postgres.blocks(involving: some) == expected)
        let many = few + (5_000..<Int64(5_000 + PostgresMatchingStore.blockLookupLimit))
        #expect(try twin.postgres.blocks(involving: many) == expected)
        #expect(try twin.postgres.blocks(involving: nil).count == blocks.count)
        #expect(try twin.postgres.blocks(involving: []).count == 0)
    }

    /// The run's unlocked reading of the digest times: a filter's recorded time after its unit's digest,
    /// nothing for a filter without one (a state row whose time is NULL, or none at all).
    @Test func lastNotifiedGivesTheRecordedDigestTimes() throws {
        let (twin, run, notify) = try setUp()
        #expect(try twin.postgres.lastNotified(filterIds: [10, 11, 12]).isEmpty)
        _ = try twin.postgres.commit(unit(run, notify, [2]), planner: NotificationPlanner())
        try twin.connection.query("INSERT INTO matcher_filter_state (filter_id, last_notified_at) VALUES (11, NULL)")
        try twin.connection.query(
            "INSERT INTO matcher_filter_state (filter_id, last_notified_at) VALUES (13, $1)",
            [.timestamptz(ScenarioWorld.day1)])
        #expect(try twin.postgres.lastNotified(filterIds: [10, 11, 12]) == [10: ScenarioWorld.day1])
        #expect(try twin.postgres.lastNotified(filterIds: []).isEmpty)
    }

    @Test func aNotifiedMatchIsMarkedInPlaceAndLeavesTheWaitingList() throws {
        let (twin, run, notify) = try setUp()
        // Recorded while its filter was not due: waiting.
        try twin.connection.query(
            "INSERT INTO matcher_filter_state (filter_id, last_notified_at) VALUES (10, $1)",
            [.timestamptz(ScenarioWorld.day1)])
        let first = try twin.postgres.commit(unit(run, notify, [2, 3]), planner: NotificationPlanner())
        #expect(first == WorkUnitOutcome(matchesWritten: 2, notificationsWritten: 0))
        let waiting = try twin.connection.query("SELECT count(*) FROM matcher_waiting_matches").rows[0].int64(0)
        #expect(waiting == 2)
        // A day later the filter is due: both are marked with a HOT update (no index reads notification_id).
        let later = WorkUnit(
            runId: run.id, clock: EvaluationClock(now: ScenarioWorld.day1.adding(days: 1)),
            lastFilterId: 10, matches: [], notify: [notify], filterCounters: .zero, runOwner: run.owner)
        let second = try twin.postgres.commit(later, planner: NotificationPlanner())
        #expect(second == WorkUnitOutcome(matchesWritten: 0, notificationsWritten: 1))
        let left = try twin.connection.query("SELECT count(*) FROM matcher_waiting_matches").rows[0].int64(0)
        #expect(left == 0)
        let indexed = try twin.connection.query(
            """
            SELECT count(*) FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
            WHERE i.indrelid = 'filter_matches'::regclass AND a.attname IN ('notification_id', 'mutual', 'silent')
            """
        ).rows[0].int64(0)
        #expect(indexed == 0)
        // The one partial index (the retention index) reads `bulk`, which is never updated.
        let predicates = try twin.connection.query(
            """
            SELECT pg_get_expr(indpred, indrelid) FROM pg_index
            WHERE indrelid = 'filter_matches'::regclass AND indpred IS NOT NULL
            """
        ).rows.map { try $0.string(0) }
        #expect(predicates == ["(NOT bulk)"])
    }

    /// Review of session 37: a failed run being completed by a live process was shown "failed" (its shard
    /// "failing") by `matcher status` for the whole completion. A claim makes it running again, its error and end
    /// cleared, in both stores; the status then shows the shard running.
    @Test(arguments: [true, false]) func aClaimedFailedRunIsRunningAgain(postgres: Bool) throws {
        let (twin, pgRun, _) = try setUp()
        let store: any MatchRepository & RunRepository = postgres ? twin.postgres : twin.memory
        let statuses: any StatusRepository =
            postgres ? PostgresStatusRepository(connection: twin.connection) : twin.memory
        let run =
            postgres
            ? pgRun
            : try twin.memory.start(
                NewRun(
                    kind: .run, shard: .all, clock: ScenarioWorld.day1, maxPerFilter: 100, writesNotifications: true,
                    coverage: nil, upTo: nil, upToTakenAt: nil, timeZone: "Asia/Tokyo", retentionDays: 180,
                    parameters: "{}", candidates: 3))
        try store.fail(runId: run.id, owner: run.owner, error: "statement timeout")
        #expect(try store.run(id: run.id)?.status == .failed)
        let failing = try statuses.serviceStatus(retention: false, digestsOf: .all)
        let before = try #require(failing.shard(.all))
        #expect(failing.state(of: before) == .failing)
        // The completing process holds the shard's run lock, as `RunMatching` takes it before it claims.
        let lock = try #require(try store.tryLock(kind: .run, shard: .all))
        defer { lock.release() }
        _ = try #require(try store.claim(runId: run.id))
        #expect(try store.run(id: run.id)?.status == .running)
        let status = try statuses.serviceStatus(retention: false, digestsOf: .all)
        let shard = try #require(status.shard(.all))
        let brief = try #require(shard.runsSince.first { $0.id == run.id })
        #expect(brief.status == .running && brief.error == nil && brief.finishedAt == nil)
        #expect(status.state(of: shard) == .running)
    }

    /// Found by review in session 28: a process whose run lock was lost (its session ended from outside: an
    /// idle-session killer, `pg_terminate_backend`) went on writing units while the next process completed the
    /// same run. A run is now written only by its owner: a claim moves it, the former owner's next unit rolls
    /// back with `RunTakenOver`, and it can neither finish the run nor mark it failed. In both stores.
    @Test(arguments: [true, false]) func aUnitOfARunAnotherProcessClaimedRollsBack(postgres: Bool) throws {
        let (twin, pgRun, notify) = try setUp()
        let store: any MatchRepository & RunRepository = postgres ? twin.postgres : twin.memory
        if !postgres {
            twin.memory.save(
                [ScenarioWorldProfiles.man(1)] + (2...4).map { ScenarioWorldProfiles.woman($0) },
                updatedAt: ScenarioWorld.day1)
            twin.memory.save([notify.filter])
        }
        let run =
            postgres
            ? pgRun
            : try store.start(
                NewRun(
                    kind: .run, shard: .all, clock: ScenarioWorld.day1, maxPerFilter: 100, writesNotifications: true,
                    coverage: nil, upTo: nil, upToTakenAt: nil, timeZone: "Asia/Tokyo", retentionDays: 180,
                    parameters: "{}", candidates: 3))
        #expect(run.owner != nil)
        let claimed = try #require(try store.claim(runId: run.id))
        #expect(claimed.owner != nil && claimed.owner != run.owner)
        #expect(throws: RunTakenOver.self) {
            try store.commit(unit(run, notify, [2, 3]), planner: NotificationPlanner())
        }
        #expect(try store.matches(filterId: 10).isEmpty)
        #expect(try store.notifications(filterId: 10).isEmpty)
        #expect(throws: RunTakenOver.self) {
            try store.finish(runId: run.id, RunCompletion(phaseSeconds: [:], owner: run.owner))
        }
        try store.fail(runId: run.id, owner: run.owner, error: "lost")
        #expect(try store.run(id: run.id)?.status == .running)
        // The claimer's units commit and it finishes the run; a finished run is no one's to claim.
        let outcome = try store.commit(unit(claimed, notify, [2, 3]), planner: NotificationPlanner())
        #expect(outcome.matchesWritten == 2)
        try store.finish(runId: run.id, RunCompletion(phaseSeconds: [:], owner: claimed.owner))
        #expect(try store.run(id: run.id)?.status == .succeeded)
        #expect(try store.claim(runId: run.id) == nil)
        // An abandoned run takes no unit either.
        let next = try store.start(
            NewRun(
                kind: .run, shard: .all, clock: ScenarioWorld.day2, maxPerFilter: 100, writesNotifications: true,
                coverage: nil, upTo: nil, upToTakenAt: nil, timeZone: "Asia/Tokyo", retentionDays: 180,
                parameters: "{}", candidates: 1))
        try store.abandon(runId: next.id)
        #expect(throws: RunTakenOver.self) { try store.commit(unit(next, notify, [4]), planner: NotificationPlanner()) }
        // Its writer's failure does not bring it back as failed (the next run would resume it).
        try store.fail(runId: next.id, owner: next.owner, error: "taken over")
        #expect(try store.run(id: next.id)?.status == .abandoned)
    }
}

/// Where a unit's rows land: a row recorded waiting for its digest is marked notified later, in place, and that
/// UPDATE stays on its page (HOT: no new index entries, nothing for the next vacuum but the old version) only
/// where the page has room for the new version.
@Suite struct WaitingRowLayoutTests {
    @Test func waitingRowsAreSpreadSoThatTheirMarksStayOnTheirPages() throws {
        let twin = try Twin()
        let women = Array(Int64(2)...941)
        try twin.writer.upsertProfiles(
            [ScenarioWorldProfiles.man(1)] + women.map { ScenarioWorldProfiles.woman($0) },
            updatedAt: ScenarioWorld.day1)
        let filters = [10, 11].map {
            SavedFilter(
                id: $0, ownerId: 1, conditionsJSON: #"{"gender": {"anyOf": [2]}}"#,
                createdAt: ScenarioWorld.day1, updatedAt: ScenarioWorld.day1)
        }
        try twin.writer.upsertFilters(filters)
        let owner = FilterOwner(id: 1, status: 1, plan: 0)
        let notify = filters.map { NotificationCandidateFilter(filter: $0, owner: owner) }
        let run = try twin.postgres.start(
            NewRun(
                kind: .run, shard: .all, clock: ScenarioWorld.day1, maxPerFilter: 1_000,
                writesNotifications: true, coverage: nil, upTo: nil, upToTakenAt: nil, timeZone: "Asia/Tokyo",
                retentionDays: 180, parameters: "{}", candidates: women.count))
        // Filter 11 had its digest just now: its 60 new matches wait, among filter 10's 940 notified at once
        // (6 % of the unit, about a day's share in the steady soak).
        try twin.connection.query(
            "INSERT INTO matcher_filter_state (filter_id, last_notified_at) VALUES (11, $1)",
            [.timestamptz(ScenarioWorld.day1)])
        let waiting = Array(women.prefix(60))
        let unit = WorkUnit(
            runId: run.id, clock: EvaluationClock(now: ScenarioWorld.day1), lastFilterId: 11,
            matches: [FilterResult(filterId: 10, profileIds: women), FilterResult(filterId: 11, profileIds: waiting)],
            notify: notify, filterCounters: RunCounters(filtersEvaluated: 2),
            lastLoginAt: Dictionary(uniqueKeysWithValues: women.map { ($0, ScenarioWorld.day1) }), runOwner: run.owner)
        let first = try twin.postgres.commit(unit, planner: NotificationPlanner())
        #expect(first == WorkUnitOutcome(matchesWritten: 1_000, notificationsWritten: 1))
        let pages = "SELECT profile_id, (ctid::text::point)[0]::bigint FROM filter_matches WHERE filter_id = 11"
        let before = try Dictionary(
            uniqueKeysWithValues: twin.connection.query(pages).rows.map { (try $0.int64(0), try $0.int64(1)) })
        // Written by pair they would fill most of the unit's last page; spread, no page holds more than a tenth.
        let mostOnAPage = Dictionary(grouping: before.values, by: { $0 }).values.map(\.count).max() ?? 0
        #expect(mostOnAPage <= 10)

        // A day later filter 11's digest marks all 60: each new version fits on its own page.
        let later = WorkUnit(
            runId: run.id, clock: EvaluationClock(now: ScenarioWorld.day1.adding(days: 1)), lastFilterId: 11,
            matches: [], notify: notify, filterCounters: .zero, runOwner: run.owner)
        let second = try twin.postgres.commit(later, planner: NotificationPlanner())
        #expect(second == WorkUnitOutcome(matchesWritten: 0, notificationsWritten: 1))
        let marked = try twin.connection.query(
            "SELECT count(*) FROM filter_matches WHERE filter_id = 11 AND notification_id IS NOT NULL"
        ).rows[0].int64(0)
        #expect(marked == 60)
        let after = try Dictionary(
            uniqueKeysWithValues: twin.connection.query(pages).rows.map { (try $0.int64(0), try $0.int64(1)) })
        #expect(after == before)

        // `matcher status` counts them: 60 marks, all in place, at the migrations' fillfactor (the marks' session
        // hands its statistics over at once instead of within the second).
        _ = try twin.connection.query("SELECT pg_stat_force_next_flush()")
        let status = try PostgresStatusRepository(connection: twin.connection).serviceStatus(retention: false)
        #expect(status.retention.marks == MarkPlacement(marks: 60, inPlace: 60, fillfactor: 90))
    }
}
