import Chronology
import Foundation
import Matching
import MatchingPostgres
import MatchingTestSupport
import PostgresClient
import PostgresTestSupport
import Testing

/// Every table the worker writes stays bounded: the routine run's retention sweep forgets, besides old pairs,
/// sent notifications past the retention, finished runs past it (not each layout's latest, not the one a
/// shard's progress points at), and bookkeeping rows of filters and profiles that no longer exist.
@Suite struct BoundedBookkeepingTests {
    /// Men 1 and 2 with filters 100 and 200, women 10-13; runs keep 7 days.
    private struct TwoFilters {
        let database: TestDatabase
        let connection: PostgresConnection
        let store: PostgresMatchingStore

        init() throws {
            database = try MigratedDatabase.create()
            connection = try database.connect()
            let writer = AppTableWriter(connection: connection)
            try writer.upsertProfiles(
                [World.profile(1, gender: 1), World.profile(2, gender: 1)] + (10...13).map { World.profile(Int64($0)) },
                updatedAt: ScenarioWorld.day1)
            try writer.upsertFilters([World.filter(100, owner: 1), World.filter(200, owner: 2)])
            let database = database
            store = PostgresMatchingStore(connection: connection) { try database.connect() }
        }

        func run(_ clock: Timestamp) throws -> RunSummary {
            try RunMatching(MatchingRepositories(store: store)).execute(.init(now: clock, retentionDays: 7))
        }

        func count(_ sql: String) throws -> Int64 { try connection.query(sql).rows[0].int64(0) }
    }

    @Test func theSweepForgetsSentNotificationsOldRunsAndRowsOfWhatIsGone() throws {
        let world = try TwoFilters()
        let connection = world.connection
        defer { connection.close() }

        #expect(try world.run(ScenarioWorld.day1).counters.notificationsWritten == 2)
        // The push sender sent filter 100's digest; filter 200's is still unsent.
        try connection.execute("UPDATE notifications SET sent_at = created_at WHERE filter_id = 100")
        // The app hard-deletes filter 200 and profile 13; an old capture row and a quarantined row stay behind.
        try connection.execute("DELETE FROM saved_filters WHERE id = 200")
        try connection.execute("DELETE FROM profiles WHERE id = 13")
        try connection.query(
            "UPDATE matcher_profile_changes SET changed_at = $1 WHERE profile_id = 13",
            [.timestamptz(ScenarioWorld.day1)])
        try connection.query(
            """
            INSERT INTO matcher_quarantine (kind, row_id, reason, detected_at)
            VALUES ('filter', 200, 'x', $1), ('profile', 12, 'y', $1), ('profile', 99, 'recent', now())
            """, [.timestamptz(ScenarioWorld.day1)])
        _ = try world.run(ScenarioWorld.day2)

        let later = try world.run(ScenarioWorld.day1.adding(days: 12))
        #expect(later.counters.matchesForgotten == 8)  // 4 pairs of filter 100, 4 of the deleted filter 200
        #expect(try world.count("SELECT count(*) FROM filter_matches") == 0)
        // The sent digest is forgotten; the unsent one is the push sender's and stays.
        #expect(try world.count("SELECT count(*) FROM notifications WHERE filter_id = 100") == 0)
        #expect(try world.count("SELECT count(*) FROM notifications WHERE filter_id = 200") == 1)
        // Day 1's run is past the retention and neither the latest nor the one progress points at.
        #expect(try world.count("SELECT count(*) FROM matcher_runs") == 2)
        #expect(try world.count("SELECT count(*) FROM matcher_filter_state WHERE filter_id = 200") == 0)
        #expect(try world.count("SELECT count(*) FROM matcher_filter_state WHERE filter_id = 100") == 1)
        // Filter 200's entry goes; profile 12 still exists; profile 99's entry is gone only after the retention.
        #expect(try world.count("SELECT count(*) FROM matcher_quarantine") == 2)
        #expect(try world.count("SELECT count(*) FROM matcher_profile_changes WHERE profile_id = 13") == 0)
        #expect(try world.count("SELECT count(*) FROM matcher_profile_changes WHERE profile_id = 12") == 1)
    }

