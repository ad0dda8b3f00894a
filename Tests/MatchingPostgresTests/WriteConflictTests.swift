import Chronology
import Foundation
import Matching
import MatchingPostgres
import PostgresClient
import PostgresTestSupport
import Testing

/// A run and another writer (a `backfill --notify` started by hand, say) that wait for each other: PostgreSQL
/// gives one of the two transactions up (SQLSTATE 40P01). When the loser is a run's unit, the run writes the unit
/// again in its turn instead of failing and waiting for the next timer.
@Suite struct WriteConflictTests {
    /// Which of two waiting transactions PostgreSQL gives up depends on whose `deadlock_timeout` expires first
    /// once both wait: the unit waits first and checks once, after its timeout. Under load (CI runs suites
    /// side by side) the other writer may take longer than the default second to start waiting, and would then
    /// be the one to find the deadlock. So the run's sessions wait 5 s before they check, and the other writer
    /// a minute: the unit is the one given up.
    static let unitDeadlockTimeout = "5s"
    static let otherDeadlockTimeout = "60s"

    /// Another writer, as a `backfill --notify` writes: once the run has read its candidates, it records a pair the
    /// run will record too and holds its transaction open, waits until a backend waits for it (the run's unit,
    /// at that pair; at most 30 s), does `thenWhileHolding`, and rolls back.
    final class OtherWriter: StoreFaultPoints, @unchecked Sendable {
        private let connection: PostgresConnection
        private let pair: MatchPair
        private let deadlockTimeout: String?
        private let thenWhileHolding: (PostgresConnection, MatchPair) throws -> Void
        private let lock = NSLock()
        private var started = false
        private let holding = DispatchSemaphore(value: 0)
        private let done = DispatchSemaphore(value: 0)
        private var failure: (any Error)?
        private var pairsHeld = 0
        private var sawTheUnitWait = false

        init(
            connection: PostgresConnection, pair: MatchPair, deadlockTimeout: String? = nil,
            thenWhileHolding: @escaping (PostgresConnection, MatchPair) throws -> Void
        ) {
            self.connection = connection
            self.pair = pair
            self.deadlockTimeout = deadlockTimeout
            self.thenWhileHolding = thenWhileHolding
        }

        func reach(_ point: StoreFaultPoint) {
            guard point == .afterRead else { return }
            lock.lock()
            let first = !started
            started = true
            lock.unlock()
            guard first else { return }
            Thread.detachNewThread { [self] in
                do {
                    try act()
                } catch {
                    lock.lock()
                    failure = error
                    lock.unlock()
                    holding.signal()
                }
                done.signal()
            }
            holding.wait()
        }

        private func act() throws {
            if let deadlockTimeout {
                _ = try connection.query("SELECT set_config('deadlock_timeout', $1, false)", [.text(deadlockTimeout)])
            }
            try connection.execute("BEGIN")
            let held = try connection.query(
                "INSERT INTO filter_matches (filter_id, profile_id, matched_at) VALUES ($1, $2, now()) RETURNING 1",
                [.int8(pair.filterId), .int8(pair.profileId)])
            lock.lock()
            pairsHeld = held.rows.count
            lock.unlock()
            holding.signal()
            let xid = try connection.query("SELECT (txid_current() % 4294967296)::text").rows[0].string(0)
            var waited = false
            for _ in 0..<3_000 {
                waited = try connection.query(
                    """
                    SELECT EXISTS (SELECT 1 FROM pg_locks
                                   WHERE NOT granted AND locktype = 'transactionid' AND transactionid::text = $1)
                    """, [.text(xid)]
                ).rows[0].bool(0)
                if waited { break }
                Thread.sleep(forTimeInterval: 0.01)
            }
            lock.lock()
            sawTheUnitWait = waited
            lock.unlock()
            try thenWhileHolding(connection, pair)
            try connection.execute("ROLLBACK")
        }

        /// Waits for the other writer to finish; what it saw.
        func finish() -> (failure: (any Error)?, pairsHeld: Int, sawTheUnitWait: Bool) {
            done.wait()
            lock.lock()
            defer { lock.unlock() }
            return (failure, pairsHeld, sawTheUnitWait)
        }
    }

