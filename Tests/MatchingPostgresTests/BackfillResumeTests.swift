import Chronology
import Foundation
import Matching
import MatchingPostgres
import MatchingTestSupport
import PostgresClient
import PostgresTestSupport
import Testing

/// The PostgreSQL store, failing the unit of work after `commitsBeforeFailure` commits.
final class FailingMatches: ForwardingMatches, @unchecked Sendable {
    struct InjectedFailure: Error, CustomStringConvertible {
        var description: String { "injected unit-of-work failure" }
    }

    private var commitsLeft: Int

    init(_ base: PostgresMatchingStore, commitsBeforeFailure: Int) {
        self.commitsLeft = commitsBeforeFailure
        super.init(base)
    }

    override func withUnitTransaction<T>(_ body: (any UnitTransaction) throws -> T) throws -> T {
        guard commitsLeft > 0 else { throw InjectedFailure() }
        commitsLeft -= 1
        return try base.withUnitTransaction(body)
    }
}

/// Issue 14, item 5: a backfill interrupted on PostgreSQL is resumed by the same backfill, although
/// jsonb gives its parameters back with the keys reordered.
@Suite(.serialized) struct BackfillResumeTests {
    @Test func anInterruptedBackfillIsResumedOnPostgreSQL() throws {
        var scenario = ScenarioWorld(seed: 77)
        let world = scenario.day1(profiles: 200, filters: 40)
        let filterIds = world.filters.map(\.id)
        let input = Backfill.Input(filters: .ids(filterIds), writesNotifications: true, now: ScenarioWorld.day1)

        func prepared(_ label: String) throws -> (TestDatabase, PostgresConnection, PostgresMatchingStore) {
            let database = try MigratedDatabase.create(label)
            let connection = try database.connect()
            let writer = AppTableWriter(connection: connection)
            try writer.upsertProfiles(world.profiles, updatedAt: ScenarioWorld.day1)
            try writer.upsertFilters(world.filters)
            try writer.insertBlocks(world.blocks)
            return (database, connection, PostgresMatchingStore(connection: connection) { try database.connect() })
        }

        // One clean backfill, for reference.
        let (cleanDB, clean, cleanStore) = try prepared("backfill_clean")
        _ = cleanDB
        let reference = try Backfill(MatchingRepositories(store: cleanStore), options: PassOptions(unitFilterLimit: 5))
            .execute(input)

        // The same backfill, failing after two units; then started again.
        let (interruptedDB, connection, store) = try prepared("backfill_interrupted")
        _ = interruptedDB
        #expect(throws: FailingMatches.InjectedFailure.self) {
            try Backfill(
                MatchingRepositories(store: store).replacing(matches: FailingMatches(store, commitsBeforeFailure: 2)),
                options: PassOptions(unitFilterLimit: 5)
            )
            .execute(input)
        }
        let stored = try connection.query("SELECT id, status, parameters::text FROM matcher_runs").rows
        #expect(stored.count == 1)
        let firstId = try #require(stored.first).int64(0)
        #expect(try stored.first?.string(1) == "failed")
        // The round trip through jsonb reorders the keys: text equality would never resume it.
        #expect(try stored.first?.string(2) != input.parametersForTesting)

