import Chronology
import Foundation
import Matching
import MatchingPostgres
import MatchingTestSupport
import PostgresClient
import PostgresTestSupport
import Testing

/// The retention sweep over several connections: every expired pair not waiting for its digest is forgotten
/// exactly once, whatever the batch size, the number of sweepers and the runs' clocks, and a budget that runs
/// out leaves a backlog the next sweeps finish.
@Suite struct RetentionSweepTests {
    /// 40 filters (ids 1...40, notifying), 6 profiles each, recorded at three expired clocks and one kept one;
    /// filter 41's pairs belong to a filter deleted since (outside the ids filters have now). The unnotified
    /// expired pairs of filters 1...13 are on the waiting list, but only those of 1...10 still wait: filter 11
    /// has turned `notify` off, filter 12's digest has passed its over, and filter 13's was held back (none
    /// still qualified). Filter 10's `notify` is NULL (the app dropped NOT NULL): on, as the run reads it. With `bulk`, the pairs of odd filters
    /// are recorded in bulk (out of the retention index, listed by filter and clock), as a first run writes them.
    private func world(bulk: Bool = false) throws -> (TestDatabase, PostgresConnection) {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        let writer = AppTableWriter(connection: connection)
        try writer.upsertProfiles((1...6).map { World.profile(Int64($0)) }, updatedAt: ScenarioWorld.day1)
        try writer.upsertFilters((1...41).map { World.filter(Int64($0), owner: 1) })
        try connection.execute("DELETE FROM saved_filters WHERE id = 41")
        // Clock by filter and profile: days 1, 2 and 3 (expired on day 20 with 7 days kept) and day 19.
        try connection.query(
            """
            INSERT INTO filter_matches (filter_id, profile_id, matched_at, notification_id)
            SELECT f, p, $1::timestamptz + ((f + p) % 4 * CASE WHEN (f + p) % 4 = 3 THEN 6 ELSE 1 END) * interval '1 day',
                   CASE WHEN p % 2 = 0 THEN 1 END
            FROM generate_series(1, 41) f, generate_series(1, 6) p
            """, [.timestamptz(ScenarioWorld.day1)])
        // Every unnotified expired pair of filters 1...10 waits for its filter's first digest.
        try connection.query(
            """
            INSERT INTO matcher_waiting_matches (filter_id, profile_id, matched_at)
            SELECT filter_id, profile_id, matched_at FROM filter_matches
            WHERE filter_id <= 13 AND notification_id IS NULL AND matched_at < $1
            """, [.timestamptz(ScenarioWorld.day1.adding(days: 12))])
        if bulk {
            try connection.execute(
                """
                UPDATE filter_matches SET bulk = true WHERE filter_id % 2 = 1;
                INSERT INTO matcher_bulk_matches (filter_id, matched_at, profile_ids)
                SELECT filter_id, matched_at, array_agg(profile_id ORDER BY profile_id)
                FROM filter_matches WHERE bulk GROUP BY filter_id, matched_at
                """)
        }
        try connection.execute("UPDATE saved_filters SET notify = false WHERE id = 11")
        try connection.execute(
            "ALTER TABLE saved_filters ALTER COLUMN notify DROP NOT NULL; UPDATE saved_filters SET notify = NULL WHERE id = 10"
        )
        try connection.query(
            "INSERT INTO matcher_filter_state (filter_id, last_notified_at) VALUES (12, $1)",
            [.timestamptz(ScenarioWorld.day1.adding(days: 12))])
        // The decisions that passed them over marked the entries they read.
        try connection.execute("UPDATE matcher_waiting_matches SET passed_over = true WHERE filter_id IN (12, 13)")
        return (database, connection)
    }

    private func count(
        _ connection: PostgresConnection, _ sql: String, _ parameters: [PostgresValue] = []
    ) throws -> Int64 {
        try connection.query(sql, parameters).rows[0].int64(0)
    }

    /// The cutoff of the tests: days 1-3 expired, day 19 kept.
    private let cutoff = ScenarioWorld.day1.adding(days: 13)