    /// Owner 1 (a man) with filter 100 for women, and women 10 and 11, as of day 1.
    static func oneFilterWorld() throws -> Twin {
        let twin = try Twin()
        let day1 = ScenarioWorld.day1
        try twin.saveProfiles(
            [ScenarioWorldProfiles.man(1), ScenarioWorldProfiles.woman(10), ScenarioWorldProfiles.woman(11)], at: day1)
        try twin.saveFilters([
            SavedFilter(
                id: 100, ownerId: 1, conditionsJSON: #"{"gender": {"anyOf": [2]}}"#, createdAt: day1,
                updatedAt: day1)
        ])
        return twin
    }

    /// The unit retries the run reported: (last filter id, attempt, reason).
    static func retries(_ output: RecordingRunOutput) -> [(lastFilterId: Int64, attempt: Int, reason: String)] {
        output.events.compactMap { event in
            if case .unitRetried(let lastFilterId, let attempt, _, let reason) = event {
                return (lastFilterId, attempt, reason)
            }
            return nil
        }
    }

    /// The same day run in memory writes what PostgreSQL holds.
    static func expectSameRowsAsMemory(_ twin: Twin) throws {
        twin.memory.setClock(ScenarioWorld.day1)
        _ = try RunMatching(MatchingRepositories(store: twin.memory)).execute(.init(now: ScenarioWorld.day1))
        let pg = try Rows.of(twin.connection), mem = Rows.of(twin.memory)
        #expect(pg.matches == mem.matches && pg.matches.count == 2)
        #expect(pg.notifications == mem.notifications)
    }

    /// The other writer holds the pair the unit inserts; seeing the unit wait, it goes for the same filter's
    /// notification state, which the unit holds: each waits for the other. The unit waited first, so its
    /// deadlock check runs first and it is the one PostgreSQL gives up; the other writer then gets the state.
    @Test func aUnitThatLosesADeadlockToAnotherWriterIsWrittenAgainInItsTurn() throws {
        let twin = try Self.oneFilterWorld()
        let other = OtherWriter(
            connection: try twin.database.connect(), pair: MatchPair(filterId: 100, profileId: 10),
            deadlockTimeout: Self.otherDeadlockTimeout
        ) { connection, pair in
            _ = try connection.query(
                """
                INSERT INTO matcher_filter_state (filter_id) VALUES ($1)
                ON CONFLICT (filter_id) DO UPDATE SET last_notified_at = matcher_filter_state.last_notified_at
                """, [.int8(pair.filterId)])
        }
        let db = twin.database
        // The run's sessions, opened after the setting: it applies from their start.
        let alter = try twin.connection.query(
            "SELECT format('ALTER DATABASE %I SET deadlock_timeout = %L', current_database(), $1::text)",
            [.text(Self.unitDeadlockTimeout)]
        ).rows[0].string(0)
        try twin.connection.execute(alter)
        let store = PostgresMatchingStore(connection: try db.connect(), writeConnections: 1, faultPoints: other) {
            try db.connect()
        }
        let output = RecordingRunOutput()
        let summary = try RunMatching(MatchingRepositories(store: store), output: output)
            .execute(.init(now: ScenarioWorld.day1))
        let seen = other.finish()
        #expect(seen.failure == nil, "the other writer: \(String(describing: seen.failure))")
        #expect(seen.pairsHeld == 1 && seen.sawTheUnitWait)

        let retries = Self.retries(output)
        #expect(retries.count == 1)
        #expect(retries.allSatisfy { $0.lastFilterId == 100 && $0.attempt == 2 })
        #expect(retries.first?.reason.contains("40P01") == true || retries.first?.reason.contains("deadlock") == true)
        #expect(summary.counters.matchesWritten == 2 && summary.counters.notificationsWritten == 1)
        try Self.expectSameRowsAsMemory(twin)
        let statuses = try twin.connection.query("SELECT status FROM matcher_runs").rows.map { try $0.string(0) }
        #expect(statuses == ["succeeded"])
    }

