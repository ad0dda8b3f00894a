import Chronology
import Foundation
import Matching
import MatchingPostgres
import MatchingTestSupport
import PostgresClient
import PostgresTestSupport
import Testing

/// A run is written by one process at a time even when its run lock is lost (runs.md: "two runs started at once:
/// never a duplicate match or notification, never a lost one"). Found by review in session 28.
@Suite(.serialized) struct RunOwnerTests {
    /// Runs `action` once, after the `count`th unit the run commits (on the writer's thread, between units).
    final class AfterUnits: RunOutputHandler, @unchecked Sendable {
        let count: Int
        let action: () throws -> Void
        private let lock = NSLock()
        private var committed = 0
        private(set) var failure: (any Error)?

        init(_ count: Int, _ action: @escaping () throws -> Void) {
            self.count = count
            self.action = action
        }

        func handle(_ event: RunEvent) {
            guard case .unitCommitted = event else { return }
            let reached = lock.withLock {
                committed += 1
                return committed == count
            }
            guard reached else { return }
            do { try action() } catch { lock.withLock { failure = error } }
        }
    }

    /// Process A's run lock session is ended from outside after its second unit (as an idle-session killer would);
    /// A goes on. Process B takes the lock, claims the interrupted run and completes it. A's next unit finds the
    /// run no longer its own: it rolls back and A stops with `RunTakenOver`. The rows and the run's counters are
    /// those of one clean run; before the claim, A wrote its remaining units into the run B had finished (its
    /// counters added twice) and then finished it again.
    @Test func aProcessWhoseRunLockWasLostStopsOnceAnotherCompletesItsRun() throws {
        let (lost, clean) = try Twin.pair(seed: 28)
        let clock = ScenarioWorld.day1
        let options = PassOptions(unitFilterLimit: 7)
        let reference = try RunMatching(MatchingRepositories(store: clean.postgres), options: options)
            .execute(.init(now: clock))
        let referenceId = try #require(reference.runId)
        let referenceRun = try #require(try clean.postgres.run(id: referenceId))

        let database = lost.database
        let processA = PostgresMatchingStore(connection: try database.connect(), writeConnections: 1) {
            try database.connect()
        }
        // The run lock of shard 0/1 in this test's database (other tests' databases on the server hold their own).
        let keys: [PostgresValue] = [.int8(0x4D_41_54_10), .int8(Int64(1 << 16))]
        var processB: RunSummary?
        let hook = AfterUnits(2) {
            let ended = try lost.connection.query(
                """
                SELECT pg_terminate_backend(pid) FROM pg_locks
                WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = $1::oid AND objid = $2::oid
                  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                """, keys
            ).rows.count
            #expect(ended == 1, "process A's run lock session ended")
            let storeB = PostgresMatchingStore(connection: try database.connect()) { try database.connect() }
            processB = try RunMatching(MatchingRepositories(store: storeB), options: options).execute(.init(now: clock))
        }
        #expect(throws: RunTakenOver.self) {
            try RunMatching(MatchingRepositories(store: processA), output: hook, options: options)
                .execute(.init(now: clock))
        }
        #expect(hook.failure == nil, "\(String(describing: hook.failure))")
        let completed = try #require(processB?.completedRun)
        let run = try #require(try lost.postgres.run(id: completed.runId))
        #expect(run.status == .succeeded)
        #expect(run.counters == referenceRun.counters)
        let rows = try Rows.of(lost.connection), referenceRows = try Rows.of(clean.connection)
        #expect(!referenceRows.matches.isEmpty)
        #expect(rows.matches == referenceRows.matches)
        #expect(rows.notifications == referenceRows.notifications)
    }
}
