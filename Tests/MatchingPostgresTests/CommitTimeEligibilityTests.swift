import Chronology
import Foundation
import Matching
import MatchingPostgres
import MatchingTestSupport
import PostgresClient
import PostgresTestSupport
import Testing

/// A digest shows only profiles eligible when it is written (runs.md): a profile hidden, or its row deleted,
/// after the run read it active and before its unit commits is recorded (it matched when read) but never
/// counted or shown. On PostgreSQL the commit re-reads only the profiles the change capture saw change since
/// the run's read snapshot, so this is what keeps that shortcut honest.
@Suite struct CommitTimeEligibilityTests {
    /// Runs `action` once, when the run starts writing: after it read profiles and blocks.
    final class WhenWriting: RunOutputHandler, @unchecked Sendable {
        let action: @Sendable () -> Void
        init(_ action: @escaping @Sendable () -> Void) { self.action = action }
        func handle(_ event: RunEvent) {
            if case .phaseStarted(.write) = event { action() }
        }
    }

    @Test func profilesHiddenOrDeletedBetweenReadAndWriteAreRecordedButNeverShown() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        let app = try database.connect()  // the app, on a connection of its own
        defer {
            connection.close()
            app.close()
        }
        let writer = AppTableWriter(connection: connection)
        try writer.upsertProfiles(
            [World.profile(1, gender: 1)] + (10...14).map { World.profile(Int64($0), loginHoursAgo: $0) },
            updatedAt: ScenarioWorld.day1)
        try writer.upsertFilters([World.filter(100, owner: 1)])
        let store = PostgresMatchingStore(connection: connection) { try database.connect() }
        let summary = try RunMatching(
            MatchingRepositories(store: store),
            output: WhenWriting {
                _ = try? app.query("UPDATE profiles SET status = 2 WHERE id = 11")
                _ = try? app.query("DELETE FROM profiles WHERE id = 13")
            }
        ).execute(.init(now: ScenarioWorld.day1))

        #expect(summary.counters.matchesWritten == 5)
        let digests = try store.notifications(filterId: 100)
        let digest = try #require(digests.first)
        #expect(digests.count == 1)
        #expect(digest.matchCount == 3)
        #expect(Set(digest.profileIds) == [10, 12, 14])
        // The two are recorded, and wait: shown later only if they qualify again.
        let unnotified = try store.matches(filterId: 100).filter { $0.notificationId == nil }.map(\.profileId)
        #expect(Set(unnotified) == [11, 13])
    }

    /// A hide in a transaction the app had open when the run read (among the read snapshot's in-progress ids),
    /// committed once the run writes, is seen at the commit like one that began later.
    @Test func aHideInATransactionOpenAtTheReadIsSeenAtTheCommit() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        let app = try database.connect()
        defer {
            connection.close()
            app.close()
        }
        let writer = AppTableWriter(connection: connection)
        try writer.upsertProfiles(
            [World.profile(1, gender: 1)] + (10...12).map { World.profile(Int64($0), loginHoursAgo: $0) },
            updatedAt: ScenarioWorld.day1)
        try writer.upsertFilters([World.filter(100, owner: 1)])
        try app.execute("BEGIN")
        try app.execute("UPDATE profiles SET status = 2 WHERE id = 11")
        let store = PostgresMatchingStore(connection: connection) { try database.connect() }
        let summary = try RunMatching(
            MatchingRepositories(store: store), output: WhenWriting { _ = try? app.execute("COMMIT") }
        ).execute(.init(now: ScenarioWorld.day1))

        #expect(summary.counters.matchesWritten == 3)
        let digest = try #require(try store.notifications(filterId: 100).first)
        #expect(Set(digest.profileIds) == [10, 12])
        #expect(digest.matchCount == 2)
    }

    /// Review of session 33: the commit's read of changed profiles took every capture row from the read
    /// snapshot's xmin and filtered them, so a transaction left open for days made every unit read days of
    /// changes. It reads those past the snapshot and those of its in-progress ids, and nothing else.
    @Test func theCommitReadsOnlyTheChangesItsSnapshotDoesNotSee() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        let writer = AppTableWriter(connection: connection)
        try writer.upsertProfiles((1...5).map { World.profile(Int64($0)) }, updatedAt: ScenarioWorld.day1)
        // A snapshot from xid X to X + 4000 with X in progress, and capture rows around it: 2,000 of them
        // committed in between (seen by the snapshot), as behind a transaction held open since X.
        let x = try connection.query("SELECT pg_current_xact_id()::text::bigint + 10").rows[0].int64(0)
        try connection.execute("DELETE FROM matcher_profile_changes")
        try connection.query(
            """
            INSERT INTO matcher_profile_changes (profile_id, changed_by)
            SELECT id, ($1::bigint + d)::text::xid8 FROM unnest(ARRAY[1, 2, 3, 4, 5], ARRAY[-1, 0, 500, 4000, 5000])
                AS u (id, d)
            UNION ALL
            SELECT 100 + i, ($1::bigint + i)::text::xid8 FROM generate_series(1, 2000) AS i
            """, [.int8(x)])
        try connection.execute("ANALYZE matcher_profile_changes")
        let snapshot = "\(x):\(x + 4000):\(x)"
        let store = PostgresMatchingStore(connection: connection) { try database.connect() }
        let facts = try store.withUnitTransaction { tx in
            try tx.profileFacts([1, 2, 3, 4, 5], ownerIds: [], readAt: ChangeMark(snapshot))
        }
        #expect(Set(facts.statuses.keys) == [2, 4, 5])
        try connection.execute("SET enable_seqscan = off")
        let plan = try connection.query(
            "EXPLAIN (ANALYZE, COSTS OFF) " + ChangeCapture.changesSinceSnapshot, [.text(snapshot)]
        ).rows.map { try $0.string(0) }.joined(separator: "\n")
        #expect(!plan.contains("Rows Removed by Filter"), "\(plan)")
        #expect(plan.contains("matcher_profile_changes_changed_by"), "\(plan)")
    }
}