        let resumed = try Backfill(MatchingRepositories(store: store), options: PassOptions(unitFilterLimit: 5))
            .execute(input)
        #expect(resumed.resumedRunId == firstId)
        #expect(resumed.runId == firstId)
        #expect(try connection.query("SELECT count(*) FROM matcher_runs").rows[0].int64(0) == 1)
        #expect(resumed.counters.matchesWritten == reference.counters.matchesWritten)
        #expect(resumed.counters.notificationsWritten == reference.counters.notificationsWritten)
        #expect(try Rows.of(connection).matches == Rows.of(clean).matches)
        #expect(try Rows.of(connection).notifications == Rows.of(clean).notifications)
        // A backfill records in bulk: every pair listed once by filter and clock, across the interruption.
        func count(_ sql: String) throws -> Int64 { try connection.query(sql).rows[0].int64(0) }
        let recorded = try count("SELECT count(*) FROM filter_matches")
        #expect(recorded > 0)
        #expect(try count("SELECT count(*) FROM filter_matches WHERE bulk") == recorded)
        #expect(
            try count("SELECT count(*) FROM matcher_bulk_matches CROSS JOIN LATERAL unnest(profile_ids)") == recorded)
        #expect(
            try count(
                """
                SELECT count(*) FROM filter_matches m WHERE NOT EXISTS (
                    SELECT 1 FROM matcher_bulk_matches l
                    WHERE l.filter_id = m.filter_id AND l.matched_at = m.matched_at AND m.profile_id = ANY (l.profile_ids))
                """) == 0)
    }

    /// `--changed-before` alone: the profiles changed before it, from the first change on. The command gave the
    /// window's start as -2^62 microseconds, before PostgreSQL's earliest timestamp, and the read failed.
    @Test func aWindowWithOnlyAnEndTakesEveryChangeBeforeIt() throws {
        let twin = try FaultScenarioTests.world()
        var changes = ScenarioWorld(seed: 31)
        let edited = (0..<10).map { changes.profile(Int64(1 + $0 * 13), at: ScenarioWorld.day2) }
        try twin.writer.upsertProfiles(edited, updatedAt: ScenarioWorld.day2)
        let backfill = try MatcherProcess.run(
            [
                "backfill", "--changed-before", ScenarioWorld.day2.iso8601, "--now",
                ScenarioWorld.day2.adding(days: 1).iso8601,
            ], database: twin.database.conninfo)
        #expect(backfill.status == 0, "\(backfill.stderr)")
        let candidates = try twin.connection.query("SELECT candidates FROM matcher_runs WHERE kind = 'backfill'")
            .rows.map { try $0.int32(0) }
        #expect(candidates == [290])
    }

    /// `--changed-since` alone, no `--now`: the window ends at the backfill's clock, the database's when it
    /// started. Started again after an interruption, it is the same backfill (not a new one at a new clock),
    /// resumed at its clock, in the zone it started in.
    @Test func anOpenEndedWindowIsResumedAtItsOwnClockAndZone() throws {
        var scenario = ScenarioWorld(seed: 78)
        let world = scenario.day1(profiles: 120, filters: 30)
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        let writer = AppTableWriter(connection: connection)
        try writer.upsertProfiles(world.profiles, updatedAt: ScenarioWorld.day1)
        try writer.upsertFilters(world.filters)
        let store = PostgresMatchingStore(connection: connection) { try database.connect() }
        let utc = try #require(TimeZone(identifier: "UTC"))
        let window = ProfileSelection.changed(from: ScenarioWorld.day1.adding(days: -1), to: nil)
        #expect(throws: FailingMatches.InjectedFailure.self) {
            try Backfill(
                MatchingRepositories(store: store).replacing(matches: FailingMatches(store, commitsBeforeFailure: 1)),
                options: PassOptions(unitFilterLimit: 5)
            )
            .execute(.init(profiles: window, timeZone: utc))
        }
        let first = try #require(try store.interruptedRun(kind: .backfill, shard: .all))
        let resumed = try Backfill(MatchingRepositories(store: store), options: PassOptions(unitFilterLimit: 5))
            .execute(.init(profiles: window))
        #expect(resumed.resumedRunId == first.id && resumed.runId == first.id)
        #expect(resumed.clock == first.clock)
        #expect(resumed.counters.candidates == 120)
        #expect(try store.run(id: first.id)?.timeZone == utc.identifier && utc.identifier != TimeZone.tokyo.identifier)
        #expect(try connection.query("SELECT count(*) FROM matcher_runs").rows[0].int64(0) == 1)
    }
}