    /// The other writer holds the pair the unit inserts for longer than the unit's lock timeout, then rolls back:
    /// what a circle through the units' commit order looks like from the unit (PostgreSQL sees no deadlock in
    /// it). The unit gives up its wait (55P03) and is written again; once the other writer is gone, it commits.
    @Test func aUnitThatWaitsPastItsLockTimeoutIsWrittenAgain() throws {
        let twin = try Self.oneFilterWorld()
        let other = OtherWriter(
            connection: try twin.database.connect(), pair: MatchPair(filterId: 100, profileId: 10)
        ) { _, _ in Thread.sleep(forTimeInterval: 1.5) }
        let db = twin.database
        let store = PostgresMatchingStore(
            connection: try db.connect(), writeConnections: 1, faultPoints: other, unitLockTimeout: .seconds(1)
        ) { try db.connect() }
        let output = RecordingRunOutput()
        let summary = try RunMatching(MatchingRepositories(store: store), output: output)
            .execute(.init(now: ScenarioWorld.day1))
        #expect(other.finish().failure == nil)

        let reasons = Self.retries(output).map(\.reason)
        #expect(!reasons.isEmpty)
        #expect(reasons.allSatisfy { $0.contains("55P03") }, "\(reasons)")
        #expect(summary.counters.matchesWritten == 2 && summary.counters.notificationsWritten == 1)
        try Self.expectSameRowsAsMemory(twin)
    }

    /// A unit written ahead of its turn waits inside its transaction while an earlier unit is held up (here by
    /// another writer's row lock, 8 s). Idle in its transaction, the server would end its session after
    /// `idle_in_transaction_session_timeout` (the worker sets it to the network timeout + 30 s; review of session
    /// 23: with a 50 s network timeout, one 60 s lock wait of an earlier unit failed the run). Its wait is itself
    /// a statement, renewed every two seconds at most (`UnitTransaction.awaitUnit` on the held-up unit's lock),
    /// so the session is never idle for longer than a moment and the run goes on. (A separate keep-alive
    /// statement every few seconds did this before session 29's visible waits; session 30 removed it.)
    @Test func aUnitWaitingForItsTurnIsNotTakenForIdle() throws {
        let twin = try Twin()
        let day1 = ScenarioWorld.day1
        try twin.saveProfiles(
            [
                ScenarioWorldProfiles.man(1), ScenarioWorldProfiles.man(2), ScenarioWorldProfiles.woman(10),
                ScenarioWorldProfiles.woman(11),
            ], at: day1)
        try twin.saveFilters(
            [100, 200].map {
                SavedFilter(
                    id: $0, ownerId: $0 / 100, conditionsJSON: #"{"gender": {"anyOf": [2]}}"#, createdAt: day1,
                    updatedAt: day1)
            })
        // The server ends a session idle in a transaction after 3 s; the other writer holds unit 0 for 8 s, while
        // unit 1, written, waits for its turn.
        let other = OtherWriter(
            connection: try twin.database.connect(), pair: MatchPair(filterId: 100, profileId: 10)
        ) { _, _ in Thread.sleep(forTimeInterval: 8) }
        let conninfo = twin.database.conninfo
        let idleAfterThreeSeconds: @Sendable () throws -> PostgresConnection = {
            try PostgresConnection(conninfo, options: ["options": "-c idle_in_transaction_session_timeout=3000"])
        }
        let store = PostgresMatchingStore(
            connection: try idleAfterThreeSeconds(), writeConnections: 2, faultPoints: other,
            openConnection: idleAfterThreeSeconds)
        let summary = try RunMatching(
            MatchingRepositories(store: store), options: PassOptions(unitFilterLimit: 1)
        ).execute(.init(now: day1))
        let seen = other.finish()
        #expect(seen.failure == nil)
        #expect(seen.sawTheUnitWait, "unit 0 waited on the other writer's pair, so unit 1 waited for its turn")
        #expect(summary.counters.matchesWritten == 4 && summary.counters.notificationsWritten == 2)
    }

    /// The two sides of a wait PostgreSQL cannot see start waiting together; with one timeout both gave up at once
    /// and met again (session 29). Each unit's timeout is drawn from 75-125 % of the setting.
    @Test func aUnitsLockTimeoutIsDrawnAroundTheSetting() {
        let drawn = (0..<200).map { _ in PostgresMatchingStore.jittered(60_000) }
        #expect(drawn.allSatisfy { (45_000...75_000).contains($0) })
        #expect(Set(drawn).count > 100)
        #expect(PostgresMatchingStore.jittered(1) >= 1)
    }
}
