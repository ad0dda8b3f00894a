import Chronology
import Foundation
import Matching
import MatchingPostgres
import MatchingTestSupport
import PostgresClient
import PostgresTestSupport
import Testing

/// The retention ledger (migration 0010): the sweep finds expired pairs through the rows a unit wrote beside
/// them, not through an index on `filter_matches`. It forgets each listed pair once, only while the pair's
/// `matched_at` is still the ledger row's, keeps exactly the waiting ones listed, and works in bounded batches
/// that each start where the last one stopped.
@Suite(.serialized) struct RetentionLedgerTests {
    /// Four men with a filter each, notified daily, and ten women: 40 pairs on day 1.
    private static func world(_ twin: Twin) throws {
        let men = (1...4).map { World.profile(Int64($0), gender: 1) }
        try twin.writer.upsertProfiles(men + (10...19).map { World.profile(Int64($0)) }, updatedAt: ScenarioWorld.day1)
        try twin.writer.upsertFilters(men.map { World.filter($0.id * 100, owner: $0.id) })
    }

    @discardableResult
    private static func run(_ twin: Twin, at clock: Timestamp) throws -> RunSummary {
        try RunMatching(MatchingRepositories(store: twin.postgres), options: PassOptions(unitFilterLimit: 3))
            .execute(.init(now: clock))
    }

    private static func count(_ twin: Twin, _ sql: String) throws -> Int64 {
        try twin.connection.query(sql).rows[0].int64(0)
    }

    /// The ledger as (matched_at, filter, profiles), oldest first.
    private static func ledger(_ twin: Twin) throws -> [String] {
        try twin.connection.query(
            "SELECT matched_at, filter_id, profile_ids FROM matcher_match_ledger ORDER BY matched_at, filter_id"
        ).rows.map { "\(try $0.timestamp(0).iso8601) \(try $0.int64(1)) \(try $0.int64Array(2))" }
    }

    @Test func eachUnitListsWhatItRecordedAndFilterMatchesHasOnlyItsPrimaryKey() throws {
        let twin = try Twin()
        try Self.world(twin)
        let summary = try Self.run(twin, at: ScenarioWorld.day1)
        #expect(summary.counters.matchesWritten == 40)
        let women = Array(Int64(10)...19)
        let day1 = ScenarioWorld.day1.iso8601
        #expect(try Self.ledger(twin) == [100, 200, 300, 400].map { "\(day1) \($0) \(women)" })
        let indexes = try twin.connection.query(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'filter_matches' ORDER BY indexname"
        ).rows.map { try $0.string(0) }
        #expect(indexes == ["filter_matches_pkey"])
    }

