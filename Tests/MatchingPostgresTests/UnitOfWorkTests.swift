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
        try twin.writer.upsertProfiles([ScenarioWorldProfiles.man(1)] + (2...4).map { ScenarioWorldProfiles.woman($0) },
                                       updatedAt: ScenarioWorld.day1)
        let filter = SavedFilter(id: 10, ownerId: 1, conditionsJSON: #"{"gender": {"anyOf": [2]}}"#,
                                 createdAt: ScenarioWorld.day1, updatedAt: ScenarioWorld.day1)
        try twin.writer.upsertFilters([filter])
        let run = try twin.postgres.start(NewRun(kind: .run, shard: .all, clock: ScenarioWorld.day1, maxPerFilter: 100,
                                                 writesNotifications: true, since: nil, upTo: nil, parameters: "{}",
                                                 candidates: 3))
        return (twin, run, NotificationCandidateFilter(filter: filter, owner: FilterOwner(id: 1, status: 1, plan: 0)))
    }

    func unit(_ run: RunRecord, _ notify: NotificationCandidateFilter, _ ids: [Int64]) -> WorkUnit {
        WorkUnit(runId: run.id, clock: clock, lastFilterId: 10, matches: [FilterResult(filterId: 10, profileIds: ids)],
                 notify: [notify], filterCounters: RunCounters(filtersEvaluated: 1),
                 lastLoginAt: Dictionary(uniqueKeysWithValues: ids.map { ($0, ScenarioWorld.day1) }))
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

    @Test func aPairRecordedMeanwhileFallsBackAndIsNeitherDuplicatedNorNotifiedTwice() throws {
        let (twin, run, notify) = try setUp()
        // Another writer (a backfill without --notify) recorded (10, 3) after this run read the table.
        try twin.connection.query("""
            INSERT INTO filter_matches (filter_id, profile_id, matched_at) VALUES (10, 3, $1)
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

    @Test func existingPairsOfManyCandidatesReturnsOnlyTheirPairs() throws {
        let (twin, run, notify) = try setUp()
        _ = try twin.postgres.commit(unit(run, notify, [2, 3, 4]), planner: NotificationPlanner())
        // More candidate ids than the ANY($1) path takes: the bulk path (COPY in, join, COPY out).
        let many = [Int64](stride(from: 3, through: 200_003, by: 1))
        #expect(try twin.postgres.existingPairs(profileIds: many)
            == [MatchPair(filterId: 10, profileId: 3), MatchPair(filterId: 10, profileId: 4)])
        #expect(try twin.postgres.existingPairs(profileIds: [2]) == [MatchPair(filterId: 10, profileId: 2)])
        #expect(try twin.postgres.existingPairs(profileIds: nil).count == 3)
    }
}