    /// The pairs recorded before the cutoff, and the waiting list's entries that still wait (all of them
    /// expired).
    private func expiredAndWaiting(_ connection: PostgresConnection) throws -> (Int64, Int64) {
        (
            try count(connection, "SELECT count(*) FROM filter_matches WHERE matched_at < $1", [.timestamptz(cutoff)]),
            try count(connection, "SELECT count(*) FROM matcher_waiting_matches WHERE filter_id <= 10")
        )
    }

    /// A run's units are committed before its sweep: a sweep that cannot have a connection (the connection
    /// slots full) failed the run, and every next run that resumed it, for good (review of session 35, with a
    /// connection limit of 2). It is left to the next runs, with the reason.
    @Test func aSweepWithNoConnectionForItIsLeftToTheNextRuns() throws {
        let (database, connection) = try world()
        defer { connection.close() }
        let before = try count(connection, "SELECT count(*) FROM filter_matches")
        struct SlotsFull: Error, CustomStringConvertible {
            var description: String { "FATAL: too many connections for database" }
        }
        let store = PostgresMatchingStore(connection: connection, writeConnections: 3) { throw SlotsFull() }
        let outcome = try #require(try store.forgetExpired(before: cutoff, batchSize: 7, maxBatches: 10_000))
        #expect(outcome.forgotten == 0 && outcome.backlog)
        #expect(outcome.notStartedBecause?.contains("too many connections") == true)
        #expect(try count(connection, "SELECT count(*) FROM filter_matches") == before)
        _ = database
    }

    @Test(arguments: [
        (1, 7, false), (3, 1, false), (3, 2, false), (2, 100, false), (1, 7, true), (3, 1, true), (2, 100, true),
    ])
    func everyExpiredPairNotWaitingIsForgottenOnce(writeConnections: Int, batchSize: Int, bulk: Bool) throws {
        let (database, connection) = try world(bulk: bulk)
        defer { connection.close() }
        let (expired, waiting) = try expiredAndWaiting(connection)
        let kept = try count(connection, "SELECT count(*) FROM filter_matches") - expired
        #expect(expired > 0 && waiting > 0 && kept > 0)
        #expect(try count(connection, "SELECT count(*) FROM matcher_waiting_matches") > waiting)  // 11 and 12

        let store = PostgresMatchingStore(connection: connection, writeConnections: writeConnections) {
            try database.connect()
        }
        let outcome = try #require(try store.forgetExpired(before: cutoff, batchSize: batchSize, maxBatches: 10_000))
        #expect(outcome.forgotten == Int(expired - waiting))
        #expect(!outcome.backlog)
        // What is left: the pairs kept by their clock, and the waiting ones with their list entries.
        #expect(try count(connection, "SELECT count(*) FROM filter_matches") == kept + waiting)
        let strays = try count(
            connection,
            """
            SELECT count(*) FROM filter_matches m WHERE m.matched_at < $1
              AND NOT EXISTS (SELECT 1 FROM matcher_waiting_matches w
                              WHERE w.filter_id = m.filter_id AND w.profile_id = m.profile_id)
            """, [.timestamptz(cutoff)])
        #expect(strays == 0)
        #expect(try count(connection, "SELECT count(*) FROM matcher_waiting_matches") == waiting)
        // The bulk list holds exactly the bulk pairs left: the expired ones that wait, and the kept clock's.
        let listed = try count(
            connection, "SELECT count(*) FROM matcher_bulk_matches l CROSS JOIN LATERAL unnest(l.profile_ids)")
        #expect(listed == (try count(connection, "SELECT count(*) FROM filter_matches WHERE bulk")))
        let unlisted = try count(
            connection,
            """
            SELECT count(*) FROM filter_matches m WHERE m.bulk AND NOT EXISTS (
                SELECT 1 FROM matcher_bulk_matches l
                WHERE l.filter_id = m.filter_id AND l.matched_at = m.matched_at AND m.profile_id = ANY (l.profile_ids))
            """)
        #expect(unlisted == 0)
        if bulk { #expect(try count(connection, "SELECT count(*) FROM filter_matches WHERE bulk") > 0) }
    }

    /// `matcher status` reads a waiting match as the sweep does: filter 10's NULL `notify` is on, so its matches
    /// wait; filter 11's (notify off) and those of 12 and 13 (passed over) are not notifiable.
    @Test func theStatusCountsWaitingMatchesAsTheSweepKeepsThem() throws {
        let (database, connection) = try world()
        defer {
            connection.close()
            _ = database  // dropped with the last reference
        }
        let digests = try PostgresStatusRepository(connection: connection).serviceStatus(retention: false).digests
        let waiting = try count(connection, "SELECT count(*) FROM matcher_waiting_matches WHERE filter_id <= 10")
        let others = try count(connection, "SELECT count(*) FROM matcher_waiting_matches WHERE filter_id > 10")
        #expect(digests.matches == Int(waiting) && digests.filters == 10)
        #expect(digests.notNotifiable == Int(others))
    }

    @Test(arguments: [false, true])
    func aSpentBudgetLeavesABacklogTheNextSweepsFinish(bulk: Bool) throws {
        let (database, connection) = try world(bulk: bulk)
        defer { connection.close() }
        let (expired, waiting) = try expiredAndWaiting(connection)
        let store = PostgresMatchingStore(connection: connection, writeConnections: 2) { try database.connect() }

        var forgotten = 0
        var sweeps = 0
        while true {
            let outcome = try #require(try store.forgetExpired(before: cutoff, batchSize: 2, maxBatches: 3))
            forgotten += outcome.forgotten
            sweeps += 1
            if !outcome.backlog || sweeps == 100 { break }
        }
        #expect(sweeps > 1)
        #expect(forgotten == Int(expired - waiting))
        #expect(
            try count(connection, "SELECT count(*) FROM filter_matches WHERE matched_at < $1", [.timestamptz(cutoff)])
                == waiting)
    }

