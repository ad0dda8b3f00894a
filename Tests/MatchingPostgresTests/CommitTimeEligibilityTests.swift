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
}