    /// Found by review in session 29: the notification state of a filter the app soft-deletes (`deleted_at`,
    /// how users delete filters) stayed for good; it goes like a hard-deleted filter's.
    @Test func theStateOfASoftDeletedFilterIsForgotten() throws {
        let world = try TwoFilters()
        let connection = world.connection
        defer { connection.close() }

        #expect(try world.run(ScenarioWorld.day1).counters.notificationsWritten == 2)
        #expect(try world.count("SELECT count(*) FROM matcher_filter_state") == 2)
        try connection.query(
            "UPDATE saved_filters SET deleted_at = $1 WHERE id = 200", [.timestamptz(ScenarioWorld.day2)])
        _ = try world.run(ScenarioWorld.day1.adding(days: 12))
        #expect(try world.count("SELECT count(*) FROM matcher_filter_state WHERE filter_id = 200") == 0)
        #expect(try world.count("SELECT count(*) FROM matcher_filter_state WHERE filter_id = 100") == 1)
    }

    /// Found by review in session 33: the comparison cast `deleted_at` through text, whose form follows the
    /// session's DateStyle and TimeZone (a role's or database's setting, or libpq's PGDATESTYLE and PGTZ). With
    /// `SQL, DMY` in Asia/Jakarta the text ends in 'WIB', which PostgreSQL cannot read back: every run's sweep
    /// failed, and the next run, finishing the failed one first, failed the same way.
    @Test func aSessionsDateStyleAndZoneDoNotChangeTheSweep() throws {
        let world = try TwoFilters()
        let connection = world.connection
        defer { connection.close() }

        #expect(try world.run(ScenarioWorld.day1).counters.notificationsWritten == 2)
        let name = try connection.query("SELECT current_database()::text").rows[0].string(0)
        let alter = try connection.query(
            "SELECT format('ALTER DATABASE %I SET DateStyle = %L', $1::text, 'SQL, DMY'), "
                + "format('ALTER DATABASE %I SET TimeZone = %L', $1::text, 'Asia/Jakarta')", [.text(name)])
        try connection.execute(alter.rows[0].string(0))
        try connection.execute(alter.rows[0].string(1))
        try connection.execute("SET DateStyle = 'SQL, DMY'")
        try connection.execute("SET TimeZone = 'Asia/Jakarta'")
        let shown = try connection.query("SELECT now()::text").rows[0].string(0)
        #expect(shown.hasSuffix("WIB"))
        // Deleted within the retention: its state stays; filter 100's too.
        try connection.query(
            "UPDATE saved_filters SET deleted_at = $1 WHERE id = 200",
            [.timestamptz(ScenarioWorld.day1.adding(days: 2))])
        let later = try world.run(ScenarioWorld.day1.adding(days: 3))
        #expect(later.retention?.stoppedByConflict == nil)
        #expect(try world.count("SELECT count(*) FROM matcher_filter_state WHERE filter_id = 200") == 1)
        // Past the retention, it goes.
        _ = try world.run(ScenarioWorld.day1.adding(days: 12))
        #expect(try world.count("SELECT count(*) FROM matcher_filter_state WHERE filter_id = 200") == 0)
        #expect(try world.count("SELECT count(*) FROM matcher_filter_state WHERE filter_id = 100") == 1)
    }

    /// The sweep compares a soft-deleted filter's `deleted_at` with its cutoff (session 31: a filter restored
    /// within the retention keeps its state), but only while the app's column is a timestamptz: retyped, the
    /// sweep forgets a deleted filter's state as before, and never fails the run on the comparison.
    @Test func aDeletedAtTheAppRetypedNeverFailsTheSweep() throws {
        let world = try TwoFilters()
        let connection = world.connection
        defer { connection.close() }

        #expect(try world.run(ScenarioWorld.day1).counters.notificationsWritten == 2)
        try connection.query(
            "UPDATE saved_filters SET deleted_at = $1 WHERE id = 200", [.timestamptz(ScenarioWorld.day1)])
        _ = try world.run(ScenarioWorld.day1.adding(days: 3))
        #expect(try world.count("SELECT count(*) FROM matcher_filter_state WHERE filter_id = 200") == 1)
        try connection.execute("ALTER TABLE saved_filters ALTER COLUMN deleted_at TYPE text USING deleted_at::text")
        let later = try world.run(ScenarioWorld.day1.adding(days: 12))
        #expect(later.retention?.stoppedByConflict == nil)
        #expect(try world.count("SELECT count(*) FROM matcher_filter_state WHERE filter_id = 200") == 0)
        #expect(try world.count("SELECT count(*) FROM matcher_filter_state WHERE filter_id = 100") == 1)
    }
}