    /// Found by review in session 29: a clock holding fewer pairs than a batch is forgotten in one batch, its last,
    /// and a task's last batch was not counted against the budget. 30 runs' clocks of 2 pairs each (an hourly
    /// timer after an outage) were all forgotten by one sweep whose budget was 8 pairs.
    @Test func aClocksLastBatchCountsAgainstTheBudget() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        let writer = AppTableWriter(connection: connection)
        try writer.upsertProfiles((1...2).map { World.profile(Int64($0)) }, updatedAt: ScenarioWorld.day1)
        try writer.upsertFilters((1...30).map { World.filter(Int64($0), owner: 1) })
        // Filter f's pairs at hour f of day 1: 30 clocks, all notified, all expired at the cutoff.
        try connection.query(
            """
            INSERT INTO filter_matches (filter_id, profile_id, matched_at, notification_id)
            SELECT f, p, $1::timestamptz + f * interval '1 hour', 1
            FROM generate_series(1, 30) f, generate_series(1, 2) p
            """, [.timestamptz(ScenarioWorld.day1)])
        let store = PostgresMatchingStore(connection: connection, writeConnections: 2) { try database.connect() }

        let first = try #require(try store.forgetExpired(before: cutoff, batchSize: 4, maxBatches: 2))
        // The budget (8), give or take a batch a connection.
        #expect(first.forgotten <= 8 + 2 * 4, "forgot \(first.forgotten)")
        #expect(first.backlog)
        var forgotten = first.forgotten
        var sweeps = 1
        while sweeps < 100 {
            let outcome = try #require(try store.forgetExpired(before: cutoff, batchSize: 4, maxBatches: 2))
            forgotten += outcome.forgotten
            sweeps += 1
            if !outcome.backlog { break }
        }
        #expect(forgotten == 60)
        #expect(try count(connection, "SELECT count(*) FROM filter_matches") == 0)
    }

    /// A stop request (SIGTERM) during the sweep ends it after the batches in progress, with a backlog that the
    /// next sweep finishes (review of session 23: the sweep ran on, up to 100 batches, past systemd's stop
    /// timeout).
    @Test func aStopRequestEndsTheSweepAfterItsBatchAndTheNextSweepFinishes() throws {
        let (database, connection) = try world(bulk: false)
        defer { connection.close() }
        let (expired, waiting) = try expiredAndWaiting(connection)
        final class StopAfterFirstBatch: StoreFaultPoints, @unchecked Sendable {
            let stop = StopRequest()
            func reach(_ point: StoreFaultPoint) {
                if point == .sweepBetweenPairsAndEntries { stop.request("SIGTERM") }
            }
        }
        let points = StopAfterFirstBatch()
        let store = PostgresMatchingStore(connection: connection, writeConnections: 1, faultPoints: points) {
            try database.connect()
        }
        let first = try #require(
            try store.forgetExpired(
                before: cutoff, passedOverBefore: nil, batchSize: 20, maxBatches: 1_000, stop: points.stop))
        #expect(first.stoppedByRequest == "SIGTERM" && first.backlog)
        #expect(first.forgotten > 0 && first.forgotten <= 20, "one batch, then it stops: \(first.forgotten)")
        #expect(expired - waiting > 20)
        let rest = try #require(try store.forgetExpired(before: cutoff, batchSize: 1_000, maxBatches: 1_000))
        #expect(rest.stoppedByRequest == nil && !rest.backlog)
        #expect(first.forgotten + rest.forgotten == Int(expired - waiting))
    }

    /// More expired clocks that hold waiting matches than a sweep lists (here 2; 500 in production: an hourly
    /// timer with monthly digests has 700 a month) never keep it from the run that has just expired, and each
    /// is visited again in turn: once its matches stop waiting, they are forgotten within a few sweeps.
    @Test func clocksOfWaitingMatchesNeverKeepTheSweepFromTheRunJustExpired() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        let writer = AppTableWriter(connection: connection)
        try writer.upsertProfiles((1...6).map { World.profile(Int64($0)) }, updatedAt: ScenarioWorld.day1)
        try writer.upsertFilters((1...2).map { World.filter(Int64($0), owner: 1) })
        // Filter 1: one match waiting at each of days 1-6. Filter 2: six matches of day 10, notified.
        try connection.query(
            """
            INSERT INTO filter_matches (filter_id, profile_id, matched_at, notification_id)
            SELECT 1, d, $1::timestamptz + (d - 1) * interval '1 day', NULL FROM generate_series(1, 6) d
            UNION ALL
            SELECT 2, p, $1::timestamptz + interval '9 days', 1 FROM generate_series(1, 6) p
            """, [.timestamptz(ScenarioWorld.day1)])
        try connection.execute(
            """
            INSERT INTO matcher_waiting_matches (filter_id, profile_id, matched_at)
            SELECT filter_id, profile_id, matched_at FROM filter_matches WHERE filter_id = 1
            """)
        let store = PostgresMatchingStore(connection: connection, writeConnections: 2, sweepClocks: 2) {
            try database.connect()
        }
        let pairsOf = { (filter: Int64) in
            try self.count(connection, "SELECT count(*) FROM filter_matches WHERE filter_id = $1", [.int8(filter)])
        }

        let first = try #require(try store.forgetExpired(before: cutoff, batchSize: 100, maxBatches: 10))
        #expect(first.forgotten == 6 && !first.backlog)
        #expect(try pairsOf(2) == 0)
        #expect(try pairsOf(1) == 6)

        // Filter 1's digest goes out with none of them (they no longer qualified): none waits any more.
        try connection.query(
            "INSERT INTO matcher_filter_state (filter_id, last_notified_at) VALUES (1, $1)",
            [.timestamptz(ScenarioWorld.day1.adding(days: 7))])
        try connection.execute("UPDATE matcher_waiting_matches SET passed_over = true WHERE filter_id = 1")
        var sweeps = 0
        while try pairsOf(1) > 0, sweeps < 10 {
            _ = try #require(try store.forgetExpired(before: cutoff, batchSize: 100, maxBatches: 10))
            sweeps += 1
        }
        #expect(try pairsOf(1) == 0)
        #expect(sweeps <= 3)
        #expect(try count(connection, "SELECT count(*) FROM matcher_waiting_matches") == 0)
    }

    /// A run with a large `--max-per-filter` lists many pairs in one list row: a batch of bulk pairs takes the
    /// rows that begin within its size, not a fixed count of rows.
    @Test func aBatchOfBulkPairsIsBoundedByPairsNotListRows() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        try AppTableWriter(connection: connection).upsertFilters([World.filter(1, owner: 1)])
        // Filter 1: 250 pairs recorded in bulk on each of days 1 and 2, notified: two list rows.
        try connection.query(
            """
            INSERT INTO filter_matches (filter_id, profile_id, matched_at, notification_id, bulk)
            SELECT 1, d * 1000 + p, $1::timestamptz + (d - 1) * interval '1 day', 1, true
            FROM generate_series(1, 2) d, generate_series(1, 250) p;
            """, [.timestamptz(ScenarioWorld.day1)])
        try connection.execute(
            """
            INSERT INTO matcher_bulk_matches (filter_id, matched_at, profile_ids)
            SELECT filter_id, matched_at, array_agg(profile_id ORDER BY profile_id)
            FROM filter_matches GROUP BY filter_id, matched_at
            """)
        let store = PostgresMatchingStore(connection: connection, writeConnections: 1) { try database.connect() }
        // A batch of 200 pairs (two list rows of 100 by the rows' usual size): one row of 250 here.
        let first = try #require(try store.forgetExpired(before: cutoff, batchSize: 200, maxBatches: 1))
        #expect(first.forgotten == 250 && first.backlog)
        let second = try #require(try store.forgetExpired(before: cutoff, batchSize: 200, maxBatches: 1))
        #expect(second.forgotten == 250)
        #expect(try count(connection, "SELECT count(*) FROM filter_matches") == 0)
        #expect(try count(connection, "SELECT count(*) FROM matcher_bulk_matches") == 0)
    }

    /// Whether a listed match waits follows columns the app can turn back: here filter 11's `notify` is turned on
    /// again while a batch is between deleting its pairs (filter 11's did not wait) and deleting their entries.
    /// The entries of the pairs it deleted go all the same; read as "the entries that no longer wait" they
    /// stayed without their pairs (a digest would have counted them, and the pair's next listing failed on them).
    @Test func entriesGoWithTheirPairsWhateverTheAppTurnsBackMeanwhile() throws {
        let (database, connection) = try world()
        defer { connection.close() }
        let app = try database.connect()
        defer { app.close() }
        let listedOff = try count(
            connection, "SELECT count(*) FROM matcher_waiting_matches WHERE filter_id = 11 AND matched_at < $1",
            [.timestamptz(cutoff)])
        #expect(listedOff > 0)
        final class TurnNotifyBackOn: StoreFaultPoints, @unchecked Sendable {
            let app: PostgresConnection
            private let lock = NSLock()
            private var done = false
            init(_ app: PostgresConnection) { self.app = app }
            func reach(_ point: StoreFaultPoint) {
                guard point == .sweepBetweenPairsAndEntries,
                    lock.withLock({
                        !done
                            && {
                                done = true; return true
                            }()
                    })
                else { return }
                _ = try? app.query("UPDATE saved_filters SET notify = true WHERE id = 11")
            }
        }
        let store = PostgresMatchingStore(
            connection: connection, writeConnections: 1, faultPoints: TurnNotifyBackOn(app)
        ) { try database.connect() }
        _ = try #require(try store.forgetExpired(before: cutoff, batchSize: 10_000, maxBatches: 10_000))
        let strays = try count(
            connection,
            """
            SELECT count(*) FROM matcher_waiting_matches w WHERE NOT EXISTS (
                SELECT 1 FROM filter_matches m
                WHERE m.filter_id = w.filter_id AND m.profile_id = w.profile_id AND m.matched_at = w.matched_at)
            """)
        #expect(strays == 0)
        #expect(try count(connection, "SELECT count(*) FROM saved_filters WHERE id = 11 AND notify") == 1)
    }

    /// A filter whose id is -2^63 holding more than a batch at one clock: the batch's bound is that filter itself,
    /// and "the filters before it" was computed as its id - 1 in SQL, out of bigint's range (every run failed in
    /// its forget phase). Its pairs go through the bounded batches like any large filter's.
    @Test func theLowestFilterIdHoldingMoreThanABatchIsForgotten() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        try connection.query(
            """
            INSERT INTO filter_matches (filter_id, profile_id, matched_at, notification_id)
            SELECT f, p, $1, 1 FROM (VALUES (-9223372036854775808), (7)) AS v(f), generate_series(1, 5) p
            """, [.timestamptz(ScenarioWorld.day1)])
        let store = PostgresMatchingStore(connection: connection, writeConnections: 1) { try database.connect() }
        let outcome = try #require(try store.forgetExpired(before: cutoff, batchSize: 2, maxBatches: 100))
        #expect(outcome.forgotten == 10 && !outcome.backlog)
        #expect(try count(connection, "SELECT count(*) FROM filter_matches") == 0)
    }

    /// The sweep cuts the filter ids the app has into ranges for its connections; the ids are any bigints (a
    /// deleted filter's too), and a span of more than `Int64.max` between two of them stopped the process on an
    /// overflow in every run that had pairs to forget. Whatever the ids, the ranges cover every id once, in order.
    static let idSpans: [(low: Int64, high: Int64)] = [
        (Int64.min, Int64.max), (Int64.min, 0), (-1, Int64.max), (Int64.max - 3, Int64.max), (5, 5), (7, 3),
        (1, 20_000), (Int64.min, Int64.min + 2),
    ]

    @Test(arguments: idSpans)
    func filterRangesCoverEveryIdOnceWhateverTheIds(low: Int64, high: Int64) {
        for count in [1, 3, 12] {
            let ranges = RetentionSweep.filterRanges(low: low, high: high, count: count)
            #expect(!ranges.isEmpty && ranges.count <= count)
            #expect(ranges.first?.lowerBound == Int64.min && ranges.last?.upperBound == Int64.max)
            for (a, b) in zip(ranges, ranges.dropFirst()) { #expect(a.upperBound &+ 1 == b.lowerBound) }
        }
    }

    @Test func anotherSweeperHoldingTheLockMakesTheSweepSkip() throws {
        let (database, connection) = try world()
        defer { connection.close() }
        let holder = try database.connect()
        defer { holder.close() }
        let locked = try holder.query("SELECT pg_try_advisory_lock(1296126976, 3)").rows[0].bool(0)
        #expect(locked)
        let store = PostgresMatchingStore(connection: connection, writeConnections: 3) { try database.connect() }
        let outcome = try store.forgetExpired(before: ScenarioWorld.day1.adding(days: 13), batchSize: 5, maxBatches: 10)
        #expect(outcome?.forgotten == nil)
    }

    /// Another writer (a concurrent run's unit, say) holds a row lock on an expired pair of `filterId` that is not
    /// waiting, in a transaction left open on `holder`; returns the transaction id other backends wait for.
    private func holdExpiredPair(of filterId: Int64, on holder: PostgresConnection) throws -> String {
        try holder.execute("BEGIN")
        let held = try holder.query(
            """
            SELECT profile_id FROM filter_matches WHERE filter_id = $1 AND matched_at < $2
            ORDER BY profile_id LIMIT 1 FOR UPDATE
            """, [.int8(filterId), .timestamptz(cutoff)])
        #expect(held.rows.count == 1)
        return try holder.query("SELECT (txid_current() % 4294967296)::text").rows[0].string(0)
    }

    /// The transaction (its virtual id) that waits for transaction `xid`, other than `except`: polled every 10 ms
    /// for up to 30 s; nil if none came.
    private func waiter(for xid: String, except: String? = nil, _ connection: PostgresConnection) throws -> String? {
        for _ in 0..<3_000 {
            let waiting = try connection.query(
                """
                SELECT virtualtransaction FROM pg_locks
                WHERE NOT granted AND locktype = 'transactionid' AND transactionid::text = $1
                """, [.text(xid)]
            ).rows.map { try $0.string(0) }
            if let found = waiting.first(where: { $0 != except }) { return found }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return nil
    }

    /// The other writer lets go of its row once the sweep's batch has given up waiting for it (55P03, the
    /// sweepers' `lock_timeout`) and its second attempt waits: that attempt goes through, and the sweep forgets
    /// everything, as if nothing had been in its way. Pairs by the retention index (filter 20) and recorded in
    /// bulk (filter 21).
    @Test(arguments: [(false, Int64(20)), (true, Int64(21))])
    func aBatchHeldUpByAnotherWriterIsTriedAgain(bulk: Bool, lockedFilter: Int64) throws {
        let (database, connection) = try world(bulk: bulk)
        defer { connection.close() }
        let (expired, waiting) = try expiredAndWaiting(connection)
        let holder = try database.connect()
        defer { holder.close() }
        let xid = try holdExpiredPair(of: lockedFilter, on: holder)
        let watcher = try database.connect()
        defer { watcher.close() }
        let released = DispatchSemaphore(value: 0)
        let sawTheWait = Locked(false)
        Thread.detachNewThread { [self] in
            // The first attempt's wait, then another transaction's: the second attempt. Then gone.
            let first = try? waiter(for: xid, watcher)
            let second = first.flatMap { try? waiter(for: xid, except: $0, watcher) }
            sawTheWait.update { $0 = second != nil }
            try? holder.execute("ROLLBACK")
            released.signal()
        }
        let store = PostgresMatchingStore(connection: connection, writeConnections: 1, sweepLockTimeout: .seconds(1)) {
            try database.connect()
        }
        let outcome = try #require(try store.forgetExpired(before: cutoff, batchSize: 1_000, maxBatches: 10_000))
        released.wait()
        #expect(sawTheWait.value)
        #expect(outcome.conflictsRolledBack == 1)
        #expect(outcome.stoppedByConflict == nil && !outcome.backlog)
        #expect(outcome.forgotten == Int(expired - waiting))
        #expect(try expiredAndWaiting(connection) == (waiting, waiting))
    }

    /// The other writer keeps its row through every attempt: the sweep stops there with a backlog and the
    /// database's reason, without an error (the run it ends has committed its units and succeeds), and the next
    /// sweep, once the row is free, forgets the rest: each expired pair not waiting exactly once in all.
    @Test(arguments: [(false, Int64(20)), (true, Int64(21))])
    func aBatchThatKeepsConflictingLeavesABacklogTheNextSweepFinishes(bulk: Bool, lockedFilter: Int64) throws {
        let (database, connection) = try world(bulk: bulk)
        defer { connection.close() }
        let (expired, waiting) = try expiredAndWaiting(connection)
        let holder = try database.connect()
        defer { holder.close() }
        _ = try holdExpiredPair(of: lockedFilter, on: holder)
        let store = PostgresMatchingStore(connection: connection, writeConnections: 2, sweepLockTimeout: .seconds(1)) {
            try database.connect()
        }
        let first = try #require(try store.forgetExpired(before: cutoff, batchSize: 1_000, maxBatches: 10_000))
        #expect(first.backlog && first.conflictsRolledBack == 3)
        let reason = try #require(first.stoppedByConflict)
        #expect(reason.contains("55P03") || reason.contains("lock timeout"))
        #expect(first.forgotten < Int(expired - waiting))
        #expect(first.notificationsForgotten == 0)

        try holder.execute("ROLLBACK")
        let second = try #require(try store.forgetExpired(before: cutoff, batchSize: 1_000, maxBatches: 10_000))
        #expect(!second.backlog && second.stoppedByConflict == nil && second.conflictsRolledBack == 0)
        #expect(first.forgotten + second.forgotten == Int(expired - waiting))
        #expect(try expiredAndWaiting(connection) == (waiting, waiting))
    }
}