    @Test func smallBatchesForgetEveryExpiredPairOnceAndABoundedSweepLeavesTheRestToTheNext() throws {
        let twin = try Twin()
        try Self.world(twin)
        try Self.run(twin, at: ScenarioWorld.day1)
        try twin.writer.upsertProfiles((20...22).map { World.profile(Int64($0)) }, updatedAt: ScenarioWorld.day3)
        try Self.run(twin, at: ScenarioWorld.day3)
        #expect(try Self.count(twin, "SELECT count(*) FROM filter_matches") == 52)

        // A batch of 3 pairs still takes one whole ledger row (10 pairs): two batches, then a backlog.
        let first = try #require(
            try twin.postgres.forgetExpired(before: ScenarioWorld.day2, batchSize: 3, maxBatches: 2))
        #expect(first == RetentionOutcome(forgotten: 20, backlog: true))
        let second = try #require(
            try twin.postgres.forgetExpired(before: ScenarioWorld.day2, batchSize: 3, maxBatches: 100))
        #expect(second.forgotten == 20)
        #expect(!second.backlog)
        let expired = try twin.connection.query(
            "SELECT count(*) FROM filter_matches WHERE matched_at < $1", [.timestamptz(ScenarioWorld.day2)]
        ).rows[0].int64(0)
        #expect(expired == 0)
        #expect(try Self.count(twin, "SELECT count(*) FROM filter_matches") == 12)
        let day3 = ScenarioWorld.day3.iso8601
        #expect(try Self.ledger(twin) == [100, 200, 300, 400].map { "\(day3) \($0) [20, 21, 22]" })
        let again = try #require(
            try twin.postgres.forgetExpired(before: ScenarioWorld.day2, batchSize: 3, maxBatches: 100))
        #expect(again.forgotten == 0)
    }

    /// A pair forgotten (or deleted by someone else) and recorded again has a newer `matched_at` and its own
    /// ledger row: the old row neither forgets it early nor keeps it; a pair deleted meanwhile just leaves
    /// the ledger.
    @Test func aPairIsForgottenOnlyByTheLedgerRowOfItsOwnRecording() throws {
        let twin = try Twin()
        try Self.world(twin)
        try Self.run(twin, at: ScenarioWorld.day1)
        let recordedAgainAt = ScenarioWorld.day1.adding(days: 3)
        try twin.connection.query(
            """
            UPDATE filter_matches SET matched_at = $1 WHERE filter_id = 100 AND profile_id = 10;
            """, [.timestamptz(recordedAgainAt)])
        try twin.connection.query(
            "INSERT INTO matcher_match_ledger (matched_at, filter_id, profile_ids) VALUES ($1, 100, '{10}')",
            [.timestamptz(recordedAgainAt)])
        try twin.connection.execute("DELETE FROM filter_matches WHERE filter_id = 100 AND profile_id = 11")

        let swept = try #require(
            try twin.postgres.forgetExpired(before: ScenarioWorld.day2, batchSize: 50_000, maxBatches: 10))
        #expect(swept.forgotten == 38)
        #expect(try twin.postgres.matches(filterId: 100).map(\.profileId) == [10])
        #expect(try Self.ledger(twin) == ["\(recordedAgainAt.iso8601) 100 [10]"])

        let later = try #require(
            try twin.postgres.forgetExpired(before: recordedAgainAt.adding(days: 1), batchSize: 50_000, maxBatches: 10))
        #expect(later.forgotten == 1)
        #expect(try Self.count(twin, "SELECT count(*) FROM filter_matches") == 0)
        #expect(try Self.ledger(twin).isEmpty)
    }

    /// Matches waiting for their digest stay recorded and stay listed, exactly those; a sweep in batches of
    /// one pair still ends (a kept row is looked at again by the next sweep, not the next batch); once the
    /// filter can no longer notify them, the next sweep forgets them and their list entries.
    @Test func theLedgerKeepsExactlyTheWaitingPairsUntilTheyWaitNoLonger() throws {
        let twin = try Twin()
        let men = (1...2).map { World.profile(Int64($0), gender: 1) }
        try twin.writer.upsertProfiles(men + (10...13).map { World.profile(Int64($0)) }, updatedAt: ScenarioWorld.day1)
        try twin.writer.upsertFilters([
            World.filter(100, owner: 1),
            World.filter(200, owner: 2, every: NotifyInterval(months: 0, days: 30, microseconds: 0)),
        ])
        try twin.connection.query(
            "INSERT INTO matcher_filter_state (filter_id, last_notified_at) VALUES (200, $1)",
            [.timestamptz(ScenarioWorld.day1.adding(days: -1))])
        try Self.run(twin, at: ScenarioWorld.day1)
        #expect(try Self.count(twin, "SELECT count(*) FROM matcher_waiting_matches") == 4)

        let cutoff = ScenarioWorld.day1.adding(days: 1)
        let swept = try #require(try twin.postgres.forgetExpired(before: cutoff, batchSize: 1, maxBatches: 100))
        #expect(swept == RetentionOutcome(forgotten: 4, backlog: false))
        #expect(try Self.ledger(twin) == ["\(ScenarioWorld.day1.iso8601) 200 [10, 11, 12, 13]"])
        let again = try #require(try twin.postgres.forgetExpired(before: cutoff, batchSize: 1, maxBatches: 100))
        #expect(again == RetentionOutcome(forgotten: 0, backlog: false))
        #expect(try twin.postgres.matches(filterId: 200).count == 4)

        try twin.connection.execute("UPDATE saved_filters SET notify = false WHERE id = 200")
        let after = try #require(try twin.postgres.forgetExpired(before: cutoff, batchSize: 1, maxBatches: 100))
        #expect(after.forgotten == 4)
        #expect(try Self.ledger(twin).isEmpty)
        #expect(try Self.count(twin, "SELECT count(*) FROM matcher_waiting_matches") == 0)
        #expect(try Self.count(twin, "SELECT count(*) FROM filter_matches") == 0)
    }
}

/// A database recorded pairs before the ledger existed: the migration lists them, so retention still forgets
/// them, and drops the `matched_at` index the sweep no longer needs.
@Suite struct RetentionLedgerUpgradeTests {
    @Test func pairsRecordedBeforeTheLedgerAreListedAndForgotten() throws {
        let database = try TestDatabase.create()
        let connection = try database.connect()
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        try MigrationRunner(connection: connection).apply(migrations.filter { $0.version <= 9 })
        let old = ScenarioWorld.day1
        let recent = ScenarioWorld.day3
        try connection.query(
            """
            INSERT INTO filter_matches (filter_id, profile_id, matched_at, notification_id)
            SELECT f, p, CASE WHEN p < 15 THEN $1 ELSE $2 END, 1
            FROM generate_series(100, 102) AS f, generate_series(10, 19) AS p
            """, [.timestamptz(old), .timestamptz(recent)])

        try MigrationRunner(connection: connection).apply(migrations)
        let ledger = try connection.query(
            "SELECT matched_at, filter_id, profile_ids FROM matcher_match_ledger ORDER BY matched_at, filter_id"
        ).rows.map { "\(try $0.timestamp(0).iso8601) \(try $0.int64(1)) \(try $0.int64Array(2))" }
        #expect(
            ledger
                == [100, 101, 102].map { "\(old.iso8601) \($0) [10, 11, 12, 13, 14]" }
                + [100, 101, 102].map { "\(recent.iso8601) \($0) [15, 16, 17, 18, 19]" })
        let timeIndex = try connection.query(
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'filter_matches_matched_at'"
        ).rows[0].int64(0)
        #expect(timeIndex == 0)

        let store = PostgresMatchingStore(connection: connection) { try database.connect() }
        let swept = try #require(try store.forgetExpired(before: ScenarioWorld.day2, batchSize: 50_000, maxBatches: 10))
        #expect(swept.forgotten == 15)
        let left = try connection.query("SELECT count(*), min(profile_id) FROM filter_matches").rows[0]
        #expect(try left.int64(0) == 15)
        #expect(try left.int64(1) == 15)
    }
}
